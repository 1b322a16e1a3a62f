"""Prompt building of the generator role."""

import pytest

from src.policy.generator import Generator
from tests.helpers.declared import refusal


def test_template_fills_row_fields():
    role = Generator(template="{question}\nAnswer:", sft_target=" {answer}")
    rows = [{"question": "What is 1 + 1?", "answer": "2"}]
    assert role.prompts(rows) == ["What is 1 + 1?\nAnswer:"]
    assert role.sft_targets(rows) == [" 2"]
    assert role.outcomes([" 2"], rows).texts == [" 2"]


def test_missing_field_names_the_setting():
    with pytest.raises(KeyError, match="policy.template uses field 'context'"):
        Generator(template="{context}").prompts([{"question": "q"}])


def test_chat_template_needs_a_tokenizer_that_has_one(tiny_lm):
    with pytest.raises(ValueError, match="no chat template"):
        Generator(use_chat_template=True).prompts([{"question": "q"}], tiny_lm.tokenizer)


def test_response_prefix_ends_prompts_and_starts_outcomes():
    role = Generator(
        template="{question}",
        sft_target="<think>\n{answer}</think>",
        response_prefix="<think>\n",
    )
    rows = [{"question": "Q?", "answer": "A"}]
    assert role.prompts(rows) == ["Q?<think>\n"]
    assert role.sft_targets(rows) == ["A</think>"]  # the prompt already holds the prefix
    assert role.outcomes(["x</think>"], rows).texts == ["<think>\nx</think>"]


def test_auto_chat_template_falls_back_to_plain_text(tiny_lm):
    role = Generator(
        template="{question}",
        system_prompt="Be brief.",
        use_chat_template="auto",
        examples=[{"user": "1+1?", "assistant": "2"}],
    )
    assert role.prompts([{"question": "2+2?"}], tiny_lm.tokenizer) == [
        "Be brief.\n\n1+1?\n2\n\n2+2?\n"
    ]


class ChatTokenizer:
    chat_template = "x"

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        return "|".join(f"{m['role']}:{m['content']}" for m in messages) + "|assistant:"


def test_examples_become_chat_turns():
    role = Generator(
        template="{question}",
        system_prompt="S",
        use_chat_template="auto",
        examples=[{"user": "U1", "assistant": "A1"}],
        response_prefix="<think>",
    )
    assert role.prompts([{"question": "Q"}], ChatTokenizer()) == [
        "system:S|user:U1|assistant:A1|user:Q|assistant:<think>"
    ]


def test_bad_settings_are_named():
    assert "policy.use_chat_template must be one of True, False, auto" in refusal(
        {"policy.use_chat_template": "yes"}
    )
    with pytest.raises(ValueError, match=r"policy.examples\[0\] must have exactly the keys"):
        Generator(examples=[{"question": "q", "answer": "a"}])
