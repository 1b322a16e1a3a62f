"""Every user-facing key of every task, set to a value of the wrong type, out of range, empty or
null: the settings check accepts it or refuses it with one `ConfigError` line naming the key;
no other exception. In process, so the whole walk stays fast."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from scripts.try_every_key import TASKS, task_config, trials, verdict
from src.runs.schema import SETTINGS
from src.runs.settings import check_settings
from src.utils.compose import compose_train_config
from src.utils.errors import UserError


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_every_key_is_accepted_or_refused_in_one_line(task, tmp_path):
    cfg = task_config(task, tmp_path)
    check_settings(cfg)  # the task as shipped passes
    found = trials(cfg)  # raises on anything but a one-line refusal
    raw = OmegaConf.to_container(cfg, resolve=False)
    for key in found:  # a typed key refuses a text where a number belongs, or the reverse
        if key in SETTINGS:
            setting = SETTINGS[key]
            wrong = "abc" if setting.kind != "str" or setting.choices else 1.5
            assert verdict(raw, key, wrong) == "refused", key
    assert sum(counts["refused"] for counts in found.values()) > 0


def test_a_refusal_names_the_key_the_value_and_what_is_allowed(tmp_path):
    cfg = compose_train_config(
        [f"paths.output_root={tmp_path}", f"paths.run_dir={tmp_path / 'run'}"]
    )
    raw = OmegaConf.to_container(cfg, resolve=False)
    cases = {
        ("data.batch_size", "abc"): "data.batch_size must be a whole number >= 1, got 'abc'",
        (
            "trainer.max_steps",
            1.5,
        ): "trainer.max_steps must be a whole number >= 1 or null, got 1.5",
        ("rollout.top_p", 0): "rollout.top_p must be a number in (0, 1], got 0",
        ("model.dtype", "float64"): "model.dtype must be one of float32, bfloat16, float16",
        ("eval.split", "test"): "eval.split must be one of validation, train, got 'test'",
        ("data.max_val_rows", 0): "data.max_val_rows must be a whole number >= 1 or null, got 0",
        ("dry_run", "yes"): "dry_run must be true or false, got 'yes'",
    }
    for (key, value), message in cases.items():
        cfg = OmegaConf.create(raw)
        OmegaConf.update(cfg, key, value, merge=False)
        with pytest.raises(UserError) as caught:
            check_settings(cfg)
        assert message in str(caught.value)
    for key, value in (("data.max_val_rows", None), ("rollout.top_p", 1), ("seed", 7)):
        assert verdict(raw, key, value) == "accepted"
