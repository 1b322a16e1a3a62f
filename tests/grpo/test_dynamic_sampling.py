"""DAPO's dynamic sampling: tied groups are dropped and the reserve's prompts sampled until a
batch of groups with a spread is in hand, within the step's rounds."""

from __future__ import annotations

import pytest
import torch

from src.grpo.dynamic_sampling import sample_with_spread
from src.grpo.metrics import tied_groups
from src.policy.episode import Episode
from src.rollout.rollout import Rollout, join_rollouts
from src.runs.settings import check_settings
from src.train import train
from src.utils.config import build
from src.utils.errors import ConfigError
from tests.helpers.mlflow_runs import history, only_run

G = 2
PAD = 9


def scripted_episode(rows: list[dict], rewards: dict[str, list[float]]) -> Episode:
    """An episode of G completions per row whose rewards are `rewards[row["question"]]`; the
    prompt of row q is q+1 tokens long and its completions q+2 and q+3 tokens, so rounds differ
    in their padding."""
    prompt_width = max(row["q"] for row in rows) + 1
    completion_width = max(row["q"] for row in rows) + 3
    prompt_ids = torch.full((len(rows) * G, prompt_width), PAD)
    prompt_mask = torch.zeros_like(prompt_ids)
    completion_ids = torch.full((len(rows) * G, completion_width), PAD)
    completion_mask = torch.zeros_like(completion_ids)
    for i, row in enumerate(rows):
        for j in range(G):
            n = i * G + j
            prompt_ids[n, prompt_width - row["q"] - 1 :] = row["q"]
            prompt_mask[n, prompt_width - row["q"] - 1 :] = 1
            completion_ids[n, : row["q"] + 2 + j] = 10 * row["q"] + j
            completion_mask[n, : row["q"] + 2 + j] = 1
    expanded = [row for row in rows for _ in range(G)]
    rollout = Rollout(
        prompt_ids=prompt_ids,
        prompt_mask=prompt_mask,
        completion_ids=completion_ids,
        completion_mask=completion_mask,
        is_clipped=torch.zeros(len(expanded), dtype=torch.bool),
        completions=[f"{row['question']}-{j}" for row in rows for j in range(G)],
    )
    scores = torch.tensor([value for row in rows for value in rewards[row["question"]]])
    return Episode(
        prompts=[row["question"] for row in rows],
        rollout=rollout,
        rows=expanded,
        outcomes=list(rollout.completions),
        rewards=scores,
        reward_parts={"accuracy": scores.clone()},
        reward_errors={"accuracy": 1},
        details=[{"n": n} for n in range(len(expanded))],
    )


def run(questions: str, rounds: int, rewards: dict[str, list[float]]):
    rows = [{"question": q, "q": i % 3} for i, q in enumerate(questions)]
    calls = []

    def sample(batch):
        calls.append([row["question"] for row in batch])
        return scripted_episode(batch, rewards)

    episode, metrics = sample_with_spread(sample, rows, rounds, G, PAD)
    return episode, metrics, calls


def test_tied_groups_marks_groups_whose_rewards_are_all_equal():
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.5, 0.5, 0.0, 1e-3])
    assert tied_groups(rewards, 2).tolist() == [True, False, True, False]


def test_tied_groups_are_replaced_from_the_reserve_and_extras_dropped():
    rewards = {"a": [1, 1], "b": [0, 1], "c": [1, 0], "d": [0.5, 0], "e": [1, 0], "f": [0, 1]}
    episode, metrics, calls = run("abcdef", 3, rewards)
    assert calls == [["a", "b"], ["c", "d"]]  # the third batch was not needed
    assert episode.prompts == ["b", "c"]  # a tied; d was one too many
    assert [row["question"] for row in episode.rows] == ["b", "b", "c", "c"]
    assert episode.rewards.tolist() == [0, 1, 1, 0]
    assert episode.reward_parts["accuracy"].tolist() == [0, 1, 1, 0]
    assert episode.outcomes == ["b-0", "b-1", "c-0", "c-1"] == episode.rollout.completions
    assert episode.reward_errors == {"accuracy": 2}  # counted over both rounds sampled
    assert metrics == {
        "dynamic_sampling/rollouts": 2.0,
        "dynamic_sampling/groups_dropped": 1.0,
        "dynamic_sampling/zero_spread_share": 0.25,
        "dynamic_sampling/groups_missing": 0.0,
    }
    # b (q=1) and c (q=2) came from rounds padded differently: each row keeps its own tokens
    rollout = episode.rollout
    assert rollout.prompt_mask.sum(dim=1).tolist() == [2, 2, 3, 3]
    assert rollout.completion_mask.sum(dim=1).tolist() == [3, 4, 4, 5]
    assert rollout.prompt_ids[0].tolist() == [PAD, 1, 1]
    assert rollout.completion_ids[1].tolist() == [11, 11, 11, 11, PAD]


