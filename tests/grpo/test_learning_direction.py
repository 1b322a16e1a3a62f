"""One GRPO update moves probability toward completions that scored above their group."""

import torch

from src.grpo.advantages import group_advantages
from src.grpo.objective import Objective, TokenLogProbs, grpo_loss
from src.model.causal_lm import load_causal_lm
from src.rollout.hf import HFSampler


def test_one_update_raises_rewarded_and_lowers_unrewarded_completions(tiny_lm):
    lm = load_causal_lm(tiny_lm.network.name_or_path)  # a private copy: this test trains it
    torch.manual_seed(0)
    rollout = HFSampler(max_completion_length=6).sample(lm, ["What is 11 + 22?\nAnswer:", "Hi"], 4)
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0])
    advantages = group_advantages(rewards, group_size=4)
    mask = rollout.completion_mask.float()

    def sequence_logps() -> torch.Tensor:
        return (lm.log_probs(rollout)[0] * mask).sum(dim=1)

    before = sequence_logps().detach()
    loss, _ = grpo_loss(
        TokenLogProbs(lm.log_probs(rollout)[0]), advantages, mask, Objective("grpo")
    )
    loss.backward()
    torch.optim.SGD(lm.parameters(), lr=0.05).step()
    change = sequence_logps().detach() - before
    assert (change[advantages > 0] > 0).all()
    assert (change[advantages < 0] < 0).all()
