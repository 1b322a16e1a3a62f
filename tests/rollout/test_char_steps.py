"""The char sampler's denoising steps: surest draws revealed first, ceil(left / steps left) a
step, and log-probabilities recomputed from the window as each character's step saw it."""

from __future__ import annotations

import pytest
import torch

from scripts.char_decoding import decode
from src.recipes.char_diffusion.encoder import MASK
from src.recipes.char_diffusion.infill import Infill
from src.recipes.char_diffusion.network import load_char_diffusion
from src.recipes.char_diffusion.sampler import CharDiffusionSampler, nucleus_sample, surest
from src.recipes.char_diffusion.settings import SETTINGS as CHAR_SETTINGS
from src.rollout.rollout import join_rollouts
from tests.helpers.declared import refusal

PROMPTS = ["the c█t s█t on ██e mat", "a d██ ran ███ay fast!!"]


@pytest.fixture(scope="module")
def network():
    torch.manual_seed(0)
    built = load_char_diffusion(None, max_length=24, hidden_size=32, num_layers=1, num_heads=2)
    return built.eval()


def test_each_step_keeps_the_surest_share_of_what_is_still_hidden():
    sureness = torch.tensor([[0.1, 0.9, 0.5, 0.7, 0.2], [0.3, 0.8, 0.0, 0.0, 0.0]])
    hidden = torch.tensor([[True, True, True, True, True], [True, False, True, False, False]])
    # 5 hidden over 3 steps: 2 now; 2 hidden over 3 steps: 1 now (the surer hidden one)
    assert surest(sureness, hidden, 3).tolist() == [
        [False, True, False, True, False],
        [True, False, False, False, False],
    ]
    assert surest(sureness, hidden, 1).equal(hidden)  # the last step reveals the rest
    ties = torch.zeros(1, 4)
    assert surest(ties, torch.ones(1, 4, dtype=torch.bool), 2).tolist() == [
        [True, True, False, False]
    ]


def test_greedy_steps_decode_as_the_reference_loop(network):
    infill = Infill("█")
    for steps in (1, 2, 3, 8):
        sampler = CharDiffusionSampler(24, denoising_steps=steps)
        fills = sampler.sample(network, PROMPTS, 1, greedy=True).completions
        filled = [infill.filled(prompt, fill) for prompt, fill in zip(PROMPTS, fills, strict=True)]
        assert filled == decode(network, PROMPTS, "█", steps, "sure")


def test_step_counts_follow_the_schedule(network):
    rollout = CharDiffusionSampler(24, denoising_steps=3).sample(network, PROMPTS, 4)
    steps, mask = rollout.reveal_steps, rollout.completion_mask.bool()
    for row in range(steps.size(0)):
        counts = torch.bincount(steps[row][mask[row]], minlength=3).tolist()
        left, expected = int(mask[row].sum()), []
        for step in range(3):
            expected.append(-(-left // (3 - step)))
            left -= expected[-1]
        assert counts == expected


def test_one_step_draws_as_before_and_carries_no_steps(network):
    torch.manual_seed(5)
    rollout = CharDiffusionSampler(24, temperature=0.7, top_p=0.9).sample(network, PROMPTS, 3)
    assert rollout.reveal_steps is None
    torch.manual_seed(5)
    ids = network.encode_prompts(PROMPTS)["input_ids"].repeat_interleave(3, dim=0)
    logits, valid = network.masked_logits(ids)
    drawn = nucleus_sample(logits / 0.7, 0.9)
    assert rollout.completion_ids[valid].equal(drawn[valid])


def test_log_probs_read_each_character_from_the_window_its_step_saw(network):
    torch.manual_seed(1)
    rollout = CharDiffusionSampler(24, temperature=1.0, denoising_steps=3).sample(
        network, PROMPTS, 2
    )
    logps, _ = network.log_probs(rollout, temperature=1.0)
    tokenizer = network.tokenizer
    for row in range(rollout.completion_ids.size(0)):
        prompt = PROMPTS[row // 2]
        positions = [i for i, char in enumerate(prompt) if char == "█"]
        chars = rollout.completions[row]
        steps = rollout.reveal_steps[row].tolist()
        for k, position in enumerate(positions):
            window = list(prompt)
            for j, other in enumerate(positions):
                if steps[j] < steps[k]:
                    window[other] = chars[j]
            ids = network.encode_prompts(["".join(window)])["input_ids"]
            assert int((ids == MASK).sum()) == sum(s >= steps[k] for s in steps[: len(positions)])
            expected = torch.log_softmax(network.logits(ids)[0, position], dim=-1)
            char_id = tokenizer.encode(chars[k])[0]
            assert logps[row, k].item() == pytest.approx(expected[char_id].item(), abs=1e-5)


def test_steps_survive_selecting_and_joining_rows(network):
    stepped = CharDiffusionSampler(24, denoising_steps=2).sample(network, PROMPTS, 2)
    one = CharDiffusionSampler(24).sample(network, PROMPTS[:1], 1)
    rows = torch.tensor([False, True, True, False])
    part = stepped.select(rows)
    assert part.reveal_steps.equal(stepped.reveal_steps[1:3, : part.completion_ids.size(1)])
    joined = join_rollouts([one, stepped], pad_token_id=0)
    assert joined.reveal_steps[0].eq(0).all()
    assert joined.reveal_steps[1:].equal(stepped.reveal_steps)
    assert join_rollouts([one, one], 0).reveal_steps is None
    # selected and joined rows score as they did in the whole rollout
    whole, _ = network.log_probs(stepped)
    assert network.log_probs(part)[0].allclose(whole[1:3, : part.completion_ids.size(1)])
    assert network.log_probs(joined)[0][1:].allclose(whole, atol=1e-6)


@pytest.mark.parametrize("steps", [0, -2, 1.5, True])
def test_bad_step_counts_are_refused_by_name(steps):
    """Declared with task=char_diffusion's keys: refused when the config is composed."""
    said = refusal({"rollout.denoising_steps": steps}, CHAR_SETTINGS)
    assert said.startswith("rollout.denoising_steps must be a whole number >= 1")
