"""Helpers for tests that compare runs: metric histories, weights, greedy answers computed
apart from the code under test, and the guards that what is compared varies (a comparison of
zeros with zeros proves nothing)."""

from __future__ import annotations

from pathlib import Path

import mlflow
import pytest
import torch
from safetensors.torch import load_file

from src.model.causal_lm import load_causal_lm

CHECKPOINT_PREFIX = "lm.network."  # GRPOModule keeps the network at self.lm.network


def histories(
    client: mlflow.MlflowClient, run: mlflow.entities.Run, keys: list[str] | None = None
) -> dict[str, list[tuple[int, float]]]:
    """(step, value) pairs of each metric in step order, duplicates kept; every metric of the
    run unless `keys` names some."""
    return {
        key: sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
        for key in (keys if keys is not None else run.data.metrics)
    }


def timed(key: str) -> bool:
    """Wall-clock figures (`step_time`, `timing/<phase>`) differ between any two runs."""
    return key == "step_time" or key.startswith("timing/")


def assert_same_histories(
    got: dict[str, list[tuple[int, float]]], expected: dict[str, list[tuple[int, float]]]
) -> None:
    """The same metrics at the same steps, each step once, with the same values (wall-clock
    figures aside)."""
    assert got.keys() == expected.keys(), sorted(got.keys() ^ expected.keys())
    for key, values in expected.items():
        assert [step for step, _ in got[key]] == [step for step, _ in values], key
        if not timed(key):
            assert [value for _, value in got[key]] == pytest.approx(
                [value for _, value in values], rel=1e-5, abs=1e-6
            ), key


def weights(path: Path) -> dict[str, torch.Tensor]:
    """The network's tensors from a saved model folder (safetensors) or a Lightning
    checkpoint, under the names the model folder uses."""
    path = Path(path)
    if path.is_dir():
        return load_file(path / "model.safetensors")
    return checkpoint_weights(torch.load(path, map_location="cpu", weights_only=True))


def checkpoint_weights(checkpoint: dict) -> dict[str, torch.Tensor]:
    """The network's tensors of a loaded Lightning checkpoint, named as in a model folder."""
    return {
        name.removeprefix(CHECKPOINT_PREFIX): tensor
        for name, tensor in checkpoint["state_dict"].items()
        if name.startswith(CHECKPOINT_PREFIX)
    }


def max_difference(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> float:
    """The largest absolute difference between tensors of the same name. A model folder leaves
    out tied weights (the tiny model's output head is its embedding), so only names both hold
    are compared, and they must be nearly all of them."""
    shared = first.keys() & second.keys()
    assert len(shared) >= 0.9 * max(len(first), len(second)), sorted(first.keys() ^ second.keys())
    return max((first[name].float() - second[name].float()).abs().max().item() for name in shared)


def assert_updates_were_not_trivial(history: dict[str, list[tuple[int, float]]]) -> None:
    """Some step had a non-zero loss and gradient, and rewards that differed within a group:
    two runs that agree on such steps agree on something that could have differed."""
    assert any(abs(value) > 1e-6 for _, value in history["loss"]), history["loss"]
    assert any(value > 1e-6 for _, value in history["grad_norm"]), history["grad_norm"]
    assert any(value > 1e-6 for _, value in history["reward_std"]), history["reward_std"]


def greedy_answers(folder: Path | str, prompts: list[str], max_new_tokens: int) -> list[str]:
    """Each prompt decoded alone (no padding), greedily, by the model saved in `folder`: an
    account of held-out answers that does not go through the code under test."""
    lm = load_causal_lm(str(folder))
    texts = []
    for prompt in prompts:
        ids = lm.tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
        output = lm.network.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=max_new_tokens,
            eos_token_id=lm.eos_token_ids,
            pad_token_id=lm.tokenizer.pad_token_id,
        )
        texts.append(lm.tokenizer.decode(output[0, ids.size(1) :], skip_special_tokens=True))
    return texts
