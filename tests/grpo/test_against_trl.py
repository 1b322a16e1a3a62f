"""Our losses and advantages against TRL's own computation on the same tensors.

Losses: `GRPOTrainer._compute_loss` run on a stand-in trainer whose model returns the given
log-probs. Advantages: TRL's real `GRPOTrainer` and `RLOOTrainer` on the tiny model, their
`_generate_and_score_completions` scoring a batch with reward functions that return fixed
rewards whatever was sampled. Runs when TRL is installed (`pip install .[bench]`); its
version's computation is what is compared."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

trl_grpo = pytest.importorskip(
    "trl.trainer.grpo_trainer", reason="TRL is not installed: pip install .[bench]"
)

N, T, MAX_LENGTH = 4, 5, 6


class OneProcess:
    """The parts of accelerate's Accelerator that the loss reads, for one process."""

    num_processes = 1
    sync_gradients = True

    def gather(self, tensor):
        return tensor

    gather_for_metrics = gather

    def reduce(self, tensor, reduction="sum"):
        return tensor


def trl_loss(logps, old, ref, advantages, mask, *, loss_type, beta, eps, level, delta, sapo):
    """TRL's loss of these tensors, with its settings of the same names."""
    trainer = SimpleNamespace(
        _get_per_token_logps_and_entropies=lambda *args, **kwargs: (
            logps,
            torch.zeros_like(logps),
            None,
        ),
        aux_loss_enabled=False,
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        importance_sampling_level=level,
        beta=beta,
        loss_type=loss_type,
        epsilon_low=eps[0],
        epsilon_high=eps[1],
        args=SimpleNamespace(
            use_bias_correction_kl=False,
            steps_per_generation=1,  # one generation batch per optimizer step
            delta=delta,
            sapo_temperature_pos=sapo[0],
            sapo_temperature_neg=sapo[1],
        ),
        use_vllm=False,
        vllm_importance_sampling_correction=False,
        model=SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1,
        accelerator=OneProcess(),
        _entropy_bonus_enabled=False,
        max_completion_length=MAX_LENGTH,
        _metrics=defaultdict(lambda: defaultdict(list)),
    )
    inputs = {
        "prompt_ids": torch.zeros(N, 2, dtype=torch.long),
        "prompt_mask": torch.ones(N, 2, dtype=torch.long),
        "completion_ids": torch.zeros(N, T, dtype=torch.long),
        "completion_mask": mask,
        "advantages": advantages,
        "old_per_token_logps": old,
        "ref_per_token_logps": ref,
        "num_items_in_batch": mask.sum(),
    }
    return trl_grpo.GRPOTrainer._compute_loss(trainer, None, inputs)


# (TRL's loss_type, our policy loss, our loss_type, settings)
CASES = [
    ("grpo", "clip", "grpo", {}),
    ("bnpo", "clip", "bnpo", {}),
    ("dapo", "clip", "token-mean", {"eps": (0.2, 0.28)}),
    ("dr_grpo", "clip", "seq-mean-token-sum-norm", {}),
    ("grpo", "clip", "grpo", {"beta": 0.04}),
    ("dapo", "clip", "dapo", {"beta": 0.04}),
    ("grpo", "clip", "grpo", {"level": "sequence", "eps": (3e-4, 4e-4)}),
    ("grpo", "clip", "grpo", {"delta": 1.5}),
    ("cispo", "cispo", "token-mean", {"eps": (0.2, 1.1)}),
    ("sapo", "sapo", "grpo", {"sapo": (1.0, 1.05)}),
    ("sapo", "sapo", "grpo", {"sapo": (0.5, 2.0), "beta": 0.04}),
]


@pytest.mark.parametrize(("trl_type", "policy", "loss_type", "settings"), CASES)
def test_our_loss_and_its_gradient_equal_trls(trl_type, policy, loss_type, settings) -> None:
    from src.grpo.objective import Objective, TokenLogProbs, grpo_loss
    from src.grpo.policy_losses import LossSettings

    options = {"beta": 0.0, "eps": (0.2, 0.2), "level": "token", "delta": None, "sapo": (1.0, 1.05)}
    options.update(settings)
    generator = torch.Generator().manual_seed(0)
    base = -torch.rand(N, T, generator=generator) * 3
    old = base + 0.4 * torch.randn(N, T, generator=generator)  # ratios from about 0.3 to 3
    ref = base + 0.2 * torch.randn(N, T, generator=generator)
    advantages = torch.tensor([1.2, -0.7, 0.4, -1.5])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    values, grads = [], []
    for compute in ("trl", "ours"):
        logps = base.clone().requires_grad_(True)
        if compute == "trl":
            value = trl_loss(
                logps, old, ref, advantages.unsqueeze(1), mask, loss_type=trl_type, **options
            )
        else:
            knobs = LossSettings(*options["eps"], options["delta"], *options["sapo"])
            objective = Objective(
                loss_type, options["beta"], MAX_LENGTH, options["level"], policy, knobs
            )
            value, _ = grpo_loss(TokenLogProbs(logps, old, ref), advantages, mask, objective)
        values.append(value.item())
        grads.append(torch.autograd.grad(value, logps)[0])
    assert values[1] == pytest.approx(values[0], rel=1e-5, abs=1e-7)
    assert torch.allclose(grads[1], grads[0], rtol=1e-5, atol=1e-7)
    assert grads[0].abs().sum() > 0  # the case has a gradient to compare


