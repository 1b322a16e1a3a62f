"""Room to learn: what the base policy's samples say GRPO can reach, and how much of it a run closed.

GRPO reinforces what the policy already samples, so a policy's k samples per prompt bound what a
run can show. The formulas, stated in docs/room.md:

- pass@k of a prompt with c successes among n samples: 1 - C(n-c, k) / C(n, k), the unbiased
  estimator of the chance that some of k samples succeeds (Chen et al. 2021).
- maj@k: the most frequent answer of the k samples succeeds. Completions with no answer do not
  vote; a tie is shared (the mean success of the tied answers: a uniform tie-break's
  expectation); no answer at all scores 0. An answer's success is read from the completions
  that gave it (the success reward is a function of the answer), so no gold is compared here.
- room: maj@k - pass@1 where answers can be voted on (what sharpening toward the base's own
  majority can reach), else best-of-k - mean for a graded reward.
- room closed: (pass@1 after - pass@1 before) / room before.
- learnability of a prompt: p(1 - p), p its success rate (a graded reward: its reward variance).
- margins: the half-width of a 95 % interval of a mean over prompts, 1.96 s / sqrt(N) (s the
  prompts' sample standard deviation); the sampling noise of the prompts drawn, which is what
  another draw of N prompts of the same kinds would move. For room closed, the margin of the
  paired change in pass@1 (the same prompts before and after) over the room before.

Everything here is a pure function of per-completion lists grouped by prompt.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of a prompt with `c` successes among `n` samples, `k` <= `n`."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    # 1 - prod_{i<k} (n-c-i)/(n-i), as a product: no large binomials
    return 1.0 - math.prod((n - c - i) / (n - i) for i in range(k))


def majority_success(answers: Sequence[str | None], successes: Sequence[float]) -> float:
    """maj@k of one prompt's k samples: the success of their most frequent answer (ties shared,
    completions without an answer not voting, 0 where none answered)."""
    if len(answers) != len(successes):
        raise ValueError(f"{len(answers)} answers for {len(successes)} successes")
    votes = Counter(answer for answer in answers if answer is not None)
    if not votes:
        return 0.0
    top = max(votes.values())
    tied = [answer for answer, count in votes.items() if count == top]
    return sum(answer_success(answer, answers, successes) for answer in tied) / len(tied)


def answer_success(answer: str, answers: Sequence[str | None], successes: Sequence[float]) -> float:
    """Whether `answer` succeeds: the mean success of the completions that gave it (1 or 0
    where the success reward reads the answer alone)."""
    scores = [s for a, s in zip(answers, successes, strict=True) if a == answer]
    return sum(scores) / len(scores)


def room_closed(after: float, before: float, room: float) -> float:
    """(after - before) / room; NaN where there was no room (room <= 0)."""
    return (after - before) / room if room > 0 else float("nan")


Z95 = 1.96  # the normal quantile of a two-sided 95 % interval


def margin(values: Sequence[float]) -> float:
    """Half-width of the 95 % interval of the mean of `values` (one per prompt): 1.96 s /
    sqrt(N), s the sample standard deviation; NaN for fewer than two values."""
    n = len(values)
    if n < 2:
        return float("nan")
    centre = mean(values)
    variance = sum((v - centre) ** 2 for v in values) / (n - 1)
    return Z95 * math.sqrt(variance / n)


def room_closed_margin(after: Sequence[float], before: Sequence[float], room: float) -> float:
    """The margin of room closed: that of the per-prompt change in pass@1 (`after` and
    `before` of the same prompts, in order) over the room before; NaN without room."""
    if len(after) != len(before):
        raise ValueError(f"{len(after)} prompts after training against {len(before)} before")
    changes = [a - b for a, b in zip(after, before, strict=True)]
    return margin(changes) / room if room > 0 else float("nan")


@dataclass
class Group:
    """One prompt's k sampled completions, as the room's figures read them."""

    rewards: list[float]  # the total reward of each completion
    successes: list[float] | None = None  # 1.0 where the success reward holds; None: graded
    answers: list[str | None] | None = None  # the extracted answer; None: nothing to vote on
    well_formed: list[bool] | None = None  # the form reward holds; None: no form part
    parts: dict[str, list[float]] = field(default_factory=dict)  # each reward function's scores
    clipped: list[bool] | None = None  # no EOS before the length limit
    texts: list[str] | None = None  # the completions, for the share of distinct ones
    chance: float | None = None  # success of a uniform guess (1 / options); None: unknown

    @property
    def size(self) -> int:
        return len(self.rewards)


def mean(values: Sequence[float]) -> float:
    """The mean; NaN for no values."""
    return sum(values) / len(values) if values else float("nan")


def spread(values: Sequence[float]) -> float:
    """Population standard deviation (what a group's advantages divide by)."""
    centre = mean(values)
    return math.sqrt(mean([(v - centre) ** 2 for v in values])) if values else float("nan")


def split_figures(groups: Sequence[Group]) -> dict[str, float]:
    """The room's figures over one split's groups (every group sampled k times, one k):
    pass@1, pass@k, maj@k, best_of_k, room, the form's part, signal, learnability, each reward
    function's spread, truncated and distinct shares. Keys are stable names (docs/room.md)."""
    if not groups:
        return {}
    k = groups[0].size
    if any(group.size != k for group in groups):
        raise ValueError("every group of a split must hold the same number of samples")
    figures: dict[str, float] = {"prompts": float(len(groups)), "k": float(k)}
    rewards = [group.rewards for group in groups]
    figures["reward"] = mean([mean(r) for r in rewards])
    figures["best_of_k"] = mean([max(r) for r in rewards])
    figures["signal"] = mean([float(spread(r) > 1e-9) for r in rewards])
    if all(group.successes is not None for group in groups):
        figures.update(success_figures(groups, k))
    else:
        figures["pass_at_1"] = figures["reward"]
        figures["learnability"] = mean([spread(r) ** 2 for r in rewards])
        figures["room"] = figures["best_of_k"] - figures["reward"]
    figures["pass_at_1_margin"] = margin(prompt_pass_at_1(groups))
    figures["room_margin"] = margin(prompt_rooms(groups))
    if all(group.well_formed is not None for group in groups):
        figures.update(form_figures(groups, figures))
    for name in groups[0].parts:
        values = [group.parts[name] for group in groups]
        figures[f"{name}/mean"] = mean([mean(v) for v in values])
        figures[f"{name}/group_std"] = mean([spread(v) for v in values])
    if all(group.clipped is not None for group in groups):
        figures["truncated"] = mean([mean([float(c) for c in g.clipped or []]) for g in groups])
    if all(group.texts is not None for group in groups):
        figures["distinct"] = mean([len(set(g.texts or [])) / k for g in groups])
    chances = [group.chance for group in groups if group.chance is not None]
    if len(chances) == len(groups) and "pass_at_k" in figures:  # a guess of a success's answer
        figures["chance"] = mean(chances)
    return figures


def prompt_pass_at_1(groups: Sequence[Group]) -> list[float]:
    """Each prompt's pass@1: its success rate, or its mean reward where the reward is graded."""
    if all(group.successes is not None for group in groups):
        return [mean(group.successes or []) for group in groups]
    return [mean(group.rewards) for group in groups]


def prompt_rooms(groups: Sequence[Group]) -> list[float]:
    """Each prompt's room, the terms `split_figures` averages: maj@k, else pass@k (a success
    without answers), else best-of-k (graded), less the prompt's pass@1."""
    rates = prompt_pass_at_1(groups)
    if not all(group.successes is not None for group in groups):
        return [max(g.rewards) - p for g, p in zip(groups, rates, strict=True)]
    if all(group.answers is not None for group in groups):
        tops = [majority_success(g.answers or [], g.successes or []) for g in groups]
    else:
        tops = [pass_at_k(g.size, round(sum(g.successes or [])), g.size) for g in groups]
    return [top - p for top, p in zip(tops, rates, strict=True)]


def success_figures(groups: Sequence[Group], k: int) -> dict[str, float]:
    """pass@1, pass@k, learnability, and with answers maj@k; the room from them."""
    counts = [sum(group.successes or []) for group in groups]
    rates = [count / k for count in counts]
    figures = {
        "pass_at_1": mean(rates),
        "pass_at_k": mean([pass_at_k(k, round(count), k) for count in counts]),
        "learnability": mean([p * (1 - p) for p in rates]),
    }
    if all(group.answers is not None for group in groups):
        figures["maj_at_k"] = mean(
            [majority_success(g.answers or [], g.successes or []) for g in groups]
        )
        figures["room"] = figures["maj_at_k"] - figures["pass_at_1"]
    else:  # a success without an answer to vote on: what coverage allows
        figures["room"] = figures["pass_at_k"] - figures["pass_at_1"]
    return figures


def form_figures(groups: Sequence[Group], figures: dict[str, float]) -> dict[str, float]:
    """The answer's room apart from the form's. `well_formed`: the share of completions in the
    form. Over the prompts with at least one well-formed completion (`formed_prompts`, their
    share): `right_among_well_formed`, the mean share right among a prompt's well-formed
    completions; `maj@k_well_formed`, maj@k with only those voting; `answer_room`, the second
    less the first (what sharpening the answer brings once every completion is in the form);
    `form_room`, the first less pass@1 (what the form alone brings, the answers kept)."""
    formed = [[bool(f) for f in group.well_formed or []] for group in groups]
    out = {"well_formed": mean([mean([float(f) for f in fs]) for fs in formed])}
    out["well_formed_samples"] = float(sum(sum(fs) for fs in formed))
    voted = [(g, fs) for g, fs in zip(groups, formed, strict=True) if any(fs)]
    out["formed_prompts"] = len(voted) / len(groups)
    if not voted or not all(group.successes is not None for group in groups):
        return out
    right = [mean([s for s, f in zip(g.successes or [], fs, strict=True) if f]) for g, fs in voted]
    out["right_among_well_formed"] = mean(right)
    out["form_room"] = out["right_among_well_formed"] - figures["pass_at_1"]
    if all(group.answers is not None for group in groups):
        votes = [
            majority_success(
                [a if f else None for a, f in zip(g.answers or [], fs, strict=True)],
                g.successes or [],
            )
            for g, fs in voted
        ]
        out["maj_at_k_well_formed"] = mean(votes)
        out["answer_room"] = out["maj_at_k_well_formed"] - out["right_among_well_formed"]
    return out


ENOUGH_ROOM = 0.10  # the room a recipe needs to show learning on a few dozen rows
SOME_SIGNAL = 0.10  # share of groups whose rewards differ below which a step learns little


def verdict(figures: dict[str, float], split: str) -> str:
    """One line a user can act on, from one split's figures (`split_figures`)."""
    k, signal, room = int(figures["k"]), figures["signal"], figures["room"]
    if figures.get("pass_at_k", 1.0) == 0.0 or (signal == 0.0 and figures["best_of_k"] <= 0.0):
        return (
            f"no room: the policy never succeeds in {k} samples of any {split} prompt; try an "
            "SFT warm start (sft.enabled=true), an easier split or a larger model"
            + form_note(figures)
        )
    if signal == 0.0:
        return (
            f"no signal: every {split} prompt's {k} completions score alike, so a step has "
            "nothing to learn from; raise the temperature or the group size, or change the reward"
        )
    spread_of_room = figures.get("room_margin", float("nan"))
    interval = f" +-{spread_of_room:.2f}" if math.isfinite(spread_of_room) else ""
    line = f"signal in {signal:.0%} of groups, room {room:.2f}{interval} on {split} "
    line += room_terms(figures)
    if room < ENOUGH_ROOM:
        line = f"little room: {line}; a run can show at most that much"
    elif signal < SOME_SIGNAL:
        line = f"little signal: {line}; most steps will learn nothing"
    return line + form_note(figures)


def room_terms(figures: dict[str, float]) -> str:
    """What the room is made of, e.g. `(pass@1 0.05 -> maj@16 0.22, pass@16 0.44)`."""
    k = int(figures["k"])
    if "maj_at_k" in figures:
        return (
            f"(pass@1 {figures['pass_at_1']:.2f} -> maj@{k} {figures['maj_at_k']:.2f}, "
            f"pass@{k} {figures['pass_at_k']:.2f})"
        )
    if "pass_at_k" in figures:
        return f"(pass@1 {figures['pass_at_1']:.2f} -> pass@{k} {figures['pass_at_k']:.2f})"
    return f"(mean reward {figures['reward']:.3f} -> best of {k} {figures['best_of_k']:.3f})"


def form_note(figures: dict[str, float]) -> str:
    """Where a reward has a form part: whether the room is mostly the form's, and whether the
    well-formed answers beat a guess."""
    if "right_among_well_formed" not in figures:
        return ""
    right, form = figures["right_among_well_formed"], figures.get("form_room", 0.0)
    answer = figures.get("answer_room", float("nan"))
    note = f"; right among well-formed {right:.2f}"
    if "chance" in figures:
        chance, count = figures["chance"], figures.get("well_formed_samples", 0.0)
        margin = 1.96 * math.sqrt(chance * (1 - chance) / count) if count else 1.0
        note += f" (a guess {chance:.2f}, +-{margin:.2f} over {int(count)} samples)"
        if right <= chance + margin:
            note += ": no better than a guess, so what can move is the form"
    if math.isfinite(answer):
        note += f"; form room {form:.2f}, answer room {answer:.2f}"
        if form > answer:
            note += " (mostly the form)"
    return note
