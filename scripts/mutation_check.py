"""Check that the test suite catches known wrong implementations.

Each mutation below is a small, plausible mistake (the clip using the wrong epsilon, a resume
that forgets the optimizer state, ...). For each one this script copies the project into a
scratch folder, applies the mutation there, runs the tests that claim to guard against it and
reports whether they failed. The working tree is never touched. A mutation the tests do not
catch is a claim of the suite that does not hold.

    python scripts/mutation_check.py                  # every mutation (about 20 minutes)
    python scripts/mutation_check.py --only optuna    # those whose name contains "optuna"
    python scripts/mutation_check.py --list           # what would run

The tests first run once on an unmutated copy: a test that fails anyway proves nothing. Exit
status 1 when they do, or when any mutation goes uncaught or no longer applies.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    """Replace `old` (which must occur exactly once) by `new` in `path`; `tests` must fail."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


RESUME = "tests/runs/test_resume.py"
OBJECTIVE = "tests/grpo/test_objective.py"
ADVANTAGES = "tests/grpo/test_advantages.py"
LOSSES = "tests/grpo/test_policy_losses.py"
MUTATIONS = [
    Mutation(
        "retrieval: a term a query repeats scores once per repeat whatever the setting",
        "src/retrieval/bm25.py",
        'return list(dict.fromkeys(terms)) if self.repeated_terms == "once" else terms',
        "return terms",
        ("tests/retrieval/test_bm25.py",),
    ),
    Mutation(
        "query shape: a term shared by two queries of a completion counts as a repeat",
        "src/policy/query_terms.py",
        "    counts = [Counter(query_terms(query)) for query in queries]\n",
        "    counts = [Counter(term for query in queries for term in query_terms(query))] * bool(queries)\n",
        ("tests/policy/test_query_terms.py",),
    ),
    Mutation(
        "unseen split: a kind of the training rows is let through",
        "src/data/datamodule.py",
        "        shared = sorted(kinds(rows) & kinds(train_rows))\n",
        "        shared = []\n",
        ("tests/data/test_unseen_split.py",),
    ),
    Mutation(
        "decoding: the columns not yet written are left open when the room is read whole",
        "src/model/fast/llama_steps.py",
        "        bias[:, :filled].masked_fill_(real, 0.0)\n",
        "        bias[:, :filled].masked_fill_(real, 0.0)\n        bias[:, filled:] = 0.0\n",
        ("tests/model/fast/test_llama_steps.py",),
    ),
    Mutation(
        "decoding: a step does not open the column it writes",
        "src/model/fast/llama_steps.py",
        "        self.bias[..., at] = 0.0  # the column this step writes is open from now on\n",
        "",
        ("tests/model/fast/test_llama_steps.py",),
    ),
    Mutation(
        "shared prompt: rows take their prompt's cache by repeats in unequal groups too",
        "src/model/fast/shared_prompt.py",
        "if owner.numel() == prompts * repeats and torch.equal(owner, in_groups):",
        "if True:",
        ("tests/model/test_causal_lm.py",),
    ),
    Mutation(
        "oneDNN linear without its bias gradient",
        "src/model/fast/onednn.py",
        "            grad_bias = flat.sum(0)\n",
        "            grad_bias = None\n",
        ("tests/model/fast/test_onednn.py",),
    ),
    Mutation(
        "the oneDNN probe leaves the weight gradients unchecked",
        "src/model/fast/onednn.py",
        "leaves = [inputs, weight] if trains[shape] else [inputs]",
        "leaves = [inputs]",
        ("tests/model/fast/test_onednn.py",),
    ),
    Mutation(
        "oneDNN: the lean MLP's backward ignores the gradients' verdict",
        "src/model/fast/lean_layers.py",
        "onednn.is_routed(down), onednn.routes_gradients(down)",
        "onednn.is_routed(down), onednn.is_routed(down)",
        ("tests/model/fast/test_onednn.py",),
    ),
    Mutation(
        "oneDNN: a verdict in doubt is kept",
        "src/model/fast/onednn.py",
        "return low <= FASTER_BY <= high and high - low > CLOSE",
        "return False",
        ("tests/model/fast/test_onednn.py",),
    ),
    Mutation(
        "oneDNN: one verdict for every width",
        "src/model/fast/onednn.py",
        'name = f"{verdict}.{widths[0]}x{widths[1]}"',
        'name = f"{verdict}"',
        ("tests/model/fast/test_onednn.py",),
    ),
    Mutation(
        "oneDNN: the routing times its verdicts at 1024 rows whatever its pass's",
        "src/model/fast/onednn.py",
        "rows = None if tokens is None else pass_rows(tokens)",
        "rows = None",
        ("tests/model/fast/test_onednn.py",),
    ),
    Mutation(
        "oneDNN: the grouped log-probs leave their pass's tokens out",
        "src/model/causal_lm.py",
        "            with self._lean(tokens):\n                return self._grouped_log_probs",
        "            with self._lean():\n                return self._grouped_log_probs",
        ("tests/model/fast/test_onednn.py",),
    ),
    Mutation(
        "oneDNN: decoding reorders each weight on every call",
        "src/model/fast/packed.py",
        "weight=onednn.prepacked(weight, rows)",
        "weight=weight",
        ("tests/model/fast/test_onednn.py",),
    ),
    Mutation(
        "oneDNN: the decoding verdict times plain weights",
        "src/model/fast/onednn.py",
        '        given["onednn"] = [(x, prepacked(w, x.size(0)), g) for x, w, g in operands]',
        "        pass",
        ("tests/model/fast/test_onednn.py",),
    ),
    Mutation(
        "oneDNN: the decoding verdict times weights the caches hold",
        "src/model/fast/onednn.py",
        "copies = weight_copies(shapes, dtype.itemsize) if decoding else 1",
        "copies = 1",
        ("tests/model/fast/test_onednn.py",),
    ),
    Mutation(
        "oneDNN: bfloat16 decoding never reads reordered copies",
        "src/model/fast/llama_steps.py",
        "        return cls(reordered, reordered, dtype)",
        "        return cls(False, False, dtype)",
        ("tests/model/fast/test_onednn.py",),
    ),
    Mutation(
        "grouped attention: padding keys read",
        "src/model/fast/grouped_attention.py",
        "        scores = scores.masked_fill(~allowed, torch.finfo(torch.float32).min)",
        "        scores = scores",
        ("tests/model/fast/test_grouped_attention.py",),
    ),
    Mutation(
        "grouped attention: a query reading no key averages the values",
        "src/model/fast/grouped_attention.py",
        "    out = out.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)",
        "    out = out",
        ("tests/model/fast/test_grouped_attention.py",),
    ),
    Mutation(
        "decoding: a half type's logits widened into a buffer never refilled",
        "src/rollout/decode.py",
        "        return self.buffer.copy_(logits)",
        "        return self.buffer",
        ("tests/rollout/test_decode.py",),
    ),
    Mutation(
        "resume without restoring the weights",
        "src/grpo/module.py",
        '        state = checkpoint.get("grpo", {})\n',
        '        checkpoint["state_dict"] = self.state_dict()\n'
        '        state = checkpoint.get("grpo", {})\n',
        (RESUME,),
    ),
    Mutation(
        "resume without restoring the optimizer state",
        "src/grpo/module.py",
        '        state = checkpoint.get("grpo", {})\n',
        '        checkpoint["optimizer_states"] = []\n        state = checkpoint.get("grpo", {})\n',
        (RESUME,),
    ),
    Mutation(
        "resume without restoring the random generators",
        "src/grpo/module.py",
        "            set_rng_states(saved[rank()] if isinstance(saved, list) else saved)\n",
        "            pass\n",
        (RESUME,),
    ),
    Mutation(
        "the clamp using epsilon_low on both sides",
        "src/grpo/policy_losses.py",
        "torch.clamp(ratio, 1 - settings.epsilon_low, 1 + settings.epsilon_high)",
        "torch.clamp(ratio, 1 - settings.epsilon_low, 1 + settings.epsilon_low)",
        (OBJECTIVE,),
    ),
    Mutation(
        "the clamp using epsilon_high on both sides",
        "src/grpo/policy_losses.py",
        "torch.clamp(ratio, 1 - settings.epsilon_low, 1 + settings.epsilon_high)",
        "torch.clamp(ratio, 1 - settings.epsilon_high, 1 + settings.epsilon_high)",
        (OBJECTIVE,),
    ),
    Mutation(
        "the surrogate without its min",
        "src/grpo/policy_losses.py",
        "per_token = -torch.min(unclipped * advantages, clipped * advantages)",
        "per_token = -clipped * advantages",
        (OBJECTIVE,),
    ),
    Mutation(
        "the surrogate with max for min",
        "src/grpo/policy_losses.py",
        "per_token = -torch.min(unclipped * advantages, clipped * advantages)",
        "per_token = -torch.max(unclipped * advantages, clipped * advantages)",
        (OBJECTIVE,),
    ),
    Mutation(
        "bnpo normalised per sequence",
        "src/grpo/objective.py",
        '    if how == "seq-mean-token-mean":\n',
        '    if how in ("seq-mean-token-mean", "token-mean"):\n',
        (OBJECTIVE,),
    ),
    Mutation(
        "dr_grpo normalised by the longest completion of the batch",
        "src/grpo/objective.py",
        "(sequences * max_completion_length)",
        "(sequences * per_token.size(1))",
        (OBJECTIVE,),
    ),
    Mutation(
        "the KL term with the wrong sign",
        "src/grpo/objective.py",
        "loss = pg_loss + kl_penalty",
        "loss = pg_loss - kl_penalty",
        (OBJECTIVE,),
    ),
    Mutation(
        "CISPO's weight not detached",
        "src/grpo/policy_losses.py",
        "torch.clamp(ratio, max=settings.epsilon_high).detach()",
        "torch.clamp(ratio, max=settings.epsilon_high)",
        (LOSSES,),
    ),
    Mutation(
        "SAPO's temperatures swapped",
        "src/grpo/policy_losses.py",
        "settings.sapo_temperature_pos, settings.sapo_temperature_neg)",
        "settings.sapo_temperature_neg, settings.sapo_temperature_pos)",
        (LOSSES,),
    ),
    Mutation(
        "delta ignored",
        "src/grpo/policy_losses.py",
        "torch.clamp(ratio, max=settings.delta)",
        "ratio",
        (LOSSES,),
    ),
    Mutation(
        "top_entropy_quantile's threshold at the wrong quantile",
        "src/grpo/objective.py",
        "torch.quantile(entropies.float(), 1.0 - keep)",
        "torch.quantile(entropies.float(), keep)",
        ("tests/grpo/test_passes.py",),
    ),
    Mutation(
        "GDPO without the batch normalisation",
        "src/grpo/advantages.py",
        "return (total - total.mean()) / (total.std() + eps)",
        "return total",
        (ADVANTAGES,),
    ),
    Mutation(
        "rloo's baseline over the whole group, itself included",
        "src/grpo/advantages.py",
        "- groups) / (group_size - 1)",
        "- groups) / group_size",
        (ADVANTAGES,),
    ),
    Mutation(
        "reinforce_pp whitened over completions, not tokens",
        "src/grpo/advantages.py",
        "weights = lengths.to(centred.dtype)",
        "weights = torch.ones_like(centred)",
        (ADVANTAGES,),
    ),
    Mutation(
        "GSPO's ratio from the sum of the token log-ratios, not their mean",
        "src/grpo/objective.py",
        "log_ratio = ((log_ratio * mask).sum(dim=1, keepdim=True) / counts)",
        "log_ratio = (log_ratio * mask).sum(dim=1, keepdim=True)",
        (OBJECTIVE,),
    ),
    Mutation(
        "the nothing-to-learn count never restarting",
        "src/grpo/tied.py",
        "self.in_a_row + 1 if tied_share >= 1.0 else 0",
        "self.in_a_row + 1",
        ("tests/grpo/test_tied.py",),
    ),
    Mutation(
        "logits multiplied by the temperature",
        "src/model/causal_lm.py",
        "logits = logits / temperature",
        "logits = logits * temperature",
        ("tests/model/test_causal_lm.py",),
    ),
    Mutation(
        "entropy halved",
        "src/model/causal_lm.py",
        "entropy[start : start + rows] = log_norm[start : start + rows] - (probs * part).sum(-1)",
        "entropy[start : start + rows] = (log_norm[start : start + rows] - (probs * part).sum(-1)) / 2",
        ("tests/model/test_causal_lm.py",),
    ),
    Mutation(
        "an unseeded held-out shuffle of a data file",
        "src/data/datamodule.py",
        "random.Random(self.seed).shuffle(rows)",
        "random.Random().shuffle(rows)",
        ("tests/data/test_files.py",),
    ),
    Mutation(
        "an unseeded shuffle of the built-in arithmetic problems",
        "src/data/arithmetic.py",
        "random.Random(seed).shuffle(rows)",
        "random.Random().shuffle(rows)",
        ("tests/data/test_files.py",),
    ),
    Mutation(
        "the frozen reference being the trained network itself",
        "src/model/causal_lm.py",
        "frozen = copy.deepcopy(self.network).eval().requires_grad_(False)",
        "frozen = self.network",
        ("tests/test_train.py::test_frozen_reference_copy_without_lora",),
    ),
    Mutation(
        "the LoRA reference with the adapter left on",
        "src/model/causal_lm.py",
        "        with self.lm.adapter_disabled():\n",
        "        with torch.no_grad():\n",
        ("tests/test_train.py::test_kl_lora_and_several_iterations",),
    ),
    Mutation(
        "evaluating the base model instead of a saved full model",
        "src/model/saved.py",
        '            "name_or_path": str(folder),\n',
        "",
        ("tests/recipes/test_medmcqa.py::test_evaluate_scores_a_saved_full_model_not_the_base",),
    ),
    Mutation(
        "held-out accuracy scored on training rows",
        "src/data/datamodule.py",
        "return held_out_loader(self.val_rows, self.eval_batch_size)",
        "return held_out_loader(self.train_rows[: len(self.val_rows)], self.eval_batch_size)",
        ("tests/test_train.py::test_held_out_accuracy_is_that_of_the_policys_greedy_answers",),
    ),
    Mutation(
        "Optuna minimizing",
        "conf/hparams_search/optuna.yaml",
        "direction: maximize",
        "direction: minimize",
        ("tests/tracking/test_sweep.py::test_optuna_search_maximizes_eval_accuracy",),
    ),
    Mutation(
        "the sweep's best run picked as the lowest",
        "src/tracking/sweep_callback.py",
        'pick = min if state["minimize"] else max',
        "pick = min",
        ("tests/tracking/test_sweep.py::test_six_job_sweep_leaves_six_children_and_a_parent",),
    ),
]


