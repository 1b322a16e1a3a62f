"""A run in which every group's rewards tie says so once, with what helps."""

import logging

from src.grpo.tied import TiedGroupsWatch
from src.train import train
from tests.conftest import TINY
from tests.helpers.dense_reward import OVERRIDES as DENSE_REWARD
from tests.helpers.mlflow_runs import history, only_run


def test_the_watch_warns_once_after_patience_tied_rollouts_in_a_row():
    watch = TiedGroupsWatch(patience=3)
    said = [watch.observe(share, 4) for share in (1.0, 1.0, 0.5, 1.0, 1.0)]
    assert said == [None] * 5 and watch.in_a_row == 2  # a rollout with signal restarts the count
    assert watch.observe(1.0, 4).startswith("nothing to learn: in each of the last 3 rollouts")
    assert [watch.observe(1.0, 4) for _ in range(5)] == [None] * 5  # once per run
    assert watch.in_a_row == 8


def test_patience_zero_never_warns_and_the_state_survives_a_checkpoint():
    quiet = TiedGroupsWatch(patience=0)
    assert all(quiet.observe(1.0, 4) is None for _ in range(20))
    watch = TiedGroupsWatch(patience=2)
    watch.observe(1.0, 4)
    restored = TiedGroupsWatch(patience=2)
    restored.load_state_dict(watch.state_dict())
    assert restored.observe(1.0, 4) is not None  # the count went on across the checkpoint
    assert TiedGroupsWatch(2).state_dict() == {"tied_rollouts": 0, "tied_warned": False}


def test_a_run_with_nothing_to_learn_says_so_once(make_cfg, caplog):
    """The untrained tiny model never answers a sum right: accuracy ties every group."""
    without_dense = [arg for arg in TINY if arg not in DENSE_REWARD]
    cfg = make_cfg(*without_dense, "trainer.max_steps=4", "algo.warn_tied_rollouts=2", tiny=False)
    with caplog.at_level(logging.WARNING):
        train(cfg)
    said = [r for r in caplog.records if "nothing to learn" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert "sft.enabled=true" in said[0].getMessage()
    tied = history(cfg, only_run(cfg), "tied_rollouts")
    assert tied == {1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0}
