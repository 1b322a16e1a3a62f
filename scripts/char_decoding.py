"""Greedy fills of a char generator decoded in K passes: every masked position at once (K=1),
or revealed over K passes, each later pass reading the characters already revealed, the
positions the generator is most sure of first (`sure`: what the recipe's sampler does greedily
with rollout.denoising_steps=K, written here as a plain loop, its reference in the tests) or in
a fixed order (`span`, `stride`). Prints, per K, the characters restored, the degenerate-span
share and each judge's mean score on the held-out windows, for the generator and judges the
config names (cached stages; the rounds' last judge too when every round is cached). Trains
nothing; no GRPO is involved.

    .venv/bin/python scripts/char_decoding.py seed=43 [data.path=FILE] [--steps 1,2,4,8] [--order sure]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from src.pretraining.folders import DONE, stage_checkpoint  # noqa: E402
from src.pretraining.stages import require_trained_stages  # noqa: E402
from src.recipes.char_diffusion.infill import Infill  # noqa: E402
from src.recipes.char_diffusion.judge_network import CharJudge, load_char_judge  # noqa: E402
from src.recipes.char_diffusion.network import CharDiffusionNetwork, load_char_diffusion  # noqa: E402
from src.recipes.char_diffusion.rounds import JUDGE, RoundsSettings, round_folders  # noqa: E402
from src.runs.length import run_length  # noqa: E402
from src.runs.settings import check_settings  # noqa: E402
from src.utils.compose import compose_train_config  # noqa: E402
from src.utils.config import build  # noqa: E402

ORDERS = ("sure", "span", "stride")  # which masked positions a pass reveals


def pass_of(masked: str, mask: str, steps: int, order: str) -> dict[int, int]:
    """For a fixed order, masked position -> the pass that reveals it: `span`, the k-th
    character of every span in pass k (the last pass takes the rest); `stride`, the k-th
    masked position of the window in pass k mod `steps`."""
    positions = [i for i, char in enumerate(masked) if char == mask]
    if order == "stride":
        return {position: n % steps for n, position in enumerate(positions)}
    passes = {}
    for position in positions:
        start = position
        while start > 0 and masked[start - 1] == mask:
            start -= 1
        passes[position] = min(position - start, steps - 1)
    return passes


@torch.no_grad()
def decode(
    network: CharDiffusionNetwork, masked: list[str], mask: str, steps: int, order: str = "sure"
) -> list[str]:
    """Each masked window filled greedily in `steps` passes, every pass predicting the
    positions still masked from what is revealed so far. `sure`: a pass reveals the
    ceil(left / passes left) positions the generator is most sure of; `span` and `stride`:
    fixed orders (`pass_of`)."""
    texts = [list(text) for text in masked]
    fixed = [pass_of(text, mask, steps, order) for text in masked] if order != "sure" else []
    for done in range(steps):
        ids = network.encode_prompts(["".join(text) for text in texts])["input_ids"]
        logits, _ = network.masked_logits(ids)
        sureness, best = logits.softmax(-1).max(-1)
        for row, text in enumerate(texts):
            positions = [i for i, char in enumerate(text) if char == mask]
            if not positions:
                continue
            chars = network.tokenizer.decode(best[row, : len(positions)].cpu())
            if fixed:
                chosen = [k for k, p in enumerate(positions) if fixed[row][p] == done]
            else:
                take = math.ceil(len(positions) / (steps - done))
                chosen = sureness[row, : len(positions)].topk(take).indices.tolist()
            for k in chosen:
                text[positions[k]] = chars[k]
    return ["".join(text) for text in texts]


def scores(
    filled: list[str], rows: list[dict[str, Any]], mask: str, judges: dict[str, CharJudge]
) -> dict[str, float]:
    """The role's held-out metrics (`Infill.outcomes`: characters restored, degenerate-span
    share), averaged over the windows, and each judge's mean score."""
    fills = [
        "".join(f for f, m in zip(text, row["masked"], strict=True) if m == mask)
        for text, row in zip(filled, rows, strict=True)
    ]
    details = Infill(mask).outcomes(fills, rows).details
    results = {
        name: sum(detail[name] for detail in details) / len(details)
        for name in ("char_accuracy", "degenerate_spans")
    }
    for name, judge in judges.items():
        masked = [row["masked"] for row in rows]  # read by a judge that sees the mask
        results[name] = sum(judge.score(filled, masked=masked)) / len(filled)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="config overrides, as for src.train")
    parser.add_argument("--steps", default="1,2,4,8", help="numbers of passes, comma-separated")
    parser.add_argument(
        "--order", default="sure", choices=ORDERS, help="which positions a pass reveals"
    )
    args = parser.parse_args()
    cfg = compose_train_config(["task=char_diffusion", *args.overrides])
    require_trained_stages(cfg)
    data = build(cfg.data)
    data.prepare_rows()
    rows, mask = data.val_rows, cfg.data.mask_char
    generator = stage_checkpoint("generator", cfg)
    network = load_char_diffusion(generator, dropout=0.0).eval()
    judges = {"judge": load_char_judge(stage_checkpoint("judge", cfg))}
    rounds = RoundsSettings.of_section(cfg.get("rounds"), "the adversarial rounds")
    folders = round_folders(cfg, rounds, run_length(cfg, data, check_settings(cfg)))
    if folders and all((folder / DONE).exists() for folder in folders):  # as rounds_judge
        judges["last_round_judge"] = load_char_judge(str(folders[-1] / JUDGE))
    print(f"generator {generator}, {len(rows)} held-out windows, order {args.order}")
    for steps in (int(s) for s in args.steps.split(",")):
        filled = decode(network, [r["masked"] for r in rows], mask, steps, args.order)
        results = scores(filled, rows, mask, judges)
        print(f"passes {steps}: " + "  ".join(f"{k} {v:.4f}" for k, v in results.items()))


if __name__ == "__main__":
    main()
