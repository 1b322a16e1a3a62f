"""The masked character generator and judge: log-probs at masked positions, sampling all of
them at once, and folders that reload the same model and refuse the wrong kind."""

from __future__ import annotations

import json

import pytest
import torch

from src.model.saved import saved_model_settings
from src.recipes.char_diffusion.encoder import MASK, PAD, CharTokenizer
from src.recipes.char_diffusion.judge_network import CharJudge, load_char_judge
from src.recipes.char_diffusion.network import load_char_diffusion, masked_positions
from src.recipes.char_diffusion.sampler import CharDiffusionSampler, nucleus_sample
from src.utils.errors import ConfigError, MissingFileError

SMALL = {"max_length": 24, "hidden_size": 32, "num_layers": 1, "num_heads": 2}
PROMPTS = ["the c█t s█t on ██e mat", "a d██ ran ███ay fast!!"]


def small_generator(**settings):
    return load_char_diffusion(None, **{**SMALL, "intermediate_size": 64, **settings})


def test_the_tokenizer_reads_printable_characters_and_the_mask():
    tokenizer = CharTokenizer()
    ids = tokenizer.encode("a█é")
    assert ids[1] == MASK and tokenizer.decode(ids) == "a█?"


def test_masked_positions_are_each_rows_masked_columns_left_to_right():
    ids = torch.tensor([[5, MASK, 6, MASK], [MASK, MASK, MASK, 7], [PAD, 5, MASK, 6]])
    index, valid = masked_positions(ids)
    assert index.tolist() == [[1, 3, 0], [0, 1, 2], [2, 0, 0]]
    assert valid.tolist() == [[True, True, False], [True, True, True], [True, False, False]]


def test_log_probs_are_those_of_the_drawn_characters_at_the_masked_positions():
    torch.manual_seed(0)
    network = small_generator().eval()
    rollout = CharDiffusionSampler(max_completion_length=24, temperature=0.8).sample(
        network, PROMPTS, group_size=3
    )
    assert [len(text) for text in rollout.completions] == [4] * 3 + [5] * 3
    assert rollout.completion_mask.sum(1).tolist() == [4] * 3 + [5] * 3
    logps, entropy = network.log_probs(rollout, temperature=0.8, with_entropy=True)
    logits, _ = network.masked_logits(rollout.prompt_ids)
    expected = torch.log_softmax(logits / 0.8, -1).gather(
        -1, rollout.completion_ids.clamp(min=3).unsqueeze(-1)
    )[..., 0]
    mask = rollout.completion_mask.bool()
    assert torch.allclose(logps[mask], expected[mask], atol=1e-5)
    assert (logps[~mask] == 0).all() and (entropy[mask] > 0).all()


def test_greedy_fills_take_the_likeliest_character_and_never_a_special_id():
    torch.manual_seed(0)
    network = small_generator().eval()
    sampler = CharDiffusionSampler(max_completion_length=24)
    greedy = sampler.sample(network, PROMPTS, group_size=1, greedy=True)
    logits, valid = network.masked_logits(greedy.prompt_ids)
    assert torch.equal(greedy.completion_ids[valid], logits.argmax(-1)[valid])
    sampled = sampler.sample(network, PROMPTS, group_size=8)
    assert (sampled.completion_ids[sampled.completion_mask.bool()] >= 3).all()


def test_nucleus_sampling_keeps_only_the_top_mass():
    logits = torch.log(torch.tensor([[0.7, 0.2, 0.1]])).expand(500, 3)
    draws = nucleus_sample(logits, top_p=0.6)
    assert (draws == 0).all()
    assert set(nucleus_sample(logits, top_p=1.0).tolist()) == {0, 1, 2}


def test_a_saved_generator_reloads_the_same_and_a_judge_folder_is_refused(tmp_path):
    network = small_generator().eval()
    network.save(tmp_path / "generator")
    again = load_char_diffusion(str(tmp_path / "generator"), dropout=0.0).eval()
    ids = network.encode_prompts(PROMPTS)["input_ids"]
    assert torch.equal(network.logits(ids), again.logits(ids))
    CharJudge(**SMALL).save(tmp_path / "judge")
    with pytest.raises(ConfigError, match="generator_checkpoint=.*'char_judge'"):
        load_char_diffusion(str(tmp_path / "judge"))
    with pytest.raises(ConfigError, match="judge_checkpoint=.*'char_diffusion'"):
        load_char_judge(tmp_path / "generator")
    with pytest.raises(MissingFileError, match="char_model.json"):
        load_char_judge(tmp_path)


def test_lora_and_4bit_do_not_apply():
    with pytest.raises(ConfigError, match="LoRA and 4-bit"):
        small_generator(lora={"r": 8})
    with pytest.raises(ConfigError, match="has no adapters: run/adapter cannot load"):
        small_generator(adapter_path="run/adapter")
    assert small_generator(lora=None, adapter_path=None) is not None  # the base head's keys


def test_a_saved_generator_is_loaded_as_the_checkpoint_of_its_config(tmp_path):
    network = small_generator().eval()
    network.save(tmp_path / "generator")
    settings = saved_model_settings(tmp_path / "generator")
    assert settings == {"checkpoint": str(tmp_path / "generator")}
    again = load_char_diffusion(**{**SMALL, **settings}, dropout=0.0).eval()
    ids = network.encode_prompts(PROMPTS)["input_ids"]
    assert torch.equal(network.logits(ids), again.logits(ids))


def test_the_judge_scores_probabilities_and_reloads_the_same(tmp_path):
    torch.manual_seed(0)
    judge = CharJudge(**SMALL)
    scores = judge.score(["a real sentence", "x#y%z", ""])
    assert all(0 < score < 1 for score in scores)
    judge.save(tmp_path / "judge")
    assert load_char_judge(tmp_path / "judge").score(["a real sentence"]) == pytest.approx(
        scores[:1]
    )


def test_a_judge_that_sees_the_mask_reads_the_filled_positions_and_needs_them(tmp_path):
    torch.manual_seed(0)
    judge = CharJudge(**SMALL, sees_mask=True)
    text = "the cat sat on the mat"
    one, other = "the c█t sat on the mat", "the cat sat on ██e mat"
    ids, marks = judge.encode([text, text], [one, other])
    assert marks[0].nonzero().flatten().tolist() == [5]
    assert marks[1].nonzero().flatten().tolist() == [15, 16]
    first, second = judge.score([text, text], masked=[one, other])
    assert first != pytest.approx(second)  # the same window, marked differently
    with pytest.raises(ValueError, match="prompt_field=masked"):
        judge.score([text])
    judge.save(tmp_path / "judge")
    again = load_char_judge(tmp_path / "judge")
    assert again.sees_mask
    assert again.score([text], masked=[one]) == pytest.approx([first])


def test_a_judge_saved_before_masks_existed_loads_as_one_that_does_not_see_them(tmp_path):
    judge = CharJudge(**SMALL)
    judge.save(tmp_path / "judge")
    settings = tmp_path / "judge" / "char_model.json"
    saved = json.loads(settings.read_text())
    saved["settings"].pop("sees_mask")
    settings.write_text(json.dumps(saved))
    again = load_char_judge(tmp_path / "judge")
    assert not again.sees_mask
    ids, marks = again.encode(["abc"], ["a█c"])
    assert not marks.any()  # a judge that does not see the mask ignores it
