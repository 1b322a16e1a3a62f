"""Bad settings fail before any data or model loads, with a message naming the key."""

from __future__ import annotations

import pytest
from hydra.errors import MissingConfigException

from src.runs import settings
from src.runs.settings import check_algo_settings, check_hardware, check_settings
from src.train import train
from src.utils.compose import compose_train_config
from src.utils.config import plain
from src.utils.errors import ConfigError, MissingFileError
from tests.helpers.mlflow_runs import nothing_recorded

CASES = [
    ("algo.group_size=1", "algo.group_size must be a whole number >= 2"),
    ("algo.kl_beta=-0.1", "algo.kl_beta must be a number >= 0"),
    ("algo.epsilon_low=1.5", r"algo.epsilon_low must be a number in \[0, 1\)"),
    ("algo.loss_type=ppo", "algo.loss_type must be one of"),
    ("algo.scale_rewards=max", "algo.scale_rewards must be one of"),
    ("algo.advantage_estimator=gae", "algo.advantage_estimator must be one of"),
    ("algo.importance_sampling_level=group", "algo.importance_sampling_level must be one of"),
    (
        "algo.warn_tied_rollouts=-1",
        r"algo.warn_tied_rollouts must be a whole number >= 0 \(rollouts; 0 never",
    ),
    (
        "algo.advantage_estimator=rloo",
        "algo.scale_rewards=group scales the grpo estimator's advantages only; .* "
        "set algo.scale_rewards=none",
    ),
    ("algo.num_iterations=0", "algo.num_iterations must be a whole number >= 1"),
    ("algo.sampling_rounds=0", "algo.sampling_rounds must be a whole number >= 1"),
    ("algo.group_size=abc", "algo.group_size must be a whole number >= 2 .*, got 'abc'"),
    (
        "algo.max_completion_length=0",
        "algo.max_completion_length must be a whole number >= 1 or null",
    ),
    ("algo.kl_beta=true", "algo.kl_beta must be a number >= 0, got True"),
    ("algo.loss_type=null", "algo.loss_type must be one of grpo, .*, got None"),
    (
        "+algo.clip_range=0.3",
        "algo.clip_range is not a setting of the algorithm; its settings are advantage_estimator, ",
    ),
    (
        "algo=dapo trainer.devices=2 trainer.strategy=ddp",
        "algo.sampling_rounds=3 .* runs on one training process",
    ),
    ("algo.policy_loss=ppo", "algo.policy_loss must be one of"),
    ("algo.multi_objective_aggregation=mean", "algo.multi_objective_aggregation must be one of"),
    (
        "algo=rloo algo.multi_objective_aggregation=normalize_then_sum",
        "it replaces algo.advantage_estimator=rloo",
    ),
    ("algo.policy_loss=cispo", "caps the importance weight at algo.epsilon_high itself"),
    ("algo=cispo algo.delta=2.0", "algo.policy_loss=cispo does not use it"),
    ("algo.delta=0.9", "algo.delta must be a number > 1 or null"),
    ("algo.top_entropy_quantile=1.5", r"algo.top_entropy_quantile must be a number in \[0, 1\]"),
    ("algo.mask_truncated_completions=maybe", "algo.mask_truncated_completions must be true or"),
    (
        "algo=cispo algo.policy_loss=sapo algo.sapo_temperature_neg=0",
        "algo.sapo_temperature_neg must be a number > 0",
    ),
    ("model.dtype=float8", "model.dtype must be one of"),
    ("algo.sampler_is_cap=0.5", "algo.sampler_is_cap must be a number >= 1 or null"),
    (
        "algo.max_tokens_per_pass=0",
        r"algo.max_tokens_per_pass must be a whole number >= 1 or null \(tokens per pass",
    ),
    (
        "algo.max_tokens_per_pass=1.5",
        "algo.max_tokens_per_pass must be a whole number >= 1 or null",
    ),
    (
        "hardware=[cpu,4bit]",
        r"4-bit weights cannot be trained; add the adapter with hardware=\[4bit,lora\]",
    ),
    ("trainer.max_steps=0", "trainer.max_steps must be a whole number >= 1 or null, got 0"),
    ("trainer.max_steps=null", "trainer.max_steps is null and epochs is not set"),
    ("epochs=0", "epochs must be a number > 0 or null, got 0"),
    (
        "algo.num_iterations=3",
        "every_n_train_steps=100 is not a multiple of algo.num_iterations=3: .* every 300 steps",
    ),
    (
        "ckpt_path=/no/such/last.ckpt",
        "ckpt_path=/no/such/last.ckpt: no checkpoint file or run folder there",
    ),
    ("trainer.strategy=fsdp", "trainer.strategy=fsdp .* Lightning runs FSDP only on CUDA devices"),
    (
        "rollout=vllm",
        "rollout=vllm needs a CUDA device but .*; use rollout=hf",
    ),
    (
        "trainer.devices=2 trainer.strategy=ddp data.batch_size=3",
        r"data.batch_size=3 .* does not split over 2 processes \(trainer.devices x trainer.num_nodes\)",
    ),
    ("ckpt_path=last", "ckpt_path=last: no run folder in .* holds checkpoints/last.ckpt"),
    (
        "ckpt_path=${paths.root_dir}/conf",
        "the folder holds no checkpoints/last.ckpt; the run stopped",
    ),
]


