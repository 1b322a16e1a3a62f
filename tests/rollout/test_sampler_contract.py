"""What every rollout backend promises, checked on each (hf everywhere, vLLM on a CUDA GPU), and
the vLLM backend's own parts on CPU: the Rollout built from token lists, the engine driven
through a stand-in `vllm` module, and the one-line errors where vLLM cannot run."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from src.model.causal_lm import CausalLM, load_causal_lm
from src.model.tiny import byte_level_tokenizer
from src.rollout.engine_settings import EngineSettings
from src.rollout.hf import HFSampler
from src.rollout.rollout import Rollout
from src.rollout.sampling_settings import SamplingSettings
from src.rollout.vllm import (
    VLLMSampler,
    adapter_enabled,
    base_model_path,
    build_rollout,
    completion_rows,
    engine_max_model_len,
    import_vllm,
    loaded_in_4bit,
    lora_rank_slot,
    sampled_logps,
)
from src.utils.config import build, plain
from src.utils.errors import ConfigError
from tests.helpers.models import lora_lm as fresh_lora_lm

PROMPTS = ["What is 1 + 2?\nAnswer:", "Hi", "The quick brown fox"]
GROUP = 4
LENGTH = 12
LIKELY_TOKEN = 97  # the EOS row becomes a multiple of this token's row (see `ending_sometimes`)


def vllm_unavailable() -> str | None:
    """Why the vLLM backend cannot run here, or None."""
    if not torch.cuda.is_available():
        return "no CUDA device"
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed"
    return None


def ending_sometimes(lm: CausalLM, scale: float) -> None:
    """Make the untrained model end some completions early: its EOS logit becomes `scale` times
    another token's, large where that logit is positive, so both ended and clipped rows occur."""
    eos = lm.eos_token_ids[0]
    with torch.no_grad():
        weight = lm.network.get_output_embeddings().weight
        weight[eos] = scale * weight[LIKELY_TOKEN]


def check_layout(lm: CausalLM, rollout: Rollout, group: int, limit: int) -> None:
    """Shapes, rows per prompt, masks ending at the first EOS, padding, clipping and texts."""
    rows = len(PROMPTS) * group
    encoded = lm.encode_prompts(PROMPTS)
    assert torch.equal(rollout.prompt_ids, encoded["input_ids"].repeat_interleave(group, dim=0))
    assert torch.equal(rollout.prompt_mask, encoded["attention_mask"].repeat_interleave(group, 0))
    assert rollout.completion_ids.shape == rollout.completion_mask.shape
    assert rollout.completion_ids.shape[0] == rows == len(rollout.completions)
    assert rollout.is_clipped.shape == (rows,)
    lengths = rollout.lengths.tolist()
    assert rollout.completion_ids.shape[1] == max(lengths) <= limit  # no padding-only column
    eos, pad = set(lm.eos_token_ids), lm.tokenizer.pad_token_id
    for ids, mask, clipped, text, length in zip(
        rollout.completion_ids,
        rollout.completion_mask,
        rollout.is_clipped,
        rollout.completions,
        lengths,
        strict=True,
    ):
        assert length >= 1 and mask[:length].eq(1).all() and mask[length:].eq(0).all()
        assert ids[length:].eq(pad).all()
        ends = [i for i, token in enumerate(ids[:length].tolist()) if token in eos]
        if clipped:
            assert not ends and length == limit
        else:
            assert ends == [length - 1]
        assert text == lm.tokenizer.decode(ids, skip_special_tokens=True)


def check_logps(lm: CausalLM, rollout: Rollout, temperature: float) -> None:
    """The sampler's log-probs of its tokens, where it reports them, are the network's."""
    if rollout.sampler_logps is None:
        return
    mask = rollout.completion_mask.bool()
    assert rollout.sampler_logps.shape == rollout.completion_ids.shape
    assert rollout.sampler_logps[~mask].eq(0).all()
    with torch.no_grad():
        ours, _ = lm.log_probs(rollout, temperature)
    gap = (ours.float() - rollout.sampler_logps.to(ours.device)).abs()[mask]
    assert gap.max().item() < 2e-2, f"sampler log-probs differ from the network's by {gap.max()}"


