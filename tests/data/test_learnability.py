"""Learnability sampling: draws by p(1-p) with a uniform share, estimates from the groups,
a resumed sampler drawing what an unbroken one draws, and a run that uses it end to end."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from src.data.datamodule import DrawnRows, StepSampler
from src.data.learnability import DRAW_KEY, LAG, ROW_KEY, Learnability, SamplingSettings
from src.utils.errors import ConfigError

SETTINGS = SamplingSettings(order="learnability", uniform_share=0.2, decay=0.5, unknown=0.25)


def known(estimates: dict[int, float], rows: int = 4, batch_size: int = 1) -> Learnability:
    learnability = Learnability(rows, batch_size, SETTINGS, "accuracy")
    learnability.estimates = dict(estimates)
    return learnability


def test_the_draw_probabilities_by_hand() -> None:
    # p = 0.5, 0, 1, 0.9: weights 0.25, 0, 0, 0.09 (sum 0.34); a fifth of each draw uniform (0.05)
    chances = known({0: 0.5, 1: 0.0, 2: 1.0, 3: 0.9}).probabilities()
    expected = [0.8 * 0.25 / 0.34 + 0.05, 0.05, 0.05, 0.8 * 0.09 / 0.34 + 0.05]
    assert chances.tolist() == pytest.approx(expected)
    assert float(chances.sum()) == pytest.approx(1.0)
    # nothing known to have room: every row alike
    assert known({0: 0.0, 1: 1.0, 2: 0.0, 3: 1.0}).probabilities().tolist() == [0.25] * 4


def test_a_prompt_at_one_half_is_drawn_more_than_one_always_or_never_solved() -> None:
    learnability = known({0: 0.5, 1: 0.0, 2: 1.0, 3: 0.9})
    counts = Counter(row for batch in range(4000) for row in learnability.draw(batch, seed=7))
    shares = {row: counts[row] / 4000 for row in range(4)}
    assert shares[0] > 0.6 and shares[0] > 5 * shares[1] and shares[0] > 5 * shares[2]
    for starved in (1, 2):  # the uniform share keeps them: 0.05 of the draws each
        assert 0.035 < shares[starved] < 0.065
    assert shares[3] > shares[1]


def test_a_prompt_not_yet_sampled_weighs_the_most() -> None:
    weights = known({0: 0.5, 1: 0.1}).weights().tolist()
    assert weights == pytest.approx([0.25, 0.09, 0.25, 0.25])


def tagged_rows(rows: list[int], draws: list[int], group_size: int) -> list[dict]:
    return [
        {ROW_KEY: r, DRAW_KEY: d}
        for r, d in zip(rows, draws, strict=True)
        for _ in range(group_size)
    ]


def test_groups_update_the_estimates_after_the_lag() -> None:
    learnability = Learnability(4, 2, SETTINGS, "accuracy")
    learnability.draw(0, seed=1)
    # batch 0 held rows 1 and 3 (draws 0 and 1), two completions each: 1 of 2 and 2 of 2 right
    scores = torch.tensor([1.0, 0.0, 1.0, 1.0])
    figures = learnability.observe(tagged_rows([1, 3], [0, 1], 2), {"accuracy": scores}, 2)
    assert figures["sampling/spread_share"] == 0.5  # row 1's group differs, row 3's ties
    assert figures["sampling/learnability"] == 0.25  # both unknown when drawn
    assert learnability.estimates == {}  # not before batch LAG is drawn
    learnability.draw(LAG - 1, seed=1)
    assert learnability.estimates == {}
    learnability.draw(LAG, seed=1)
    assert learnability.estimates == {1: 0.5, 3: 1.0}
    # a later group moves the estimate halfway (decay 0.5): row 1 solved 2 of 2
    learnability.observe(tagged_rows([1], [2 * LAG + 1], 2), {"accuracy": torch.ones(2)}, 2)
    learnability.draw(3 * LAG, seed=1)
    assert learnability.estimates[1] == pytest.approx(0.75)


def serve(sampler: StepSampler, learnability: Learnability, batches: int, prefetch: bool) -> list:
    """Draw `batches` batches as Lightning does (the next one fetched before the current one
    trains, with `prefetch`), each batch's groups observed as it trains: row r's groups are
    right in r's share of their completions (r / 8)."""
    drawn, iterator = [], iter(sampler)
    ahead = next(iterator)
    for _ in range(batches):
        batch, ahead = ahead, (next(iterator, None) if prefetch else None)
        drawn.append([row for row, _ in batch])
        rows = [{ROW_KEY: row, DRAW_KEY: draw} for row, draw in batch for _ in range(8)]
        scores = torch.tensor([float(i < row) for row, _ in batch for i in range(8)])
        learnability.observe(rows, {"accuracy": scores}, 8)
        if not prefetch:
            ahead = next(iterator, None)
    return drawn


def test_prefetching_or_not_the_draws_are_the_same() -> None:
    draws = []
    for prefetch in (True, False):
        learnability = Learnability(9, 3, SETTINGS, "accuracy")
        sampler = StepSampler(9, 3, 20, seed=5, learnability=learnability)
        draws.append(serve(sampler, learnability, 12, prefetch))
    assert draws[0] == draws[1]


