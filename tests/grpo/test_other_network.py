"""A network of another kind plugs into GRPO through `PolicyNetwork` and `Sampler` alone: a
context-free unigram model over digits, with its own sampler, is trained by the unchanged
`GRPOModule` (KL term and its frozen reference included) to write more sevens."""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import lightning as L
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader

from src.data.datamodule import keep_rows
from src.grpo.module import GRPOModule
from src.grpo.settings import AlgoSettings
from src.model.network import PolicyNetwork, Sequences
from src.policy.generator import Generator
from src.reward.combine import CombinedReward
from src.rollout.rollout import Rollout, completion_mask

EOS = 10  # ids 0-9 are the digits


class Unigram(nn.Module):
    """Every token drawn from one learned distribution, whatever came before."""

    tokenizer = None

    def __init__(self) -> None:
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(EOS + 1))

    def encode_prompts(self, prompts: list[str]) -> dict[str, Tensor]:
        ones = torch.ones(len(prompts), 1, dtype=torch.long)
        return {"input_ids": ones, "attention_mask": ones}

    def encode_completions(self, texts: list[str]) -> tuple[Tensor, Tensor]:
        width = max(len(text) for text in texts) + 1
        ids = torch.full((len(texts), width), EOS)
        for i, text in enumerate(texts):
            ids[i, : len(text)] = torch.tensor([int(c) for c in text], dtype=torch.long)
        return ids, completion_mask(ids, EOS)[0]

    def log_probs(
        self, sequences: Sequences, temperature: float = 1.0, with_entropy: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        logps = torch.log_softmax(self.logits / temperature, dim=-1)
        per_token = logps[sequences.completion_ids]
        entropy = None
        if with_entropy:
            entropy = -(logps.exp() * logps).sum().detach().expand_as(per_token)
        return per_token, entropy

    def frozen_reference(self) -> Unigram:
        return copy.deepcopy(self).requires_grad_(False)

    def trainable_parameters(self) -> list[nn.Parameter]:
        return [self.logits]

    def save(self, path: str | Path, merge: bool = True) -> Path:
        torch.save(self.state_dict(), Path(path) / "unigram.pt")
        return Path(path)


class UnigramSampler:
    """Draws completions of up to three digits from a `Unigram`."""

    temperature = 1.0
    max_completion_length = 3

    def sync(self, network: Unigram) -> None:
        """Sampling reads the network itself."""

    def sample(
        self, network: Unigram, prompts: list[str], group_size: int, greedy: bool = False
    ) -> Rollout:
        rows = len(prompts) * group_size
        probs = torch.softmax(network.logits.detach(), dim=-1)
        if greedy:
            ids = probs.argmax().repeat(rows, self.max_completion_length)
        else:
            ids = torch.multinomial(probs, rows * self.max_completion_length, replacement=True)
            ids = ids.view(rows, self.max_completion_length)
        mask, clipped = completion_mask(ids, EOS)
        ids = ids.masked_fill(mask == 0, EOS)
        texts = ["".join(str(int(t)) for t in row if t != EOS) for row in ids]
        prompt = network.encode_prompts(prompts * group_size)
        return Rollout(
            prompt["input_ids"], prompt["attention_mask"], ids, mask, clipped, completions=texts
        )


def sevens(outcomes: list[str], rows: list[dict]) -> list[float]:
    return [float(outcome.count("7")) for outcome in outcomes]


def test_grpo_trains_a_network_that_is_not_a_causal_lm():
    torch.manual_seed(0)
    network: PolicyNetwork = Unigram()
    module = GRPOModule(
        lm=network,
        sampler=UnigramSampler(),
        policy=Generator(template="{question}"),
        reward=CombinedReward({"sevens": sevens}),
        optimizer=functools.partial(torch.optim.SGD, lr=2.0),
        settings=AlgoSettings(group_size=8, kl_beta=0.01, samples_every_n_steps=0),
    )
    rows = [{"question": "digits", "answer": "7"}] * 4
    trainer = L.Trainer(
        max_steps=6,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, DataLoader(rows, batch_size=2, collate_fn=keep_rows))
    probs = torch.softmax(network.logits.detach(), dim=-1)
    assert trainer.global_step == 6
    assert probs[7] > 2 / (EOS + 1)  # up from 1/11: the reward was learned
    assert torch.equal(module.reference.logits, torch.zeros(EOS + 1))  # the reference stays put
