"""Prompt building of the generator role."""

import pytest

from src.policy.generator import Generator


def test_template_fills_row_fields():
    role = Generator(template="{question}\nAnswer:", sft_target=" {answer}")
    rows = [{"question": "What is 1 + 1?", "answer": "2"}]
    assert role.prompts(rows) == ["What is 1 + 1?\nAnswer:"]
    assert role.sft_targets(rows) == [" 2"]
    assert role.outcomes([" 2"], rows) == [" 2"]


def test_missing_field_names_the_setting():
    with pytest.raises(KeyError, match="policy.template uses field 'context'"):
        Generator(template="{context}").prompts([{"question": "q"}])


def test_chat_template_needs_a_tokenizer_that_has_one(tiny_lm):
    with pytest.raises(ValueError, match="no chat template"):
        Generator(use_chat_template=True).prompts([{"question": "q"}], tiny_lm.tokenizer)