@pytest.mark.parametrize("backend", ["hf", pytest.param("vllm", marks=pytest.mark.gpu)])
def test_sampler_contract(backend, make_cfg):
    if backend == "vllm" and (reason := vllm_unavailable()):
        pytest.skip(f"vLLM needs a CUDA GPU and `pip install .[gpu]`: {reason}")
    overrides = [f"rollout={backend}", f"algo.max_completion_length={LENGTH}"]
    if backend == "vllm":
        overrides.append("rollout.enforce_eager=true")  # no CUDA graph capture: a fast start
    cfg = make_cfg(*overrides)
    lm = build(cfg.model)
    lm.network.eval()
    sampler = build(cfg.rollout)
    assert sampler.max_completion_length == LENGTH
    ending_sometimes(lm, scale=20.0)

    torch.manual_seed(0)
    rollout = sampler.sample(lm, PROMPTS, group_size=GROUP)
    check_layout(lm, rollout, GROUP, LENGTH)
    check_logps(lm, rollout, sampler.temperature)

    # New weights, announced by `sync`: the next rollout comes from them.
    ending_sometimes(lm, scale=5.0)
    sampler.sync(lm)
    greedy = sampler.sample(lm, PROMPTS, group_size=GROUP, greedy=True)
    check_layout(lm, greedy, GROUP, LENGTH)
    check_logps(lm, greedy, 1.0)  # greedy decoding reports unscaled log-probs
    for start in range(0, len(greedy.completions), GROUP):
        group = greedy.completion_ids[start : start + GROUP]
        assert (group == group[0]).all()
        assert len(set(greedy.completions[start : start + GROUP])) == 1


def test_the_vllm_config_composes_on_any_machine(make_cfg):
    rollout = make_cfg("rollout=vllm", "algo.max_completion_length=7").rollout
    assert rollout._target_ == "src.rollout.vllm.VLLMSampler"
    assert rollout.max_completion_length == 7 and rollout.dtype == "float32"
    assert rollout.gpu_memory_utilization == 0.3 and rollout.max_model_len is None
    sampling = SamplingSettings.more_keys()
    keys = {k: v for k, v in plain(rollout).items() if k != "_target_" and k not in sampling}
    engine = EngineSettings.of(keys, "rollout=vllm")  # every other key is an engine setting
    assert engine.dtype == "float32" and engine.enable_prefix_caching


def test_the_engine_settings_name_a_bad_key():
    with pytest.raises(
        ConfigError, match=r"rollout.gpu_memory_utilization must be a number in \(0"
    ):
        EngineSettings.of({"gpu_memory_utilization": 1.5}, "rollout=vllm")
    with pytest.raises(ConfigError, match="rollout.max_lora_rank must be a whole number >= 1"):
        EngineSettings.of({"max_lora_rank": 0}, "rollout=vllm")
    with pytest.raises(ConfigError, match="rollout.gpu_memory is not a setting of rollout=vllm"):
        EngineSettings.of({"gpu_memory": 0.5}, "rollout=vllm")


# ---- the pure parts, on CPU ----


