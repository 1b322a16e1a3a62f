"""Bad settings fail before any data or model loads, with a message naming the key."""

from __future__ import annotations

import pytest
from hydra.errors import MissingConfigException

from src.runs.settings import check_settings
from src.train import train
from src.utils.compose import compose_train_config
from src.utils.errors import ConfigError, MissingFileError

CASES = [
    ("algo.group_size=1", "algo.group_size must be >= 2"),
    ("algo.kl_beta=-0.1", "algo.kl_beta must be >= 0"),
    ("algo.epsilon_low=1.5", r"algo.epsilon_low must be in \[0, 1\)"),
    ("algo.loss_type=ppo", "algo.loss_type must be one of"),
    ("algo.scale_rewards=max", "algo.scale_rewards must be one of"),
    ("algo.num_iterations=0", "algo.num_iterations must be >= 1"),
    ("model.dtype=float8", "model.dtype must be one of"),
    (
        "hardware=[cpu,4bit]",
        r"4-bit weights cannot be trained; add the adapter with hardware=\[4bit,lora\]",
    ),
    ("trainer.max_steps=0", "trainer.max_steps must be >= 1"),
    ("trainer.max_steps=null", "trainer.max_steps is null and epochs is not set"),
    ("epochs=0", "epochs must be > 0"),
    (
        "algo.num_iterations=3",
        "every_n_train_steps=100 is not a multiple of algo.num_iterations=3: .* every 300 steps",
    ),
    (
        "ckpt_path=/no/such/last.ckpt",
        "ckpt_path=/no/such/last.ckpt: no checkpoint file or run folder there",
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
    cfg = make_cfg(override, f"paths.models_dir={tmp_path / 'models'}")
    with pytest.raises(ConfigError, match=message):
        train(cfg)
    assert not (tmp_path / "models").exists()  # the tiny model was never built nor loaded
    assert not (tmp_path / "outputs" / "mlflow.db").exists()  # no run was opened


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
