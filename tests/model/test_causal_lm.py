"""Loading models and scoring completions: the numbers GRPO's ratios are built from."""

import copy
import warnings

import pytest
import torch

from src.model.causal_lm import SelectedLogSoftmax, load_causal_lm
from src.model.tiny import build_tiny_llama, byte_level_tokenizer
from src.rollout.hf import HFSampler


def test_byte_level_tokenizer_round_trips_any_text():
    tokenizer = byte_level_tokenizer()
    text = "What is 37 + 48?\nAnswer: 85 — ok é"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text
    assert len(tokenizer) == 259 and tokenizer.eos_token_id == 258


def test_tiny_model_is_built_once_and_loaded_back(tmp_path):
    folder = tmp_path / "tiny"
    lm = load_causal_lm(str(folder), builder=build_tiny_llama)
    assert (folder / "config.json").exists() and (folder / "tokenizer.json").exists()
    assert 1.0e6 < sum(p.numel() for p in lm.parameters()) < 1.2e6
    assert lm.network.training  # loaded for training
    stamp = (folder / "config.json").stat().st_mtime_ns
    load_causal_lm(str(folder), builder=build_tiny_llama)
    assert (folder / "config.json").stat().st_mtime_ns == stamp


def test_missing_model_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model folder at .*no_such_model"):
        load_causal_lm(str(tmp_path / "no_such_model"))
    with pytest.raises(OSError, match="no-such-org/no-such-model"):
        load_causal_lm("no-such-org/no-such-model")  # a hub name: offline, the hub cannot help


def test_log_probs_do_not_depend_on_left_padding(tiny_lm):
    assert tiny_lm.keeps_few_logits  # only completion positions go through the vocabulary head
    sampler = HFSampler(max_completion_length=4)
    prompts = ["What is 12 + 30?\nAnswer:", "Hi"]
    torch.manual_seed(0)
    batched = sampler.sample(tiny_lm, prompts, group_size=1)
    together, _ = tiny_lm.log_probs(batched)
    for row in range(2):
        alone = tiny_lm.encode_prompts([prompts[row]])
        ids = torch.cat([alone["input_ids"], batched.completion_ids[row : row + 1]], dim=1)
        mask = torch.cat([alone["attention_mask"], batched.completion_mask[row : row + 1]], dim=1)
        single, _ = tiny_lm.token_log_probs(ids, mask, batched.completion_ids.size(1))
        counted = batched.completion_mask[row].bool()
        assert torch.allclose(together[row][counted], single[0][counted], atol=1e-5)


def test_log_probs_match_the_sampling_distribution(tiny_lm):
    # Greedy tokens are the argmax of the model's distribution: each must be the likeliest.
    sampler = HFSampler(max_completion_length=3)
    rollout = sampler.sample(tiny_lm, ["What is 5 + 5?\nAnswer:"], group_size=1, greedy=True)
    ids = torch.cat([rollout.prompt_ids, rollout.completion_ids], dim=1)
    mask = torch.cat([rollout.prompt_mask, rollout.completion_mask], dim=1)
    position_ids = (mask.cumsum(1) - 1).clamp(min=0)
    logits = tiny_lm.network(input_ids=ids, attention_mask=mask, position_ids=position_ids).logits
    best = torch.log_softmax(logits[0, -4:-1], -1).max(-1).values
    logps, entropy = tiny_lm.log_probs(rollout, with_entropy=True)
    assert torch.allclose(logps[0], best, atol=1e-5)
    assert (entropy > 0).all() and (entropy <= torch.log(torch.tensor(259.0)) + 1e-4).all()


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_log_probs_and_entropy_at_a_temperature(tiny_lm, temperature):
    """Both come from the logits divided by the temperature, as the samples were drawn."""
    torch.manual_seed(0)
    sampler = HFSampler(max_completion_length=5, temperature=temperature)
    rollout = sampler.sample(tiny_lm, ["What is 5 + 5?\nAnswer:", "Hi"], group_size=2)
    ids = torch.cat([rollout.prompt_ids, rollout.completion_ids], dim=1)
    mask = torch.cat([rollout.prompt_mask, rollout.completion_mask], dim=1)
    position_ids = (mask.cumsum(1) - 1).clamp(min=0)
    width = rollout.completion_ids.size(1)
    with torch.no_grad():
        logits = tiny_lm.network(
            input_ids=ids, attention_mask=mask, position_ids=position_ids
        ).logits
    scaled = logits[:, -width - 1 : -1].double() / temperature
    log_softmax = torch.log_softmax(scaled, dim=-1)
    expected_logps = log_softmax.gather(-1, rollout.completion_ids.unsqueeze(-1)).squeeze(-1)
    expected_entropy = -(log_softmax.exp() * log_softmax).sum(-1)

    logps, entropy = tiny_lm.log_probs(rollout, temperature, with_entropy=True)
    counted = rollout.completion_mask.bool()
    assert counted.sum() >= 8
    assert torch.allclose(logps[counted].double(), expected_logps[counted], atol=1e-5)
    assert torch.allclose(entropy[counted].double(), expected_entropy[counted], atol=1e-5)
    if temperature != 1.0:  # the temperature changes both, so the check above can fail
        plain, plain_entropy = tiny_lm.log_probs(rollout, 1.0, with_entropy=True)
        assert (plain - logps)[counted].abs().max() > 1e-2
        assert (plain_entropy - entropy)[counted].abs().max() > 1e-2