def test_rollout_from_token_lists_cuts_at_the_first_eos_and_pads():
    tokenizer = byte_level_tokenizer()
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    a, b = tokenizer.convert_tokens_to_ids(["a", "b"])
    prompt_ids = torch.tensor([[pad, a], [pad, a], [b, b], [b, b]])
    prompt_mask = (prompt_ids != pad).long()
    tokens = [[a, eos], [b, b, b, b], [eos], [a, eos, b]]  # the last goes on past its EOS
    logps = [[-0.5, -0.25], [-1.0, -1.0, -1.0, -1.0], [-2.0], [-0.5, -0.75, -3.0]]
    rollout = build_rollout(prompt_ids, prompt_mask, tokens, logps, [eos], tokenizer)
    assert rollout.completion_ids.tolist() == [
        [a, eos, pad, pad],
        [b, b, b, b],
        [eos, pad, pad, pad],
        [a, eos, pad, pad],
    ]
    assert rollout.completion_mask.tolist() == [
        [1, 1, 0, 0],
        [1, 1, 1, 1],
        [1, 0, 0, 0],
        [1, 1, 0, 0],
    ]
    assert rollout.is_clipped.tolist() == [False, True, False, False]
    assert rollout.completions == ["a", "bbbb", "", "a"]
    assert rollout.sampler_logps.tolist() == [
        [-0.5, -0.25, 0, 0],
        [-1.0, -1.0, -1.0, -1.0],
        [-2.0, 0, 0, 0],
        [-0.5, -0.75, 0, 0],
    ]
    assert rollout.prompt_ids is prompt_ids
    assert (
        build_rollout(prompt_ids, prompt_mask, tokens, None, [eos], tokenizer).sampler_logps is None
    )


def test_a_pad_id_equal_to_eos_does_not_end_a_clipped_row():
    tokenizer = byte_level_tokenizer()
    tokenizer.pad_token = tokenizer.eos_token  # what load_causal_lm does without a pad token
    eos = tokenizer.eos_token_id
    a = tokenizer.convert_tokens_to_ids("a")
    prompt = torch.tensor([[a], [a]])
    rollout = build_rollout(
        prompt, torch.ones_like(prompt), [[a, a, eos], [a]], None, [eos], tokenizer
    )
    assert rollout.completion_mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert rollout.is_clipped.tolist() == [False, True]


def step(token: int, logprob: float) -> dict[int, SimpleNamespace]:
    return {token: SimpleNamespace(logprob=logprob)}


def test_sampled_logps_are_read_per_token_and_rows_follow_completion_index():
    assert sampled_logps([5, 7], [step(5, -0.1), {**step(7, -0.2), **step(3, -9.0)}]) == [
        -0.1,
        -0.2,
    ]
    with pytest.raises(RuntimeError, match="logprobs=0"):
        sampled_logps([5], None)
    outputs = [
        SimpleNamespace(
            outputs=[
                SimpleNamespace(index=1, token_ids=(2,), logprobs=[step(2, -2.0)]),
                SimpleNamespace(index=0, token_ids=(1,), logprobs=[step(1, -1.0)]),
            ]
        ),
        SimpleNamespace(
            outputs=[SimpleNamespace(index=0, token_ids=[3], logprobs=[step(3, -3.0)])]
        ),
    ]
    assert completion_rows(outputs) == ([[1], [2], [3]], [[-1.0], [-2.0], [-3.0]])
    assert completion_rows(outputs[1:], copies=2) == ([[3], [3]], [[-3.0], [-3.0]])


def test_engine_sizes():
    assert [lora_rank_slot(r) for r in (1, 8, 9, 16, 64, 300, 512)] == [8, 8, 16, 16, 64, 320, 512]
    with pytest.raises(ConfigError, match="model.lora.r"):
        lora_rank_slot(1024)
    assert engine_max_model_len(None, 512, 64) == 576
    assert engine_max_model_len(1000, 512, 64) == 1000
    assert engine_max_model_len(None, None, 64) is None


def test_4bit_base_is_recognised():
    plain = SimpleNamespace(config=SimpleNamespace())
    assert not loaded_in_4bit(plain)
    assert loaded_in_4bit(SimpleNamespace(is_loaded_in_4bit=True, config=SimpleNamespace()))
    as_dict = SimpleNamespace(config=SimpleNamespace(quantization_config={"load_in_4bit": True}))
    assert loaded_in_4bit(as_dict)
    as_object = SimpleNamespace(quantization_config=SimpleNamespace(load_in_4bit=True))
    assert loaded_in_4bit(SimpleNamespace(config=as_object))