@pytest.mark.parametrize(("override", "message"), CASES, ids=[case[0] for case in CASES])
def test_bad_settings_fail_before_any_model_loads(
    make_cfg, models_dir, tmp_path, override, message
):
    cfg = make_cfg(*override.split(), f"paths.models_dir={tmp_path / 'models'}")
    with pytest.raises(ConfigError, match=message):
        train(cfg)
    assert not (tmp_path / "models").exists()  # the tiny model was never built nor loaded
    assert nothing_recorded(cfg)  # no run was opened


@pytest.mark.parametrize(
    ("override", "group"),
    [("task=no_such_task", "task"), ("reward=no_such_reward", "reward"), ("model=gpt5", "model")],
)
def test_unknown_names_list_the_choices(override, group):
    with pytest.raises(MissingConfigException, match=f"Could not find '{group}/") as raised:
        compose_train_config([override])
    assert "Available options" in str(raised.value)


def test_a_high_kl_weight_is_warned_about(make_cfg, caplog):
    check_settings(make_cfg("algo.kl_beta=0.8"))
    assert "algo.kl_beta=0.8 is high" in caplog.text
    caplog.clear()
    check_settings(make_cfg("algo.kl_beta=0.1"))
    assert "is high" not in caplog.text


def test_a_missing_sft_adapter_is_named_before_anything_loads(make_cfg, tmp_path):
    cfg = make_cfg("task=math", "preset=from_sft", f"sft_adapter={tmp_path / 'nowhere'}")
    with pytest.raises(
        MissingFileError, match="model.adapter_path: no adapter folder at .*sft_adapter=DIR"
    ):
        check_settings(cfg)


def test_a_key_the_config_leaves_to_the_command_line_is_asked_for(make_cfg, tmp_path):
    """`???` in a config (here the searcher's rewriter adapter, left open as a user's
    experiment file would) is refused by name: Hydra alone would build the run without it."""
    with pytest.raises(
        ConfigError, match=r"^rewriter_adapter has no value .*rewriter_adapter=VALUE"
    ):
        check_settings(make_cfg("task=medqa_searcher", "rewriter_adapter=???", tiny=False))
    adapter = tmp_path / "rewriter"
    adapter.mkdir()
    cfg = make_cfg(
        "experiment=searcher_gemma_from_rewriter", f"rewriter_adapter={adapter}", tiny=False
    )
    check_settings(cfg)
    assert cfg.model.adapter_path == str(adapter)
    assert cfg.policy.query_template == "{question} {query}"


