"""The learned reward model: a frozen sequence classifier scoring texts, loaded like any folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    LlamaConfig,
    LlamaForSequenceClassification,
)

from src.model.sequence_classifier import SequenceClassifierScorer
from src.model.tiny import byte_level_tokenizer
from src.utils.errors import ConfigError, MissingFileError

TEXTS = ["The answer is 85.", "No idea", "x", "A longer answer that needs more padding: 42"]
PROMPTS = ["What is 37 + 48?", "What is 6 * 7?", "Say x.", "Explain."]


def save_tiny_classifier(folder: Path, num_labels: int, kind: str = "llama") -> Path:
    """Write a tiny randomly initialised classifier (seeded) and the byte-level tokenizer."""
    tokenizer = byte_level_tokenizer()
    torch.manual_seed(0)
    if kind == "bert":
        config = BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=128,
            pad_token_id=tokenizer.pad_token_id,
            num_labels=num_labels,
        )
        model = BertForSequenceClassification(config)
    else:
        config = LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=128,
            pad_token_id=tokenizer.pad_token_id,
            num_labels=num_labels,
        )
        model = LlamaForSequenceClassification(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("kind", ["llama", "bert"])
def test_one_output_scores_are_the_raw_logits(tmp_path, kind):
    folder = save_tiny_classifier(tmp_path / kind, num_labels=1, kind=kind)
    scorer = SequenceClassifierScorer(str(folder), device="cpu")
    assert not scorer.model.training
    assert not any(p.requires_grad for p in scorer.model.parameters())
    scores = scorer.score(TEXTS)
    assert isinstance(scores, list) and all(type(s) is float for s in scores)
    for text, score in zip(TEXTS, scores, strict=True):
        encoded = scorer.tokenizer([text], return_tensors="pt")
        with torch.no_grad():
            logit = scorer.model(**encoded).logits[0, 0].item()
        assert score == pytest.approx(logit, abs=1e-5)


def test_two_labels_give_the_probability_of_the_chosen_label(tmp_path):
    folder = save_tiny_classifier(tmp_path / "cls", num_labels=2)
    last = SequenceClassifierScorer(str(folder), device="cpu")  # default: the last label
    first = SequenceClassifierScorer(str(folder), device="cpu", positive_label=0)
    assert last.positive_label == 1 and first.positive_label == 0
    good, bad = last.score(TEXTS), first.score(TEXTS)
    assert all(0.0 <= p <= 1.0 for p in good + bad)
    assert good == pytest.approx([1.0 - p for p in bad], abs=1e-5)
    encoded = last.tokenizer([TEXTS[0]], return_tensors="pt")
    with torch.no_grad():
        probs = torch.softmax(last.model(**encoded).logits, dim=-1)[0]
    assert good[0] == pytest.approx(probs[1].item(), abs=1e-5)


def test_batching_does_not_change_the_scores(tmp_path):
    folder = save_tiny_classifier(tmp_path / "rm", num_labels=1)
    one = SequenceClassifierScorer(str(folder), device="cpu", batch_size=1)
    many = SequenceClassifierScorer(str(folder), device="cpu", batch_size=16)
    three = SequenceClassifierScorer(str(folder), device="cpu", batch_size=3)  # a ragged batch
    for pairs in (None, PROMPTS):
        alone = torch.tensor(one.score(TEXTS, pairs))
        assert torch.allclose(alone, torch.tensor(many.score(TEXTS, pairs)), atol=1e-5)
        assert torch.allclose(alone, torch.tensor(three.score(TEXTS, pairs)), atol=1e-5)


def test_prompts_are_scored_with_the_answers(tmp_path):
    folder = save_tiny_classifier(tmp_path / "rm", num_labels=1)
    scorer = SequenceClassifierScorer(str(folder), device="cpu")
    alone, paired = scorer.score(TEXTS), scorer.score(TEXTS, PROMPTS)
    assert len(paired) == len(TEXTS)
    assert all(abs(a - b) > 1e-6 for a, b in zip(alone, paired, strict=True))
    with pytest.raises(ValueError, match="4 texts but 1 pairs"):
        scorer.score(TEXTS, PROMPTS[:1])


def test_empty_input_and_truncation(tmp_path):
    folder = save_tiny_classifier(tmp_path / "rm", num_labels=1)
    scorer = SequenceClassifierScorer(str(folder), device="cpu", max_length=4)
    assert scorer.score([]) == []
    assert scorer.score([], []) == []
    # Only the first four bytes are read: texts that share them score the same.
    long_a, long_b = scorer.score(["abcd" + "x" * 300, "abcd" + "y" * 300])
    assert long_a == pytest.approx(long_b, abs=1e-6)


def test_tokenizer_without_pad_token_pads_with_eos(tmp_path):
    folder = save_tiny_classifier(tmp_path / "rm", num_labels=1)
    tokenizer = byte_level_tokenizer()
    tokenizer.pad_token = None
    tokenizer.save_pretrained(folder)
    scorer = SequenceClassifierScorer(str(folder), device="cpu")
    assert scorer.tokenizer.pad_token == scorer.tokenizer.eos_token
    assert scorer.model.config.pad_token_id == scorer.tokenizer.eos_token_id
    together = scorer.score(TEXTS)
    alone = [scorer.score([text])[0] for text in TEXTS]
    assert together == pytest.approx(alone, abs=1e-5)  # the EOS padding is not read


def test_missing_model_names_the_config_key(tmp_path):
    missing = tmp_path / "no_such_model"
    with pytest.raises(MissingFileError, match="reward.functions.judge.model=.*no_such_model"):
        SequenceClassifierScorer(str(missing), device="cpu")
    # A hub name: conftest keeps tests offline, and it is in no local cache.
    with pytest.raises(
        MissingFileError, match="reward.functions.judge.model=.*no-such-org"
    ) as info:
        SequenceClassifierScorer("no-such-org/no-such-reward-model", device="cpu")
    assert "\n" not in str(info.value) and "local folder" in str(info.value)


@pytest.mark.parametrize(
    ("setting", "match"),
    [
        ({"batch_size": 0}, "batch_size must be at least 1"),
        ({"max_length": 0}, "max_length must be at least 1"),
        ({"dtype": "float8"}, "dtype must be one of"),
        ({"device": "nowhere"}, "no torch device"),
        ({"positive_label": 2}, "positive_label must be in 0..1"),
    ],
)
def test_bad_settings_raise_config_error(tmp_path, setting, match):
    folder = save_tiny_classifier(tmp_path / "cls", num_labels=2)
    with pytest.raises(ConfigError, match=match):
        SequenceClassifierScorer(str(folder), **{"device": "cpu", **setting})


def test_positive_label_of_a_one_output_model_is_refused(tmp_path):
    folder = save_tiny_classifier(tmp_path / "rm", num_labels=1)
    with pytest.raises(ConfigError, match="single output"):
        SequenceClassifierScorer(str(folder), device="cpu", positive_label=1)