@pytest.fixture
def lora_lm(tiny_lm):
    return fresh_lora_lm(tiny_lm, target_modules=["q_proj"], std=0)


def test_base_path_and_adapter_state(tiny_lm, lora_lm):
    assert base_model_path(tiny_lm.network) == base_model_path(lora_lm.network)
    assert (Path(base_model_path(lora_lm.network)) / "config.json").is_file()
    assert not adapter_enabled(tiny_lm.network)
    assert adapter_enabled(lora_lm.network)
    with lora_lm.adapter_disabled():
        assert not adapter_enabled(lora_lm.network)
    assert adapter_enabled(lora_lm.network)


# ---- the clear errors ----


def test_no_cuda_device_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="rollout=vllm.*rollout=hf") as error:
        VLLMSampler(max_completion_length=8)
    assert "\n" not in str(error.value) and "CUDA GPU" in str(error.value)


def test_missing_vllm_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm fails, find_spec finds none
    for attempt in (lambda: VLLMSampler(max_completion_length=8), import_vllm):
        with pytest.raises(ConfigError, match=r"pip install \.\[gpu\]") as error:
            attempt()
        message = str(error.value)
        assert "\n" not in message and "CUDA GPU" in message and "rollout=vllm" in message


# ---- the engine driven through a stand-in vllm module ----


class FakeLLM:
    """Records how it was made and asked; completion k of a prompt ends with EOS when k is
    even and runs to the length limit otherwise; listed in reverse index order."""

    eos = 0

    def __init__(self, **settings):
        self.settings = settings
        self.requests: list[tuple] = []
        self.loaded: list[list[str]] = []
        self.prefix_resets = 0
        self.model = SimpleNamespace(load_weights=lambda w: self.loaded.append([n for n, _ in w]))

    def generate(self, prompts, params, use_tqdm, lora_request):
        self.requests.append((prompts, params, lora_request))
        outputs = []
        for prompt in prompts:
            first = prompt["prompt_token_ids"][-1]
            completions = []
            for k in reversed(range(params.n)):
                ids = [first, FakeLLM.eos] if k % 2 == 0 else [first + k] * params.max_tokens
                steps = [step(t, -0.1 * (i + 1)) for i, t in enumerate(ids)]
                completions.append(SimpleNamespace(index=k, token_ids=ids, logprobs=steps))
            outputs.append(SimpleNamespace(outputs=completions))
        return outputs

    def apply_model(self, func):
        return [func(self.model)]

    def reset_prefix_cache(self):
        self.prefix_resets += 1


@pytest.fixture
def fake_vllm(monkeypatch, tiny_lm):
    """A stand-in `vllm` (LLM, SamplingParams, lora.request.LoRARequest) and a CUDA device."""
    FakeLLM.eos = tiny_lm.eos_token_ids[0]
    made: list[FakeLLM] = []
    root = types.ModuleType("vllm")
    root.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    root.LLM = lambda **settings: made.append(FakeLLM(**settings)) or made[-1]
    root.SamplingParams = lambda **params: SimpleNamespace(**params)
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = lambda **fields: SimpleNamespace(**fields)
    monkeypatch.setitem(sys.modules, "vllm", root)
    monkeypatch.setitem(sys.modules, "vllm.lora", types.ModuleType("vllm.lora"))
    monkeypatch.setitem(sys.modules, "vllm.lora.request", request)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    return made


