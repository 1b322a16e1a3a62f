"""How far the judge's score can rise by choosing among the pretrained generator's own fills.

For each held-out window, N fills are sampled as the recipe samples them (`rollout.*`: its
denoising steps, temperature and top-p) and scored by the judge, as GRPO's reward does. Prints
the judge's mean score and the characters restored for the greedy fill (GRPO's step 0), for a
sampled fill, and for the fill the judge scores highest of the N: what a policy that always
found the judge's favourite among the generator's own draws would get. GRPO reweights those
draws, so this is the reach of its first steps, and whether the judge's favourite restores
more characters or fewer says whether climbing the judge also restores them. Also printed: the
correlation, within each window, between the judge's scores of its fills and the characters
they restore, averaged over the windows: GRPO's advantages compare fills of one window, so
this is how much of what the judge rewards is characters (0: none); and the same for the
pretrained generator's own log-probability of each fill, what the generator itself knows of
which of its draws is right. Trains nothing.

    .venv/bin/python scripts/char_best_of_n.py seed=43 [data.path=FILE] [--n 64]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from src.evaluation.greedy import GreedyScorer  # noqa: E402
from src.model.network import PolicyNetwork  # noqa: E402
from src.policy.episode import run_episode  # noqa: E402
from src.pretraining.folders import stage_checkpoint  # noqa: E402
from src.pretraining.stages import require_trained_stages  # noqa: E402
from src.recipes.char_diffusion.infill import Infill  # noqa: E402
from src.recipes.char_diffusion.network import load_char_diffusion  # noqa: E402
from src.reward.combine import CombinedReward  # noqa: E402
from src.rollout.sampler import Sampler  # noqa: E402
from src.utils.compose import compose_train_config  # noqa: E402
from src.utils.config import build  # noqa: E402


class Draws(NamedTuple):
    """N sampled fills per window, [W, N] each: the judge's score, the characters restored,
    and the generator's log-probability of the fill (summed over its characters)."""

    scores: Tensor
    restored: Tensor
    log_probs: Tensor


@torch.no_grad()
def drawn(
    network: PolicyNetwork,
    sampler: Sampler,
    role: Infill,
    reward: CombinedReward,
    rows: list[dict[str, Any]],
    n: int,
    windows: int = 16,
    name: str = "judge",
) -> Draws:
    """Reward function `name`'s score, the characters restored and `network`'s log-probability
    of N sampled fills per window, `windows` windows a batch."""
    scores, restored, log_probs = [], [], []
    for start in range(0, len(rows), windows):
        part = rows[start : start + windows]
        episode = run_episode(network, sampler, role, reward, part, n)
        scores.append(episode.reward_parts[name].view(len(part), n).cpu())
        accuracy = [detail["char_accuracy"] for detail in episode.details]
        restored.append(torch.tensor(accuracy, dtype=torch.float32).view(len(part), n))
        per_char = network.log_probs(episode.rollout)[0] * episode.rollout.completion_mask
        log_probs.append(per_char.sum(dim=1).view(len(part), n).float().cpu())
    return Draws(torch.cat(scores), torch.cat(restored), torch.cat(log_probs))


def favourite(scores: Tensor, restored: Tensor) -> tuple[float, float]:
    """Mean score and mean characters restored of each window's highest-scored fill (the
    first of ties)."""
    best = scores.argmax(dim=1, keepdim=True)
    return float(scores.gather(1, best).mean()), float(restored.gather(1, best).mean())


def within_window_correlation(scores: Tensor, restored: Tensor) -> float:
    """Mean over windows [W, N] of the Pearson correlation between a window's fills' scores
    and characters restored; windows where either is constant are left out (0.0 if all are)."""
    x = scores - scores.mean(dim=1, keepdim=True)
    y = restored - restored.mean(dim=1, keepdim=True)
    spread = x.norm(dim=1) * y.norm(dim=1)
    kept = spread > 0
    if not bool(kept.any()):
        return 0.0
    return float(((x * y).sum(dim=1)[kept] / spread[kept]).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="config overrides, as for src.train")
    parser.add_argument("--n", type=int, default=64, help="fills sampled per window")
    parser.add_argument("--windows", type=int, default=16, help="windows sampled per batch")
    args = parser.parse_intermixed_args()
    if args.n < 1 or args.windows < 1:
        parser.error("--n and --windows must be at least 1")
    cfg = compose_train_config(["task=char_diffusion", *args.overrides])
    require_trained_stages(cfg)
    torch.manual_seed(cfg.seed)
    data = build(cfg.data)
    data.prepare_rows()
    rows = data.val_rows
    generator, judge = stage_checkpoint("generator", cfg), stage_checkpoint("judge", cfg)
    network = load_char_diffusion(generator, dropout=0.0).eval()
    sampler, role, reward = build(cfg.rollout), Infill(cfg.data.mask_char), build(cfg.reward)
    print(f"generator {generator}\njudge {judge}")
    print(f"{len(rows)} held-out windows, {args.n} fills each")
    scorer = GreedyScorer(sampler, role, reward)  # what GRPO logs as eval/* at step 0
    scorer.score(network, rows)
    greedy = scorer.means()
    scores, restored, log_probs = drawn(network, sampler, role, reward, rows, args.n, args.windows)
    figures = {
        "greedy": (greedy["judge"], greedy["role/char_accuracy"]),
        "sampled": (float(scores.mean()), float(restored.mean())),
        f"judge's best of {args.n}": favourite(scores, restored),
    }
    for name, (score, chars) in figures.items():
        print(f"{name:>20}: judge {score:.3f}  char_accuracy {chars:.4f}")
    correlation = within_window_correlation(scores, restored)
    print(f"judge score ~ characters restored, within a window: correlation {correlation:+.3f}")
    own = within_window_correlation(log_probs, restored)
    _, own_best = favourite(log_probs, restored)
    print(
        f"the generator's own log-probability ~ characters restored: correlation {own:+.3f}, "
        f"its best of {args.n} restores {own_best:.4f}"
    )
    print(
        f"best of {args.n} by characters restored: {float(restored.max(dim=1).values.mean()):.4f}"
    )


if __name__ == "__main__":
    main()