def project_files() -> list[str]:
    """Tracked files and new ones git does not ignore: what a commit would hold."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [name for name in listed.stdout.splitlines() if (ROOT / name).is_file()]


def scratch_copy(files: list[str], target: Path) -> None:
    for name in files:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target / name)


def apply(mutation: Mutation, root: Path) -> None:
    path = root / mutation.path
    text = path.read_text()
    count = text.count(mutation.old)
    if count != 1:
        raise LookupError(
            f"{mutation.path}: the text to mutate occurs {count} times, not once; update the "
            f"mutation {mutation.name!r} in scripts/mutation_check.py"
        )
    path.write_text(text.replace(mutation.old, mutation.new))


def run_pytest(
    tests: list[str] | tuple[str, ...], root: Path
) -> tuple[subprocess.CompletedProcess, float]:
    """pytest on `tests` in the copy at `root`, with this interpreter; the result and seconds."""
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", *tests],
        cwd=root,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    return result, time.perf_counter() - start


def run_tests(mutation: Mutation, root: Path) -> tuple[bool, str, float]:
    """Run the mutation's tests in `root`; (caught, the tests that failed, seconds)."""
    result, seconds = run_pytest(mutation.tests, root)
    failed = re.findall(r"^FAILED (\S+)", result.stdout, flags=re.MULTILINE)
    if result.returncode == 0:
        return False, "all passed", seconds
    if not failed:  # an error before any test ran is not a catch
        tail = (result.stdout + result.stderr).strip().splitlines()[-3:]
        return False, "tests did not run: " + " | ".join(tail), seconds
    more = f" and {len(failed) - 1} more" if len(failed) > 1 else ""
    return True, failed[0] + more, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="run mutations whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the mutations and stop")
    parser.add_argument(
        "--skip-baseline", action="store_true", help="do not first run the tests unmutated"
    )
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if args.only.lower() in m.name.lower()]
    if args.list or not chosen:
        for mutation in chosen or MUTATIONS:
            print(f"{mutation.name}: {mutation.path} -> {' '.join(mutation.tests)}")
        return 0 if chosen else 1
    files = project_files()
    if not args.skip_baseline:  # a test that fails anyway would count every mutation as caught
        tests = sorted({test for mutation in chosen for test in mutation.tests})
        with tempfile.TemporaryDirectory(prefix="unmutated-") as folder:
            scratch_copy(files, Path(folder))
            result, seconds = run_pytest(tests, Path(folder))
        if result.returncode != 0:
            print(result.stdout[-3000:])
            print("The tests fail without any mutation; fix them before checking mutations.")
            return 1
        print(f"unmutated: {result.stdout.strip().splitlines()[-1]} ({seconds:.0f} s)\n")
    missed = 0
    print(f"{'mutation':58} {'caught':7} {'seconds':>7}  by")
    for mutation in chosen:
        with tempfile.TemporaryDirectory(prefix="mutant-") as folder:
            root = Path(folder)
            scratch_copy(files, root)
            try:
                apply(mutation, root)
                caught, by, seconds = run_tests(mutation, root)
            except LookupError as error:
                caught, by, seconds = False, str(error), 0.0
        missed += not caught
        print(f"{mutation.name:58} {'yes' if caught else 'NO':7} {seconds:7.0f}  {by}", flush=True)
    print(f"{len(chosen) - missed} of {len(chosen)} mutations caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
