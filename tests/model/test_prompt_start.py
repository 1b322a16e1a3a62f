"""Every prompt starts as its model expects: with the tokenizer's BOS exactly once where the
tokenizer adds one (Gemma), whether or not a chat template wrote it, and never where it adds
none; in the rollout, the log-prob passes, the reference and the frozen roles' scoring."""

import pytest
import torch

from src.model.causal_lm import CausalLM
from src.policy.generator import Generator
from src.rollout.hf import HFSampler
from tests.helpers.small_gemma import BOS_TEMPLATE, PLAIN_TEMPLATE, bos_tokenizer, small_gemma

PROMPTS = ["Question: 2 + 2?\nAnswer:", "Hi"]


def starts(ids: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
    """The first two real tokens of each left-padded row."""
    return [row[m.bool()][:2].tolist() for row, m in zip(ids, mask, strict=True)]


def lm_with(tokenizer, max_prompt_length=None) -> CausalLM:
    network = small_gemma(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    return CausalLM(network, tokenizer, max_prompt_length)


@pytest.mark.parametrize(
    "template", [None, BOS_TEMPLATE, PLAIN_TEMPLATE], ids=["plain", "bos-template", "template"]
)
@pytest.mark.parametrize("adds_bos", [True, False], ids=["adds-bos", "no-bos"])
def test_a_prompt_starts_with_the_bos_exactly_once_where_the_tokenizer_adds_one(adds_bos, template):
    tokenizer = bos_tokenizer(adds_bos, template)
    lm = lm_with(tokenizer)
    bos = tokenizer.bos_token_id
    generator = Generator(template="{question}", use_chat_template="auto" if template else False)
    texts = generator.prompts([{"question": q} for q in PROMPTS], tokenizer)
    encoded = lm.encode_prompts(texts)
    for first_two in starts(encoded["input_ids"], encoded["attention_mask"]):
        written = template == BOS_TEMPLATE  # the template wrote it into the text
        if adds_bos:
            assert first_two[0] == bos and first_two[1] != bos
        else:
            assert (first_two[0] == bos) == written and first_two[1] != bos


def test_a_run_of_bos_tokens_in_the_text_is_cut_to_one():
    lm = lm_with(bos_tokenizer())
    encoded = lm.encode_prompts(["<s><s>Hi", "<s>Hi", "Hi"])
    bos = lm.tokenizer.bos_token_id
    h = lm.tokenizer.convert_tokens_to_ids("H")
    assert starts(encoded["input_ids"], encoded["attention_mask"]) == [[bos, h]] * 3


def test_truncation_from_the_left_keeps_the_bos_first():
    lm = lm_with(bos_tokenizer(), max_prompt_length=4)
    encoded = lm.encode_prompts(["abcdefgh", "xy"])
    bos, (f, g, h, x, y) = (
        lm.tokenizer.bos_token_id,
        lm.tokenizer.convert_tokens_to_ids(list("fghxy")),
    )
    assert encoded["input_ids"].tolist() == [
        [bos, f, g, h],
        [lm.tokenizer.pad_token_id, bos, x, y],
    ]
    assert encoded["attention_mask"].tolist() == [[1, 1, 1, 1], [0, 1, 1, 1]]


def test_a_tokenizer_without_a_bos_gets_none_and_is_encoded_as_before(tiny_lm):
    assert tiny_lm.bos_token_id is None
    expected = tiny_lm.tokenizer(PROMPTS, add_special_tokens=False, padding=True)
    encoded = tiny_lm.encode_prompts(PROMPTS)
    assert encoded["input_ids"].tolist() == expected["input_ids"]
    assert encoded["attention_mask"].tolist() == expected["attention_mask"]


@pytest.mark.parametrize("fast", [True, False], ids=["fast-paths", "modules"])
def test_every_pass_of_a_gemma_network_reads_one_bos_first(fast, monkeypatch):
    """The rollout's prompts, and what the network's own forward reads in decoding (modules),
    the log-prob pass, the reference and continuation scoring (the frozen generator)."""
    if not fast:
        monkeypatch.setenv("GRPO_FAST_PATHS_OFF", "all")
    tokenizer = bos_tokenizer()
    lm = lm_with(tokenizer)
    bos = tokenizer.bos_token_id
    seen: list[torch.Tensor] = []
    lm.network.get_input_embeddings().register_forward_pre_hook(
        lambda module, args: seen.append(args[0].detach().clone())
    )
    rollout = HFSampler(max_completion_length=3).sample(lm, PROMPTS, group_size=2)
    assert starts(rollout.prompt_ids, rollout.prompt_mask) == [
        [bos, tokenizer.convert_tokens_to_ids(p[0])] for p in PROMPTS for _ in (0, 1)
    ]
    lm.log_probs(rollout)
    lm.frozen_reference().log_probs(rollout)
    lm.continuation_scores(PROMPTS, [["A", "B"], ["C"]])
    assert seen
    pad = tokenizer.pad_token_id
    for ids in seen:
        for row in ids:
            real = row[row != pad].tolist()
            if len(real) > 1 and bos in real:  # a prompt (a step's one token has no start)
                assert real.count(bos) == 1 and real[0] == bos, real
    prompt_reads = [ids for ids in seen if ids.size(1) > 1 and (ids == bos).any()]
    assert prompt_reads  # every pass above read its prompts through the forward at least once