def test_a_resumed_sampler_draws_what_an_unbroken_one_draws() -> None:
    learnability = Learnability(9, 3, SETTINGS, "accuracy")
    unbroken = serve(
        StepSampler(9, 3, 20, seed=5, learnability=learnability), learnability, 12, True
    )
    assert len({tuple(batch) for batch in unbroken}) > 6  # the draws do vary

    first = Learnability(9, 3, SETTINGS, "accuracy")
    before = serve(StepSampler(9, 3, 20, seed=5, learnability=first), first, 7, True)
    saved = first.state_dict()  # a checkpoint after 7 batches trained (the 8th fetched)
    again = Learnability(9, 3, SETTINGS, "accuracy")
    again.load_state_dict(saved)
    sampler = StepSampler(9, 3, 20, seed=5, learnability=again)
    sampler.resume_at(0, 7)
    after = serve(sampler, again, 5, True)
    assert before + after == unbroken
    assert again.estimates  # what the later draws were weighed by came through the checkpoint


def test_drawn_rows_carry_their_index_and_draw() -> None:
    rows = DrawnRows([{"question": "q0"}, {"question": "q1"}], seed=0, tagged=True)
    assert rows[(1, 17)] == {"question": "q1", ROW_KEY: 1, DRAW_KEY: 17}
    assert DrawnRows([{"question": "q0"}], seed=0)[(0, 3)] == {"question": "q0"}


def test_the_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="sampling.order"):
        SamplingSettings(order="lilo")
    with pytest.raises(ConfigError, match="sampling.uniform_share"):
        SamplingSettings(uniform_share=1.5)


def test_a_run_draws_by_learnability_and_logs_it(make_cfg) -> None:
    from src.train import train
    from tests.helpers.mlflow_runs import history, only_run

    cfg = make_cfg("sampling=learnability", "trainer.max_steps=4", "data.batch_size=4")
    train(cfg)
    run = only_run(cfg)
    assert set(history(cfg, run, "sampling/learnability")) == {1, 2, 3, 4}
    assert all(0 <= share <= 1 for share in history(cfg, run, "sampling/spread_share").values())
    known = history(cfg, run, "sampling/known_share")
    assert known[1] == 0 and known[4] > 0  # batch 0's groups weigh the draws from batch LAG on


def test_a_graded_reward_is_refused_before_any_model_loads(make_cfg) -> None:
    from src.runs.parts import build_run_parts

    cfg = make_cfg("sampling=learnability", "room.success=null")
    with pytest.raises(ConfigError, match=r"^sampling=learnability draws prompts by their success"):
        build_run_parts(cfg)


def test_a_continued_run_draws_what_an_unbroken_one_draws(make_cfg, tmp_path, monkeypatch) -> None:
    """Six steps straight, then the same run continued from its checkpoint of step 3: the
    batches of steps 4 to 6 are drawn from the same estimates and hold the same prompts."""
    from src.train import train

    drawn: dict[int, tuple[list[int], dict[int, float]]] = {}  # batch -> rows, estimates
    original = Learnability.draw

    def recording(self: Learnability, batch: int, seed: int) -> list[int]:
        rows = original(self, batch, seed)
        drawn[batch] = (rows, dict(self.estimates))
        return rows

    monkeypatch.setattr(Learnability, "draw", recording)
    common = [
        "sampling=learnability", "trainer.max_steps=6", "data.batch_size=4",
        "callbacks.checkpoint.every_n_train_steps=3", "callbacks.checkpoint.save_top_k=-1",
    ]  # fmt: skip
    train(make_cfg(*common, f"paths.run_dir={tmp_path / 'straight'}"))
    straight = {batch: drawn[batch] for batch in (3, 4, 5)}  # steps 4 to 6
    assert all(estimates for _, estimates in straight.values())  # the estimates weighed them
    drawn.clear()
    (third,) = (tmp_path / "straight" / "checkpoints").glob("*step=3.ckpt")
    train(make_cfg(*common, f"paths.run_dir={tmp_path / 'continued'}", f"ckpt_path='{third}'"))
    assert min(drawn) == 3  # the continuation drew from step 4 on
    assert {batch: drawn[batch] for batch in (3, 4, 5)} == straight


def test_with_dynamic_sampling_every_round_is_reported(make_cfg, monkeypatch) -> None:
    """The untrained tiny model ties every group, so each step spends its 3 rounds: all 3
    batches of prompts (the reserve's too) are reported, 2 groups each."""
    from src.train import train

    reported: list[int] = []
    original = Learnability.observe

    def counting(self: Learnability, rows: list, parts: dict, group_size: int) -> dict:
        reported.append(len(rows) // group_size)
        return original(self, rows, parts, group_size)

    monkeypatch.setattr(Learnability, "observe", counting)
    train(
        make_cfg("~reward.functions.printable", "algo.sampling_rounds=3", "sampling=learnability")
    )
    assert reported == [2, 2, 2, 2, 2, 2]  # 2 steps x 3 rounds x data.batch_size 2