def test_lora_reference_is_the_base_model(tmp_path, tiny_lm):
    lm = load_causal_lm(
        tiny_lm.network.name_or_path, lora={"r": 4, "lora_alpha": 8, "target_modules": "all-linear"}
    )
    assert lm.uses_lora
    trainable = sum(p.numel() for p in lm.parameters() if p.requires_grad)
    assert 0 < trainable < 0.2 * sum(p.numel() for p in lm.parameters())
    rollout = HFSampler(max_completion_length=3).sample(lm, ["Hi"], group_size=2)
    with torch.no_grad():
        for param in lm.network.parameters():
            if param.requires_grad:
                param.add_(0.5)
        adapted, _ = lm.log_probs(rollout)
        with lm.adapter_disabled():
            reference, _ = lm.log_probs(rollout)
        base, _ = tiny_lm.log_probs(rollout)
    assert torch.allclose(reference, base, atol=1e-5)
    assert not torch.allclose(adapted, base, atol=1e-3)
    adapter = lm.save(tmp_path / "adapter", merge=False)
    assert (adapter / "adapter_config.json").is_file() and not (adapter / "config.json").exists()
    continued = load_causal_lm(tiny_lm.network.name_or_path, adapter_path=str(adapter))
    assert continued.uses_lora and any(p.requires_grad for p in continued.parameters())
    assert torch.allclose(continued.log_probs(rollout)[0], adapted, atol=1e-5)
    with pytest.raises(FileNotFoundError, match="model.adapter_path: no LoRA adapter"):
        load_causal_lm(tiny_lm.network.name_or_path, adapter_path=str(tmp_path))
    merged = lm.save(tmp_path / "merged")
    reloaded = load_causal_lm(str(merged))
    assert not reloaded.uses_lora
    assert torch.allclose(reloaded.log_probs(rollout)[0], adapted, atol=1e-4)


