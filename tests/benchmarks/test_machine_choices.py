"""The per-machine choices the benchmarks report and retime: decided at each model's own
widths, read from its folder's config alone, and every kept one timed again by `--retime`."""

from __future__ import annotations

import sys

import pytest
from transformers import LlamaConfig

from src.model.fast import onednn
from src.utils import per_machine
from src.utils.resolvers import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import fast_paths  # noqa: E402
import vs_trl  # noqa: E402

pytestmark = pytest.mark.skipif(not onednn.available(), reason="torch built without oneDNN")


@pytest.fixture
def timed(tmp_path, monkeypatch):
    """An empty per-machine cache; the timings stubbed: oneDNN faster at widths from 64 on,
    its gradients never. Returns the (widths, verdict) timed, in order."""
    monkeypatch.setenv(per_machine.FOLDER_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setattr(onednn, "_answers", {})
    monkeypatch.setattr(per_machine, "_CHOICES", {})  # none made by earlier tests
    calls = []

    def timing(widths, verdict, rows=None):
        calls.append((widths, verdict))
        faster = widths[0] >= 64 and verdict != onednn.GRADIENTS
        return per_machine.Verdict(faster, True, {"mkl": 1e-3})

    monkeypatch.setattr(onednn, "_time_both", timing)
    return calls


def llama_folder(tmp_path, hidden: int, mlp: int):
    folder = tmp_path / f"llama_{hidden}"
    LlamaConfig(
        hidden_size=hidden,
        intermediate_size=mlp,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=300,
    ).save_pretrained(folder)
    return folder


def test_the_choices_are_made_at_each_models_widths(tmp_path, timed):
    folders = [llama_folder(tmp_path, 32, 96), llama_folder(tmp_path, 64, 192)]
    lines = vs_trl.machine_choices([(folder, None) for folder in folders])
    # the gradients' verdict is asked only where the products go through oneDNN
    products, decoding, gradients = onednn.PATH, onednn.DECODING, onednn.GRADIENTS
    assert timed == [
        ((32, 96), products),
        ((32, 96), decoding),
        ((64, 192), products),
        ((64, 192), gradients),
        ((64, 192), decoding),
    ]
    assert [line.split(":")[0] for line in lines] == [
        "onednn_gradients.64x192",
        "onednn_packed_decoding.32x96",
        "onednn_packed_decoding.64x192",
        "onednn_products.32x96",
        "onednn_products.64x192",
    ]
    assert "False (measured now and kept" in lines[1]


def test_retime_times_every_kept_verdict_again(tmp_path, timed):
    vs_trl.machine_choices([(llama_folder(tmp_path, 64, 192), None)])
    per_machine.measured_once("something_else", lambda: 3)  # not a verdict of ours: left
    del timed[:]
    lines = fast_paths.retime()
    assert len(timed) == 3  # each kept verdict once
    assert [line.split(":")[0] for line in lines] == [
        "onednn_gradients.64x192",
        "onednn_packed_decoding.64x192",
        "onednn_products.64x192",
    ]
    gradients, decoding, products = lines
    assert "kept before False" in gradients and "now False (measured now and kept" in gradients
    assert "kept before True" in products and "now True (measured now and kept" in products
    assert per_machine.kept("something_else")["value"] == 3


def test_retime_with_nothing_kept_says_so(tmp_path, timed):
    lines = fast_paths.retime()
    assert timed == [] and len(lines) == 1
    assert lines[0].startswith(f"no per-machine choice is kept for this machine in {tmp_path}")
