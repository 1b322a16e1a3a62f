"""Every user-facing key of every task, set to a value of the wrong type, out of range, empty or
null: the settings check accepts it or refuses it with one `ConfigError` line naming the key;
no other exception. In process, so the whole walk stays fast."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from scripts.try_every_key import TASKS, leaves, raw_value, task_config, trials, verdict
from src.runs.schema import SETTINGS, all_settings
from src.runs.settings import check_settings
from src.utils.compose import compose_train_config
from src.utils.errors import UserError

SHARED = "arithmetic"  # the default task: its walk tries every key it has


def own_keys(cfg, shared) -> list[str]:
    """The keys of `cfg` the default task's walk did not try: those it lacks, and those it
    holds at another value (a key shared at the same value, under the same declaration, is
    tried there once rather than in every task)."""
    raw, base = (
        OmegaConf.to_container(cfg, resolve=False),
        OmegaConf.to_container(shared, resolve=False),
    )
    base_keys = set(leaves(shared))
    return [
        key
        for key in leaves(cfg)
        if key not in base_keys or raw_value(raw, key) != raw_value(base, key)
    ]


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_every_key_is_accepted_or_refused_in_one_line(task, tmp_path):
    cfg = task_config(task, tmp_path)
    check_settings(cfg)  # the task as shipped passes
    keys = None if task == SHARED else own_keys(cfg, task_config(SHARED, tmp_path))
    found = trials(cfg, keys)  # raises on anything but a one-line refusal
    raw = OmegaConf.to_container(cfg, resolve=False)
    tables = all_settings(cfg)  # with the task's own (task=char_diffusion's)
    for key in found:  # a typed key refuses a text where a number belongs, or the reverse
        if key in tables:
            setting = tables[key]
            wrong = {"str": 1.5, "mark": 1.5, "template": "{unclosed"}.get(setting.kind, "abc")
            wrong = "abc" if setting.choices else wrong
            assert verdict(raw, key, wrong) == "refused", key
    assert sum(counts["refused"] for counts in found.values()) > 0 or found == {}


def test_a_refusal_names_the_key_the_value_and_what_is_allowed(tmp_path):
    cfg = compose_train_config(
        [f"paths.output_root={tmp_path}", f"paths.run_dir={tmp_path / 'run'}"]
    )
    raw = OmegaConf.to_container(cfg, resolve=False)
    cases = [  # key, value, what the one line says
        ("data.batch_size", "abc", "data.batch_size must be a whole number >= 1, got 'abc'"),
        ("trainer.max_steps", 1.5, "trainer.max_steps must be a whole number >= 1 or null, got 1.5"),
        ("rollout.top_p", 0, "rollout.top_p must be a number in (0, 1], got 0"),
        ("model.dtype", "float64", "model.dtype must be one of float32, bfloat16, float16"),
        ("eval.split", "test", "eval.split must be one of validation, train, unseen, got 'test'"),
        ("data.max_val_rows", 0, "data.max_val_rows must be a whole number >= 1 or null, got 0"),
        ("dry_run", "yes", "dry_run must be true or false, got 'yes'"),
        ("trainer.devices", 0, "trainer.devices must be a whole number >= 1 or one of -1, auto"),
        ("trainer.devices", "abc", "or device indices (a list, or text such as 0,1), got 'abc'"),
        ("trainer.devices", [0, -1], "trainer.devices must be"),
        ("trainer.strategy", "dpp", "trainer.strategy must be auto, a Lightning strategy name"),
        ("trainer.strategy", {"sharding": 1}, "or a strategy config with _target_"),
        ("paths.output_root", "", "paths.output_root must be a text, got ''"),
        ("policy.template", "Q: {question", "policy.template must be a text whose every { closes a {field}"),
        ("rollout.stop_strings", "END", "rollout.stop_strings must be a list of non-empty texts"),
    ]  # fmt: skip
    for key, value, message in cases:
        cfg = OmegaConf.create(raw)
        OmegaConf.update(cfg, key, value, merge=False)
        with pytest.raises(UserError) as caught:
            check_settings(cfg)
        assert message in str(caught.value)
    for key, value in (
        ("data.max_val_rows", None),
        ("rollout.top_p", 1),
        ("seed", 7),
        ("trainer.devices", -1),
        ("trainer.devices", "auto"),
        ("trainer.devices", 2),
        ("trainer.devices", [0, 1]),
        ("trainer.devices", "0,1"),
        ("trainer.strategy", "ddp_spawn"),
        ("trainer.strategy", {"_target_": "lightning.pytorch.strategies.DDPStrategy"}),
        ("policy.template", "{{literal}} {question}"),
        ("rollout.stop_strings", ["\\n", "END"]),
        ("rollout.stop_strings", None),
    ):
        assert verdict(raw, key, value) == "accepted"


def test_a_recipes_keys_are_declared_beside_its_code_not_in_the_central_table(make_cfg):
    cfg = make_cfg("task=char_diffusion")
    assert not any(key.startswith("rounds.") or "mask_char" in key for key in SETTINGS)
    assert all_settings(cfg)["rounds.replay_share"].allowed() == "a number in [0, 1)"


def test_a_settings_table_that_cannot_be_imported_is_one_line(make_cfg):
    cfg = make_cfg("settings_tables=[src.nowhere.SETTINGS]")
    with pytest.raises(UserError, match=r"settings_tables: cannot import src.nowhere.SETTINGS"):
        check_settings(cfg)