# Device settings, checked against a stated number of visible CUDA devices, so every case runs
# on a machine without a GPU: (overrides, CUDA devices, message).
BAD_HARDWARE = [
    (
        ["hardware=[gpu]"],
        0,
        r"trainer.accelerator=gpu but no CUDA device is visible .*hardware=cpu",
    ),
    (["hardware=[multi_gpu,lora]"], 0, "no CUDA device is visible .*; use hardware=cpu"),
    (
        ["hardware=[fsdp,4bit,lora]"],
        4,
        r"fsdp\) with model.load_in_4bit=true: .*use hardware=\[multi_gpu,4bit,lora\] or drop 4bit",
    ),
    (
        ["hardware=[fsdp,lora]", "trainer.accelerator=cpu"],
        4,
        "trainer.strategy=fsdp .* trainer.accelerator=cpu: Lightning runs FSDP only on CUDA devices",
    ),
    (["hardware=[cpu]", "trainer.strategy=fsdp", "trainer.devices=2"], 0, "only on CUDA devices"),
    (
        ["rollout=vllm"],
        0,
        "rollout=vllm needs a CUDA device but no CUDA device is visible; use rollout=hf",
    ),
    (
        ["hardware=[cpu]", "rollout=vllm"],
        1,
        "rollout=vllm needs a CUDA device but trainer.accelerator=cpu; use rollout=hf",
    ),
    (
        ["hardware=[multi_gpu,lora]"],
        1,
        r"trainer.strategy=ddp \(hardware=multi_gpu or fsdp\) .* only 1 CUDA device was found",
    ),
    (["hardware=[fsdp,lora]"], 1, "trainer.strategy=fsdp .* only 1 CUDA device was found"),
    (
        ["hardware=[multi_gpu,lora]", "trainer.devices=8"],
        4,
        r"trainer.devices=8 but 4 CUDA device\(s\) found; set trainer.devices to at most 4",
    ),
    (["hardware=[gpu]", "trainer.devices=2"], 1, "trainer.devices=2 but 1 CUDA device"),
    (
        ["hardware=[multi_gpu,lora]", "data.batch_size=6"],
        4,
        r"data.batch_size=6 .* does not split over 4 processes .*; make it a multiple of 4",
    ),
    (
        ["hardware=[multi_gpu,lora]", "trainer.devices=4", "trainer.num_nodes=2"],
        4,
        "data.batch_size=2 .* does not split over 8 processes",
    ),
    (
        ["hardware=[multi_gpu,lora]", "rollout=vllm", "data.batch_size=8"],
        4,
        r"rollout=vllm runs one engine beside one training process, but trainer.devices=-1",
    ),
]


def with_algo(cfg):
    """The config and its algorithm's settings, as `check_settings` hands them on."""
    return cfg, check_algo_settings(plain(cfg.algo))


@pytest.mark.parametrize(
    ("overrides", "cuda_devices", "message"),
    BAD_HARDWARE,
    ids=[f"{' '.join(case[0])} on {case[1]} GPUs" for case in BAD_HARDWARE],
)
def test_device_settings_this_machine_cannot_run_are_refused(
    make_cfg, overrides, cuda_devices, message
):
    with pytest.raises(ConfigError, match=message) as raised:
        check_hardware(*with_algo(make_cfg(*overrides)), cuda_devices=cuda_devices)
    assert "\n" not in str(raised.value)


GOOD_HARDWARE = [
    (["hardware=[cpu]"], 0),
    (["hardware=[cpu]", "trainer.devices=2", "trainer.strategy=ddp"], 0),  # gloo: how we test
    (["hardware=[cpu,lora]", "trainer.devices=2", "trainer.strategy=ddp_spawn"], 2),
    (["hardware=[gpu,4bit,lora,grad_ckpt]"], 1),
    (["hardware=[gpu]", "rollout=vllm"], 1),
    (["hardware=[multi_gpu,lora]", "data.batch_size=8"], 4),
    (["hardware=[multi_gpu,4bit,lora,grad_ckpt]", "data.batch_size=8"], 8),
    (["hardware=[multi_gpu,lora]", "trainer.devices=2", "data.batch_size=6"], 4),
    (["hardware=[multi_gpu,lora]", "trainer.num_nodes=2"], 1),  # one GPU on each of two nodes
    (["hardware=[fsdp,lora,grad_ckpt]"], 2),
    (["hardware=[fsdp]", "data.batch_size=16"], 8),
]


