"""A training run's room before and after (`room/<split>/*` at step 0 and the last step, and
`room_closed`), sampled from a generator of its own so the training's draws do not change."""

from __future__ import annotations

import math

import pytest

from src.runs.room_callback import SampledRoom
from src.train import train
from tests.helpers.mlflow_runs import history, only_run, runs

KNOWN = ["rollout._target_=tests.helpers.known_answers.KnownAnswers", "room.k=4"]


def test_the_room_is_sampled_at_the_start_and_the_end(make_cfg) -> None:
    cfg = make_cfg(*KNOWN, "trainer.max_steps=2")
    train(cfg)
    run = only_run(cfg)
    assert history(cfg, run, "room/validation/pass_at_1") == {0: 0.75, 2: 0.75}
    assert history(cfg, run, "room/validation/room") == {0: 0.25, 2: 0.25}
    assert history(cfg, run, "room/validation/room_closed") == {2: 0.0}  # a fixed sampler
    # every row scores alike before and after: the paired change has no spread
    assert history(cfg, run, "room/validation/room_closed_margin") == {2: 0.0}
    assert history(cfg, run, "room/validation/room_margin") == {0: 0.0, 2: 0.0}
    assert history(cfg, run, "room/validation/pass_at_k_change") == {2: 0.0}


def test_turning_it_off_samples_nothing_and_trains_the_same(make_cfg, tmp_path) -> None:
    """The samples draw from their own generator: the training's rewards are the same with
    the sampled evaluation on and off."""
    rewards = {}
    for enabled in ("true", "false"):
        folder = tmp_path / f"run_{enabled}"
        cfg = make_cfg("room.k=4", f"room.in_training={enabled}", f"paths.run_dir={folder}")
        train(cfg)
        latest = max(runs(cfg), key=lambda r: r.info.start_time)
        rewards[enabled] = history(cfg, latest, "reward")
        has_room = any(name.startswith("room/") for name in latest.data.metrics)
        assert has_room == (enabled == "true")
    assert rewards["true"] == rewards["false"]


def test_its_state_travels_in_checkpoints() -> None:
    callback = SampledRoom(True, 4, "auto", "auto", None, None, 2, 0)
    callback.before = {"validation": {"pass_at_1": 0.5, "room": 0.2}}
    callback.before_rates = {"validation": [0.25, 0.75]}
    again = SampledRoom(True, 4, "auto", "auto", None, None, 2, 0)
    again.load_state_dict(callback.state_dict())
    assert again.before == callback.before
    assert again.before_rates == callback.before_rates


@pytest.mark.parametrize(("after", "closed"), [(0.6, 0.5), (0.5, 0.0)])
def test_room_closed_is_the_share_of_the_start_room(after: float, closed: float) -> None:
    from src.evaluation.room import room_closed

    assert math.isclose(room_closed(after, 0.5, 0.2), closed)