@pytest.mark.slow  # bitsandbytes' 4-bit layers on the CPU: 15-20 s
def test_four_bit_loading_with_lora(tiny_lm):
    pytest.importorskip("bitsandbytes")
    lm = load_causal_lm(
        tiny_lm.network.name_or_path,
        load_in_4bit=True,
        lora={"r": 4, "lora_alpha": 8, "target_modules": "all-linear"},
    )
    assert (
        getattr(lm.network, "is_loaded_in_4bit", False)
        or lm.network.base_model.model.is_loaded_in_4bit
    )
    # Sampling runs in eval mode; the training forward after it must still be differentiable.
    rollout = HFSampler(max_completion_length=3).sample(lm, ["Hi"], group_size=2, greedy=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logps, _ = lm.log_probs(rollout)
        logps[rollout.completion_mask.bool()].sum().backward()
    assert not [w for w in caught if "autograd kernel was not registered" in str(w.message)]
    grads = [p.grad for p in lm.parameters() if p.requires_grad]
    assert grads and all(g is not None for g in grads)


def ungrouped(lm, rollout, temperature=1.0):
    """Log-probs and entropies with every row read whole (no prompt shared)."""
    ids = torch.cat([rollout.prompt_ids, rollout.completion_ids], dim=1)
    mask = torch.cat([rollout.prompt_mask, rollout.completion_mask], dim=1)
    width = rollout.completion_ids.size(1)
    return lm.token_log_probs(ids, mask, width, temperature, with_entropy=True)


# prompts, and the rows they make at G 3: each group's first row, each row's distinct prompt
# (equal groups: the prompt cache repeated row by row; a prompt asked twice, 6 rows of one
# prompt: its rows selected by index)
GROUPINGS = {
    "equal groups": (["What is 12 + 30?\nAnswer:", "Hi"], [0, 3], [0, 0, 0, 1, 1, 1]),
    "unequal groups": (["What is 12 + 30?\nAnswer:", "Hi", "Hi"], [0, 3], [0] * 3 + [1] * 6),
}


@pytest.mark.parametrize("grouping", GROUPINGS)
@pytest.mark.parametrize("lora", [False, True])
def test_a_group_reads_its_prompt_once_with_the_same_scores_and_gradients(tiny_lm, lora, grouping):
    from src.model.causal_lm import CausalLM, prompt_groups

    prompts, first_rows, owners = GROUPINGS[grouping]

    lm = tiny_lm
    if lora:
        from peft import LoraConfig, get_peft_model

        network = get_peft_model(
            copy.deepcopy(tiny_lm.network),
            LoraConfig(
                r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False
            ),
        )
        lm = CausalLM(network, tiny_lm.tokenizer)
    torch.manual_seed(1)
    rollout = HFSampler(max_completion_length=6).sample(lm, prompts, group_size=3)
    first, owner = prompt_groups(rollout.prompt_ids, rollout.prompt_mask)
    assert first.tolist() == first_rows and owner.tolist() == owners
    counted = rollout.completion_mask.bool()
    scores = []
    for grouped in (True, False):
        lm.zero_grad()
        logps, entropy = (
            lm.log_probs(rollout, 0.7, True) if grouped else ungrouped(lm, rollout, 0.7)
        )
        (logps * rollout.completion_mask).sum().backward()
        grads = [p.grad.clone() for p in lm.trainable_parameters()]
        scores.append((logps.detach()[counted], entropy[counted], grads))
    (grouped_logps, grouped_entropy, grouped_grads), (logps, entropy, grads) = scores
    assert torch.allclose(grouped_logps, logps, atol=1e-5)
    assert torch.allclose(grouped_entropy, entropy, atol=1e-5)
    for grouped_grad, grad in zip(grouped_grads, grads, strict=True):
        assert torch.allclose(grouped_grad, grad, atol=1e-5, rtol=1e-4)
    lm.zero_grad()


@pytest.mark.parametrize("width", [1, 5])
def test_the_last_completion_token_is_not_read(tiny_lm, width):
    """It predicts nothing that is scored, so the log-prob forwards stop one token before it
    (but a one-token completion is still read after its prompt), with the network's scores."""
    torch.manual_seed(3)
    sampler = HFSampler(max_completion_length=width, min_completion_length=width)
    rollout = sampler.sample(tiny_lm, ["Hi", "Hi", "What is 5 + 5?"], group_size=2)
    prompt = rollout.prompt_ids.size(1)
    tiny_lm.log_probs(rollout)  # the fast paths' probes run once, before the count
    read: list[int] = []
    embeddings = tiny_lm.network.get_input_embeddings()
    hook = embeddings.register_forward_hook(lambda module, args, out: read.append(args[0].size(1)))
    try:
        grouped, _ = tiny_lm.log_probs(rollout)  # each prompt once, then the completions
        assert read == [prompt, max(1, width - 1)]
        read.clear()
        whole, _ = ungrouped(tiny_lm, rollout)
        assert read == [prompt + width - 1]
    finally:
        hook.remove()
    ids = torch.cat([rollout.prompt_ids, rollout.completion_ids], dim=1)
    mask = torch.cat([rollout.prompt_mask, rollout.completion_mask], dim=1)
    with torch.no_grad():
        logits = tiny_lm.network(
            input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(1) - 1).clamp(min=0)
        ).logits[:, -width - 1 : -1]
    expected = torch.log_softmax(logits, -1).gather(-1, rollout.completion_ids.unsqueeze(-1))
    counted = rollout.completion_mask.bool()
    for logps in (grouped, whole):
        assert torch.allclose(logps[counted], expected.squeeze(-1)[counted], atol=1e-5)