@pytest.mark.parametrize(
    ("overrides", "cuda_devices"),
    GOOD_HARDWARE,
    ids=[f"{' '.join(case[0])} on {case[1]} GPUs" for case in GOOD_HARDWARE],
)
def test_device_settings_that_can_run_pass(make_cfg, overrides, cuda_devices):
    check_hardware(*with_algo(make_cfg(*overrides)), cuda_devices=cuda_devices)


def test_the_settings_check_counts_the_visible_cuda_devices(make_cfg, monkeypatch):
    cfg = make_cfg("hardware=[multi_gpu,lora]", "data.batch_size=4")
    monkeypatch.setattr(settings, "visible_cuda_devices", lambda: 0)
    with pytest.raises(ConfigError, match="no CUDA device is visible"):
        check_settings(cfg)
    monkeypatch.setattr(settings, "visible_cuda_devices", lambda: 1)
    with pytest.raises(ConfigError, match="only 1 CUDA device was found"):
        check_settings(cfg)
    monkeypatch.setattr(settings, "visible_cuda_devices", lambda: 4)
    check_settings(cfg)


def test_the_hardware_presets_combine(make_cfg):
    ddp = make_cfg("hardware=[multi_gpu,4bit,lora,grad_ckpt]")
    assert ddp.trainer.accelerator == "gpu" and ddp.trainer.devices == -1
    assert ddp.trainer.strategy._target_.endswith("DDPStrategy")
    assert ddp.trainer.strategy.find_unused_parameters is False
    assert ddp.model.load_in_4bit and ddp.model.lora.r == 16 and ddp.model.gradient_checkpointing
    assert ddp.trainer.precision == "bf16-true" and ddp.model.dtype == "bfloat16"
    fsdp = make_cfg("hardware=[fsdp,lora]")
    assert fsdp.trainer.strategy._target_.endswith("FSDPStrategy")
    assert fsdp.trainer.strategy.sharding_strategy == "FULL_SHARD"
    assert fsdp.trainer.strategy.activation_checkpointing_policy is None
    assert fsdp.trainer.precision == "bf16-mixed" and fsdp.model.dtype == "float32"
    assert not fsdp.model.gradient_checkpointing and fsdp.model.lora.r == 16
    cpu = make_cfg("hardware=[cpu]", "trainer.devices=2", "trainer.strategy=ddp")
    assert (cpu.trainer.accelerator, cpu.trainer.devices, cpu.trainer.strategy) == ("cpu", 2, "ddp")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("retrieval.k=0", r"retrieval.k \(read as policy.query_k\) must be a whole number >= 1"),
        ("policy.query_k=0", r"^policy.query_k must be a whole number >= 1, got 0$"),
    ],
)
def test_a_refused_value_names_the_key_the_user_set(make_cfg, override, message):
    """`policy.query_k` reads `${retrieval.k}`: a wrong `retrieval.k` is named as typed."""
    with pytest.raises(ConfigError, match=message):
        check_settings(make_cfg("task=medqa_rewriter", override))


@pytest.mark.parametrize(
    ("overrides", "warned"),
    [
        (
            ["algo=cispo", "algo.epsilon_low=0.9"],
            "algo.epsilon_low=0.9 is not read by algo.policy_loss=cispo (it reads epsilon_high)",
        ),
        (
            ["algo.policy_loss=sapo", "algo.epsilon_high=0.3"],
            "algo.epsilon_high=0.3 is not read by algo.policy_loss=sapo "
            "(it reads sapo_temperature_pos, sapo_temperature_neg)",
        ),
        (["algo.sapo_temperature_neg=2.0"], "algo.sapo_temperature_neg=2.0 is not read by"),
    ],
)
def test_a_knob_the_chosen_loss_does_not_read_is_warned_about(make_cfg, caplog, overrides, warned):
    check_settings(make_cfg(*overrides))
    assert warned in caplog.text
    assert len([r for r in caplog.records if "is not read by" in r.getMessage()]) == 1


@pytest.mark.parametrize("overrides", [["algo=cispo"], ["algo=dapo"], ["algo.epsilon_low=0.3"]])
def test_the_knobs_a_loss_reads_are_not_warned_about(make_cfg, caplog, overrides):
    check_settings(make_cfg(*overrides))
    assert "is not read by" not in caplog.text
