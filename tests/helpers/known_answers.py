"""A sampler whose completions are known answers: of each arithmetic prompt's k completions,
the first `right` state the sum and the others a wrong number, so the room's figures are known
(pass@1 = right / k, maj@k = 1 where right > k / 2). Select it with
`rollout._target_=tests.helpers.known_answers.KnownAnswers`."""

from __future__ import annotations

import re
from typing import Any

from src.model.network import PolicyNetwork
from src.rollout.rollout import Rollout, teacher_forced

SUM = re.compile(r"What is (\d+) \+ (\d+)\?")


class KnownAnswers:
    """Completion j of a prompt: its sum where j < `right`, else the sum plus one."""

    def __init__(self, max_completion_length: int, right: int = 3, **_: Any) -> None:
        self.max_completion_length = max_completion_length
        self.temperature = 1.0
        self.right = right

    def sync(self, network: PolicyNetwork) -> None:
        """Nothing to read."""

    def sample(
        self, network: PolicyNetwork, prompts: list[str], group_size: int, greedy: bool = False
    ) -> Rollout:
        texts = []
        for prompt in prompts:
            match = SUM.search(prompt)
            total = int(match.group(1)) + int(match.group(2)) if match else 0
            texts += [f" {total if j < self.right else total + 1}" for j in range(group_size)]
        repeated = [prompt for prompt in prompts for _ in range(group_size)]
        return teacher_forced(network, repeated, texts)