def test_rounds_spent_trains_on_what_was_kept_or_on_the_last_round():
    rewards = {"a": [1, 1], "b": [0, 0], "c": [1, 0], "d": [0, 0], "e": [0, 0], "f": [1, 1]}
    episode, metrics, calls = run("abcdef", 3, rewards)
    assert len(calls) == 3 and episode.prompts == ["c"]
    assert metrics["dynamic_sampling/groups_missing"] == 1.0
    assert metrics["dynamic_sampling/zero_spread_share"] == pytest.approx(5 / 6)

    tied = dict.fromkeys("abcd", [0.0, 0.0])
    episode, metrics, calls = run("abcd", 2, tied)
    assert episode.prompts == ["c", "d"]  # nothing kept: the last round as it was
    assert metrics["dynamic_sampling/rollouts"] == 2.0
    assert metrics["dynamic_sampling/groups_missing"] == 2.0
    assert metrics["dynamic_sampling/zero_spread_share"] == 1.0


def test_join_rollouts_keeps_the_sampler_log_probs_only_when_every_part_has_them():
    first = scripted_episode([{"question": "a", "q": 0}], {"a": [0, 1]}).rollout
    second = scripted_episode([{"question": "b", "q": 2}], {"b": [0, 1]}).rollout
    assert join_rollouts([first, second], PAD).sampler_logps is None
    first.sampler_logps = -torch.ones(first.completion_ids.shape)
    second.sampler_logps = -2 * torch.ones(second.completion_ids.shape)
    joined = join_rollouts([first, second], PAD)
    assert joined.sampler_logps.shape == joined.completion_ids.shape == (4, 5)
    assert joined.sampler_logps[0].tolist() == [-1, -1, -1, 0, 0]
    assert joined.sampler_logps[3].tolist() == [-2] * 5


def test_a_run_with_dynamic_sampling_logs_its_rounds(make_cfg):
    # The untrained tiny model never answers right: every group ties, every round is spent
    # and the step trains on its last round, saying so.
    cfg = make_cfg("~reward.functions.printable", "algo.sampling_rounds=3")
    train(cfg)
    run = only_run(cfg)

    def values(name: str) -> list[float]:
        return [value for _, value in sorted(history(cfg, run, name).items())]

    assert values("dynamic_sampling/rollouts") == [3.0, 3.0]
    assert values("dynamic_sampling/groups_missing") == [2.0, 2.0]  # data.batch_size 2
    assert values("dynamic_sampling/zero_spread_share") == [1.0, 1.0]
    assert values("frac_reward_zero_std") == [1.0, 1.0]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["algo.sampling_rounds=0"],
            r"algo.sampling_rounds must be a whole number >= 1 \(rollouts per step",
        ),
        (
            ["algo.sampling_rounds=1.5"],
            "algo.sampling_rounds must be a whole number >= 1 .*, got 1.5",
        ),
        (
            ["algo.sampling_rounds=2", "trainer.devices=2", "trainer.strategy=ddp"],
            "runs on one training process",
        ),
    ],
)
def test_sampling_rounds_that_cannot_work_are_refused(make_cfg, overrides, message):
    with pytest.raises(ConfigError, match=message):
        check_settings(make_cfg(*overrides))


def test_the_loader_draws_the_reserve_with_the_steps_prompts(make_cfg):
    cfg = make_cfg("algo.sampling_rounds=3")
    datamodule = build(cfg.data)
    datamodule.prepare_rows()
    (batch, *_) = datamodule.train_dataloader()
    assert len(batch) == 3 * cfg.data.batch_size
