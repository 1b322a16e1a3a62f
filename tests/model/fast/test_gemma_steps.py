"""The fused decoding steps on the Gemma 3 family (query and key norms, four norms per layer
with the (1 + w) scale, sliding-window layers beside global ones with their own rotary base,
the embedding scale, the tanh GELU, `query_pre_attn_scalar`): the modules' logits to float
rounding, prompts longer than the window, LoRA, and a planted wrong step caught by the probe."""

import logging

import pytest
import torch

from src.model.fast import llama_steps
from src.model.fast.decoding import decoding_steps
from src.model.fast.llama_steps import LlamaSteps
from src.model.fast.probe import forget_verdicts, standing
from src.model.fast.static_steps import StaticSteps
from tests.helpers.small_gemma import GEMMA, small_gemma
from tests.helpers.small_llama import module_logits, prompts, stepped_logits, with_lora

VOCAB = GEMMA["vocab_size"]
SERVED = {
    "gemma3": small_gemma,
    "mha": lambda: small_gemma(num_key_value_heads=4),
    "lora": lambda: with_lora(small_gemma()),
    "all-global": lambda: small_gemma(layer_types=["full_attention"] * 3),
}


def long_prompts() -> tuple[torch.Tensor, torch.Tensor]:
    """Two prompts of 9 positions, more than twice the window of 4, the second left-padded."""
    torch.manual_seed(5)
    ids = torch.randint(1, VOCAB, (2, 9))
    mask = torch.ones_like(ids)
    ids[1, :3], mask[1, :3] = 0, 0
    return ids, mask


@pytest.mark.parametrize("steps_class", [LlamaSteps, StaticSteps], ids=["fused", "static"])
@pytest.mark.parametrize("build", SERVED.values(), ids=SERVED.keys())
@pytest.mark.parametrize("given", [prompts, long_prompts], ids=["short", "past-the-window"])
@pytest.mark.parametrize(
    ("grouped_from", "read_whole_from"),
    [(1, 0.5), (10_000, 0.5), (10_000, 0.0)],
    ids=["prompt-once-per-group", "row-by-row", "row-by-row-room-whole"],
)
def test_steps_give_the_modules_log_probs(
    steps_class, build, given, grouped_from, read_whole_from, monkeypatch
):
    monkeypatch.setattr(llama_steps, "GROUPED_FROM", grouped_from)  # both attention routes
    # and both reads of the room: its whole width, the unwritten columns closed, and first
    # the written columns only, then the whole width once they are half of it
    monkeypatch.setattr(llama_steps, "READ_WHOLE_FROM", read_whole_from)
    network = build()
    ids, mask = given(VOCAB) if given is prompts else given()
    tokens = torch.randint(1, VOCAB, (6, 6))  # 3 completions per prompt, past the window too
    steps = steps_class.of(network, 6)
    ours = stepped_logits(steps, ids, mask, 3, tokens)
    theirs = module_logits(network, ids, mask, 3, tokens)
    assert ours.shape == (6, 7, VOCAB)
    assert (ours - theirs).abs().max() < 1e-4


@pytest.mark.parametrize(
    "build",
    [
        lambda: small_gemma().train(),
        lambda: small_gemma(final_logit_softcapping=30.0),
        lambda: small_gemma(attn_logit_softcapping=50.0),
        lambda: small_gemma(hidden_activation="gelu"),
        lambda: small_gemma(use_bidirectional_attention=True),
    ],
    ids=["training", "final-softcap", "attention-softcap", "exact-gelu", "bidirectional"],
)
def test_what_the_steps_do_not_serve_goes_through_the_modules(build):
    assert LlamaSteps.of(build(), rows=4) is None


def test_bfloat16_gemma_is_served_by_the_static_steps_within_the_probes_tolerance():
    network = small_gemma().to(torch.bfloat16)
    ids, mask = long_prompts()
    tokens = torch.randint(1, VOCAB, (6, 4))
    ours = stepped_logits(StaticSteps.of(network, 6), ids, mask, 3, tokens)
    theirs = module_logits(network, ids, mask, 3, tokens)
    assert (ours - theirs).abs().max() < 5e-2


@pytest.mark.parametrize(
    "part", ["qk_norm", "post_attention", "post_mlp", "window", "rotary", "embed_scale"]
)
def test_a_planted_wrong_gemma_step_is_caught_by_the_probe(part, monkeypatch, caplog):
    """Each part where Gemma differs from Llama, left out of the step, is caught: the probe
    turns the fused steps away and decoding runs on the modules."""
    forget_verdicts()
    parts = llama_steps._gemma_parts

    def wrong(base, rows, pack):
        found = parts(base, rows, pack)
        if part == "embed_scale":
            found.embed_scale = None
        for layer in found.layers:
            if part == "window":
                layer.window = None
            elif part == "rotary":
                layer.rotary = 0
            elif part != "embed_scale":
                setattr(layer, part, None)
        return found

    monkeypatch.setattr(llama_steps, "_gemma_parts", wrong)
    network = small_gemma()
    with caplog.at_level(logging.WARNING), decoding_steps(network, rows=4, packed=False) as steps:
        assert not isinstance(steps, LlamaSteps)
    assert standing("fused_steps", network).proven is False
    assert "fused_steps disagrees" in caplog.text
    forget_verdicts()


def test_the_right_gemma_step_is_proven_and_used():
    forget_verdicts()
    network = small_gemma()
    with decoding_steps(network, rows=4, packed=False) as steps:
        assert isinstance(steps, LlamaSteps)
    assert standing("fused_steps", network).proven
    forget_verdicts()


def test_the_shared_prompt_scores_gemma_past_the_window_as_the_modules_do():
    """Log-probs with each group's prompt read once (`shared_prompt`, through the cache of
    sliding and global layers) equal one forward over whole rows, prompt and completion both
    longer than the window, under LoRA."""
    from src.model.causal_lm import CausalLM
    from src.model.positions import position_ids
    from src.rollout.rollout import Rollout
    from tests.helpers.small_gemma import bos_tokenizer

    tokenizer = bos_tokenizer()
    network = small_gemma(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    lm = CausalLM(with_lora(network), tokenizer)
    torch.manual_seed(0)
    group, prompt_length, length = 3, 10, 7
    prompt = torch.randint(5, len(tokenizer), (2, prompt_length))
    prompt_mask = torch.ones_like(prompt)
    prompt_mask[1, :3] = 0
    prompt, prompt_mask = (t.repeat_interleave(group, dim=0) for t in (prompt, prompt_mask))
    completion = torch.randint(5, len(tokenizer), (2 * group, length))
    rollout = Rollout(
        prompt_ids=prompt,
        prompt_mask=prompt_mask,
        completion_ids=completion,
        completion_mask=torch.ones_like(completion),
        is_clipped=torch.zeros(2 * group, dtype=torch.bool),
        completions=[""] * (2 * group),
    )
    lm.network.eval()
    with torch.no_grad():
        shared, _ = lm.log_probs(rollout)
        ids = torch.cat([prompt, completion], dim=1)
        mask = torch.cat([prompt_mask, torch.ones_like(completion)], dim=1)
        logits = lm.network(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask))
    plain = torch.log_softmax(logits.logits[:, prompt_length - 1 : -1].float(), dim=-1)
    plain = plain.gather(-1, completion.unsqueeze(-1)).squeeze(-1)
    assert standing("shared_prompt", lm.network).proven
    assert (shared - plain).abs().max() < 1e-4