def test_full_weights_reach_the_engine_once_per_change(fake_vllm, tiny_lm, caplog):
    tiny_lm = load_causal_lm(tiny_lm.network.name_or_path)  # a private copy: its weights change
    sampler = VLLMSampler(max_completion_length=3, top_k=0, dtype="float32", seed=7)
    rollout = sampler.sample(tiny_lm, PROMPTS[:2], group_size=2)
    (llm,) = fake_vllm
    assert llm.settings["model"] == tiny_lm.network.name_or_path
    assert llm.settings["logprobs_mode"] == "processed_logprobs"
    assert (llm.settings["dtype"], llm.settings["seed"]) == ("float32", 7)
    assert "enable_lora" not in llm.settings and "quantization" not in llm.settings
    prompts, params, lora = llm.requests[0]
    encoded = tiny_lm.tokenizer(PROMPTS[:2], add_special_tokens=False)["input_ids"]
    assert [p["prompt_token_ids"] for p in prompts] == encoded
    assert (params.n, params.temperature, params.top_k, params.logprobs) == (2, 1.0, -1, 0)
    assert params.stop_token_ids == tiny_lm.eos_token_ids and lora is None
    assert llm.loaded == [list(tiny_lm.network.state_dict())] and llm.prefix_resets == 1
    eos, pad = FakeLLM.eos, tiny_lm.tokenizer.pad_token_id
    last = encoded[0][-1]
    assert rollout.completion_ids[:2].tolist() == [[last, eos, pad], [last + 1] * 3]
    assert rollout.is_clipped.tolist() == [False, True, False, True]
    assert rollout.sampler_logps[0].tolist() == pytest.approx([-0.1, -0.2, 0.0])

    sampler.sample(tiny_lm, PROMPTS[:2], group_size=2)
    assert len(llm.loaded) == 1  # unchanged weights are not pushed again
    sampler.sync(tiny_lm)
    sampler.sync(tiny_lm)
    greedy = sampler.sample(tiny_lm, PROMPTS[:2], group_size=3, greedy=True)
    assert len(llm.loaded) == 2  # two optimizer steps, one push
    _, params, _ = llm.requests[-1]
    assert (params.n, params.temperature) == (1, 0.0)
    assert (
        greedy.completion_ids.shape[0] == 6
        and greedy.completions[3:] == [greedy.completions[3]] * 3
    )

    with torch.no_grad():  # an update nobody announced with `sync`
        tiny_lm.network.get_output_embeddings().weight[0, 0] += 1.0
    sampler.sample(tiny_lm, PROMPTS[:1], group_size=1)
    assert len(llm.loaded) == 3 and "without Sampler.sync()" in caplog.text


def test_lora_adapters_reach_the_engine_under_fresh_ids(fake_vllm, lora_lm):
    sampler = VLLMSampler(max_completion_length=2)
    sampler.sample(lora_lm, PROMPTS[:1], group_size=2)
    (llm,) = fake_vllm
    assert llm.settings["enable_lora"] and llm.settings["max_loras"] == 1
    assert llm.settings["max_lora_rank"] == 8  # rank 4, in vLLM's smallest slot
    first = llm.requests[-1][2]
    assert first.lora_int_id == 1 and (Path(first.lora_path) / "adapter_config.json").is_file()
    assert not llm.loaded  # the base weights are never overwritten

    sampler.sync(lora_lm)
    sampler.sample(lora_lm, PROMPTS[:1], group_size=2)
    second = llm.requests[-1][2]
    assert second.lora_int_id == 2 and second.lora_name != first.lora_name
    assert (Path(second.lora_path) / "adapter_config.json").is_file()
    assert not Path(first.lora_path).exists()  # the retired adapter's folder is gone

    with lora_lm.adapter_disabled():  # the frozen base: no adapter in the request
        sampler.sample(lora_lm, PROMPTS[:1], group_size=1, greedy=True)
    assert llm.requests[-1][2] is None
    with pytest.raises(ConfigError, match="one base model"):
        sampler.sample(CausalLM(lora_lm.network.get_base_model(), lora_lm.tokenizer), ["Hi"], 1)


def test_a_sampler_built_outside_a_config_is_held_to_the_declared_bounds():
    for keys, words in (
        ({"max_completion_length": 0}, "rollout.max_completion_length must be a whole number >= 1"),
        ({"max_completion_length": 3, "min_completion_length": 4}, "must be at most"),
        (
            {"max_completion_length": 3, "temperature": 0},
            "rollout.temperature must be a number > 0",
        ),
    ):
        with pytest.raises(ConfigError, match=words):
            HFSampler(**keys)