@pytest.mark.parametrize("keep", [0.0, 0.2, 0.5, 1.0])
def test_the_high_entropy_tokens_are_trls(keep) -> None:
    from src.grpo.objective import entropy_threshold

    generator = torch.Generator().manual_seed(1)
    entropies = torch.rand(N, T, generator=generator) * 4
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    trainer = SimpleNamespace(accelerator=OneProcess())
    trainer.accelerator.pad_across_processes = lambda tensor, dim, pad_index: tensor
    theirs = trl_grpo.GRPOTrainer.get_high_entropy_mask(trainer, entropies, mask, 1 - keep)
    ours = (entropies >= entropy_threshold(entropies[mask.bool()], keep)) & mask.bool()
    assert torch.equal(ours, theirs)


# ------------------------------------------------------------------------------- advantages
GROUP = 4
# Two reward functions' scores for 4 prompts x 4 completions: a group where both tie, one
# where only the first ties, one of binary rewards, one of continuous ones.
SCORES = torch.tensor(
    [
        [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.3, 0.9, 0.1, 0.6],
        [0.5, 0.5, 0.5, 0.5, 0.0, 1.0, 2.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.2, 0.0, 0.7, 0.4],
    ]
)
WEIGHTS = (1.0, 0.5)


def fixed_rewards(index: int):
    """A TRL reward function that returns row `index` of `SCORES` whatever was sampled."""

    def reward(prompts, completions, **kwargs):
        assert len(completions) == SCORES.shape[1]
        return SCORES[index].tolist()

    reward.__name__ = f"fixed_{index}"
    return reward


def trl_advantages(folder: str, trainer_name: str, tmp_path, **settings) -> torch.Tensor:
    """The advantages TRL's trainer `trainer_name` gives `SCORES` (weighted by `WEIGHTS`) for
    one batch of 4 prompts x `GROUP` completions, its other settings `settings`."""
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    trainer_class = getattr(trl, f"{trainer_name}Trainer")
    config_class = getattr(trl, f"{trainer_name}Config")
    rows = SCORES.shape[1]
    args = config_class(
        output_dir=str(tmp_path / "trl"), use_cpu=True, report_to="none", save_strategy="no",
        per_device_train_batch_size=rows, num_generations=GROUP, max_completion_length=2,
        reward_weights=list(WEIGHTS), beta=0.0, **settings,
    )  # fmt: skip
    prompts = [f"{i} + {i} =" for i in range(rows // GROUP)]
    trainer = trainer_class(
        model=AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32),
        reward_funcs=[fixed_rewards(0), fixed_rewards(1)],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        processing_class=AutoTokenizer.from_pretrained(folder),
    )
    trainer.model.train()  # scored as a training batch, with num_generations
    batch = [{"prompt": prompt} for prompt in prompts for _ in range(GROUP)]
    return trainer._generate_and_score_completions(batch)["advantages"]


def weighted_sum() -> torch.Tensor:
    return WEIGHTS[0] * SCORES[0] + WEIGHTS[1] * SCORES[1]


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_grpo_advantages_equal_trls(scale, tiny_lm, tmp_path) -> None:
    from src.grpo.advantages import estimate_advantages

    theirs = trl_advantages(tiny_lm.network.name_or_path, "GRPO", tmp_path, scale_rewards=scale)
    lengths = torch.full((SCORES.shape[1],), 2)
    ours = estimate_advantages("grpo", weighted_sum(), GROUP, lengths, scale)
    assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert theirs[:GROUP].abs().max() == 0 and theirs.abs().max() > 0.5  # ties and spreads


def test_gdpo_advantages_equal_trls(tiny_lm, tmp_path) -> None:
    from src.grpo.advantages import normalize_then_sum

    theirs = trl_advantages(
        tiny_lm.network.name_or_path, "GRPO", tmp_path,
        multi_objective_aggregation="normalize_then_sum",
    )  # fmt: skip
    parts = {"first": SCORES[0], "second": SCORES[1]}
    ours = normalize_then_sum(parts, dict(zip(parts, WEIGHTS, strict=True)), GROUP)
    assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    # the second group's first function ties: it adds nothing, the second alone sets the order
    assert theirs[GROUP + 2] > theirs[GROUP + 1] > theirs[GROUP]


def test_rloo_advantages_equal_trls(tiny_lm, tmp_path) -> None:
    from src.grpo.advantages import estimate_advantages

    theirs = trl_advantages(
        tiny_lm.network.name_or_path, "RLOO", tmp_path, normalize_advantages=False
    )
    lengths = torch.full((SCORES.shape[1],), 2)
    ours = estimate_advantages("rloo", weighted_sum(), GROUP, lengths, "none")
    assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-6)
