"""Our losses against TRL's own computation on the same tensors: `GRPOTrainer._compute_loss`
run on a stand-in trainer whose model returns the given log-probs. Runs when TRL is installed
(`pip install .[bench]`); its version's loss is what is compared."""

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
    from src.grpo.objective import grpo_loss

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
            value, _ = grpo_loss(
                logps, old, ref, advantages, mask, beta=options["beta"],
                epsilon_low=options["eps"][0], epsilon_high=options["eps"][1],
                loss_type=loss_type, max_completion_length=MAX_LENGTH,
                ratio_level=options["level"], policy=policy, delta=options["delta"],
                sapo_temperatures=options["sapo"],
            )  # fmt: skip
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