def test_rows_without_a_shared_prompt_are_read_whole(tiny_lm):
    from src.model.causal_lm import prompt_groups

    ids = torch.tensor([[1, 2], [1, 3], [1, 2]])
    assert prompt_groups(ids, torch.ones_like(ids)) is None  # equal rows that are not neighbours
    assert prompt_groups(ids[:1], torch.ones_like(ids[:1])) is None


def test_checkpointed_layers_read_every_row_whole(tiny_lm):
    from src.model.causal_lm import CausalLM, checkpointed

    assert not checkpointed(tiny_lm.network)
    network = copy.deepcopy(tiny_lm.network)
    network.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    lm = CausalLM(network, tiny_lm.tokenizer)
    assert checkpointed(network)  # a recomputed layer must not write a shared cache twice
    torch.manual_seed(2)
    rollout = HFSampler(max_completion_length=4).sample(lm, ["Hi", "Hi"], group_size=2)
    logps, _ = lm.log_probs(rollout)
    logps.sum().backward()  # the whole rows go through the checkpointed layers
    assert torch.allclose(logps, ungrouped(lm, rollout)[0], atol=1e-6)


def test_selected_log_softmax_has_autograds_values_and_gradients():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11, dtype=torch.float64, requires_grad=True)
    logits.data[0, 0, 4] = -float("inf")  # a masked entry gets gradient 0, as in autograd's
    targets = torch.randint(0, 11, (3, 5))
    targets[0, 0] = 2
    logps, log_norm = SelectedLogSoftmax.apply(logits, targets)
    expected = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(logps, expected) and not log_norm.requires_grad
    weights = torch.randn(3, 5, dtype=torch.float64)
    (ours,) = torch.autograd.grad((logps * weights).sum(), logits)
    (theirs,) = torch.autograd.grad((expected * weights).sum(), logits)
    assert torch.allclose(ours, theirs) and ours[0, 0, 4] == 0
    finite = torch.randn(2, 3, 7, dtype=torch.float64, requires_grad=True)
    picks = torch.randint(0, 7, (2, 3))
    assert torch.autograd.gradcheck(lambda x: SelectedLogSoftmax.apply(x, picks)[0], (finite,))


class RecordedCache:
    """What `copy_to_rows` asks of a transformers cache."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def batch_repeat_interleave(self, repeats: int) -> None:
        self.calls.append(("repeat", repeats))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self.calls.append(("select", indices.tolist()))


@pytest.mark.parametrize(
    ("owner", "prompts", "call"),
    [
        ([0, 0, 1, 1, 2, 2], 3, ("repeat", 2)),  # a rollout's groups
        ([0, 1, 2], 3, ("repeat", 1)),
        ([0, 0, 0, 1, 1], 2, ("select", [0, 0, 0, 1, 1])),  # unequal groups
        ([1, 1, 0, 0], 2, ("select", [1, 1, 0, 0])),  # not in prompt order
    ],
)
def test_rows_take_their_prompts_cache_by_repeats_where_groups_are_equal(owner, prompts, call):
    from src.model.fast.shared_prompt import copy_to_rows

    cache = RecordedCache()
    copy_to_rows(cache, torch.tensor(owner), prompts)
    assert cache.calls == [call]


def test_an_adapter_of_another_base_is_one_line_naming_both(tmp_path, tiny_lm):
    """A LoRA adapter saved on the tiny Llama, loaded onto a narrower one: peft's size mismatch
    becomes one line that names the adapter's base and this run's model."""
    from src.utils.errors import ConfigError

    lora = {"r": 4, "lora_alpha": 8, "target_modules": "all-linear"}
    adapter = load_causal_lm(tiny_lm.network.name_or_path, lora=lora).save(
        tmp_path / "adapter", merge=False
    )
    narrow = tmp_path / "narrow"
    build_tiny_llama(narrow, hidden_size=64, num_layers=1, num_heads=2, intermediate_size=128)
    with pytest.raises(ConfigError) as caught:
        load_causal_lm(str(narrow), adapter_path=str(adapter))
    message = str(caught.value)
    assert message.startswith(f"model.adapter_path: the adapter in {adapter} was trained on ")
    assert "tiny_llama_h128_l4" in message and str(narrow) in message and "\n" not in message
