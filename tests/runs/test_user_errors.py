"""A user's mistake on `python -m src.train` prints one line and exits with status 1; a bug keeps
its traceback, and `HYDRA_FULL_ERROR=1` shows every traceback. The commands run as a user types
them, in this process (`tests.helpers.command`), one of them in a fresh interpreter; each fails
before any model trains."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import InstantiationException, OverrideParseException

from src.policy.generator import Generator
from src.runs.cli import closest_keys, user_message
from src.utils.errors import ConfigError
from src.utils.resolvers import PROJECT_ROOT
from tests.helpers.command import command


class BrokenReward:
    """A reward function with a bug: building it raises `TypeError` (see the last test)."""

    def __init__(self) -> None:
        raise TypeError("BrokenReward fails on purpose")


def train_command(
    tmp_path: Path, *overrides: str, full_error: bool = False
) -> subprocess.CompletedProcess:
    """`python -m src.train overrides...` in this process, writing under tmp_path, as CI runs
    it: `CI` set, `HYDRA_FULL_ERROR` only when asked (`real_processes` below: fresh
    interpreters)."""
    args = [*overrides, f"paths.output_root={tmp_path}"]
    environment = {"CI": "true", "HYDRA_FULL_ERROR": "1" if full_error else None}
    return command("src.train", *args, environment=environment)


def error_line(result: subprocess.CompletedProcess) -> str:
    """The one `error:` line of a command that failed on a user error, with no traceback."""
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "Error executing job" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    return line


def test_malformed_data_file_names_file_and_line(tmp_path):
    path = tmp_path / "BROKEN.jsonl"
    path.write_text('{"question": "What is 1 + 1?", "answer": "2"}\n{"question": \n')
    line = error_line(train_command(tmp_path, f"data.path={path}"))
    assert line == f"error: {path}:2: malformed JSON line (Expecting value)"


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("algo.group_size=1", "error: algo.group_size must be a whole number >= 2"),
        ("algo.kl_bta=0.1", "did you mean algo.kl_beta?"),
        ("model=gpt5", "Could not find 'model/gpt5'; available options in 'model': "),
        (
            "algo.group_size=abc",
            "error: algo.group_size must be a whole number >= 2 (advantages are group-relative), got 'abc'",
        ),
        (
            "algo.max_completion_length=0",
            "error: algo.max_completion_length must be a whole number >= 1 or null",
        ),
        ("data.batch_size=abc", "error: data.batch_size must be a whole number >= 1, got 'abc'"),
        ("trainer.max_steps=1.5", "error: trainer.max_steps must be a whole number >= 1"),
        ("rollout.temperature=hot", "error: rollout.temperature must be a number > 0, got 'hot'"),
        (
            "+rollout.enforce_eager=true",
            "error: rollout.enforce_eager is not read by HFSampler, which rollout builds: remove it",
        ),
        (
            "task=medqa_rewriter eval.oracle=true",
            "error: eval.oracle=true marks rows whose searches read the gold passage, which only "
            "policy=searcher does; this run's role is Rewriter: remove eval.oracle",
        ),
        (
            "task=medqa_searcher data.oracle_share=50%",
            "error: data.oracle_share must be a number in [0, 1], got '50%'",
        ),
        (
            "task=medqa_searcher +model@policy.reader=tiny",
            "error: policy.reader is not read by Searcher, which policy builds: remove it",
        ),
        (
            "task=medqa_rewriter +model@policy.reader=smollm2_135m policy.reader.lora=null "
            "policy.reader.name_or_path=/no/such",
            "error: policy.reader.name_or_path: no model folder at /no/such",
        ),
        (
            "task=medqa_searcher_smollm2 +rewriter_adapter=/tmp",
            "error: +rewriter_adapter adds a key that no config of this run has, so nothing reads "
            "it: remove it (a task that takes rewriter_adapter sets it without the +)",
        ),
        ("+policy.foo=1", "error: policy.foo is not read by Generator, which policy builds"),
        ("+trainer.foo=1", "error: trainer.foo is not read by Trainer, which trainer builds"),
        (
            "++reward.functions.accuracy.weight=2",
            "error: reward.functions.accuracy.weight is not read by AnswerAccuracy, which "
            "reward.functions.accuracy builds: remove it (its keys: answer_field)",
        ),
        (
            "++room.samples=4",
            "error: ++room.samples sets a key that nothing reads: room's settings are read by "
            "name and samples is none of them; remove it (see conf/room/ for its keys)",
        ),
        ("++sed=3", "error: ++sed sets a key that no setting declares and no config reads"),
        (
            "trainer.precision=bf16-mixedd",
            "error: trainer.precision must be one of Lightning's precisions: 32-true, bf16-true",
        ),
        (
            "task=medqa_searcher eval.policy_overrides.rag.max_searches=abc",
            "error: eval.policy_overrides.rag.max_searches must be a whole number >= 0, got 'abc'",
        ),
        (
            "task=medqa_searcher +eval.policy_overrides.rag.max_serches=1",
            "error: eval.policy_overrides.rag.max_serches: max_serches is not a setting of the "
            "policy (Searcher)",
        ),
        (
            "hardware=[cpu,bf17]",
            "error: In 'train': Could not load 'hardware/bf17'; available options in 'hardware': "
            "4bit, bf16, cpu, fsdp, gpu, grad_ckpt, lora, multi_gpu; did you mean bf16 in the list?",
        ),
        (
            "room.splits=[train,test]",
            "error: room.splits names ['test']: choose among validation, train, unseen",
        ),
        ("callbacks.room.k=abc", "error: callbacks.room.k must be a whole number >= 1, got 'abc'"),
        (
            "+callbacks.mine._target_=my.Callback",
            "error: callbacks.mine._target_: cannot import my.Callback (ModuleNotFoundError: No "
            "module named 'my'); name a class or function by its module path",
        ),
        (
            "rollout.stop_strings=END",
            "error: rollout.stop_strings must be a list of non-empty texts",
        ),
        ("eval.heads=grpo", "error: eval.heads must be a list of non-empty texts"),
        ("eval.heads=[]", "error: eval.heads must be a list of non-empty texts, at least 1 of"),
        (
            "algo.scheduler.name=cosinee",
            "error: algo.scheduler cannot be made: cosinee is not a valid SchedulerType",
        ),
        (
            "algo.scheduler.name=constant algo.scheduler.warmup_ratio=0.5",
            "error: algo.scheduler cannot be made: name=constant takes no warm-up",
        ),
        (
            "task=math epochs=2",
            "error: epochs=2 is not used while trainer.max_steps=22 is set by the task or preset",
        ),
        (
            "task=medmcqa data.unseen=rows.jsonl",
            "error: data.unseen must hold its keys (path, corpus, kinds), got 'rows.jsonl': "
            "write data.unseen.path=FILE for a file of unseen rows",
        ),
        (
            "model=smollm2_135m model.name_or_path=nobody/nothing-1b",
            "error: model.name_or_path='nobody/nothing-1b' is not in the local Hugging Face cache "
            "and the hub cannot be reached",
        ),
    ],
)
def test_bad_setting_key_or_option_is_one_line(tmp_path, override, expected):
    line = error_line(train_command(tmp_path, *override.split()))
    assert expected in line
    if override == "model=gpt5":
        assert "tiny" in line.split("available options")[1]


@pytest.mark.slow  # two fresh interpreters side by side, about 15 s: the whole way a user meets them
def test_errors_from_real_processes_are_one_line_and_a_failed_run_is_recorded(tmp_path):
    """A text where a number belongs, refused before anything loads, and a missing model
    folder, found once the run's record is open: one line each, and that run FAILED."""
    typed, missing = real_processes(
        [tmp_path / "typed", "data.batch_size=abc"],
        [tmp_path / "missing", "model.name_or_path=/no/such/folder", "model.builder=null"],
    )
    assert error_line(typed) == "error: data.batch_size must be a whole number >= 1, got 'abc'"
    line = error_line(missing)
    assert line.startswith("error: model.name_or_path: no model folder at /no/such/folder")
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'missing'}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("arithmetic").experiment_id])
    assert run.info.status == "FAILED"
    assert run.data.tags["error"].startswith(
        "MissingFileError: model.name_or_path: no model folder at /no/such/folder"
    )


def real_processes(*commands: list) -> list[subprocess.CompletedProcess]:
    """`python -m src.train` for each [output root, overrides...], as CI runs it (`CI` set,
    no `HYDRA_FULL_ERROR`, no standard input), started together: most of their time is
    starting up, one core each."""
    env = {key: value for key, value in os.environ.items() if key != "HYDRA_FULL_ERROR"}
    env["CI"] = "true"
    runs = [
        [sys.executable, "-m", "src.train", *overrides, f"paths.output_root={root}"]
        for root, *overrides in commands
    ]
    started = [
        subprocess.Popen(
            args,
            cwd=PROJECT_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in runs
    ]
    results = []
    for args, process in zip(runs, started, strict=True):
        stdout, stderr = process.communicate(timeout=600)
        results.append(subprocess.CompletedProcess(args, process.returncode, stdout, stderr))
    return results


def test_full_error_shows_the_traceback(tmp_path):
    result = train_command(tmp_path, "algo.group_size=1", full_error=True)
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert "ConfigError: algo.group_size must be a whole number >= 2" in result.stderr


def test_a_bug_keeps_its_traceback(tmp_path):
    target = "tests.runs.test_user_errors.BrokenReward"
    result = train_command(tmp_path, f"+reward.functions.broken._target_={target}")
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "BrokenReward fails on purpose" in result.stderr
    assert not [line for line in result.stderr.splitlines() if line.startswith("error: ")]


def test_messages_without_a_command():
    """The cases the commands above leave out, in this process: a user error wrapped by
    `instantiate`, a template field as a `KeyError`, an override that does not parse."""
    wrapped = InstantiationException("Error in call to target 'x'")
    wrapped.__cause__ = ConfigError("reward.on_error must be one of ('raise', 'zero'), got 'x'")
    assert user_message(wrapped) == "reward.on_error must be one of ('raise', 'zero'), got 'x'"
    assert user_message(InstantiationException("x")) is None
    assert user_message(TypeError("a bug")) is None
    with pytest.raises(KeyError) as raised:
        Generator("{context}").prompts([{"question": "q"}])
    assert user_message(raised.value).startswith("policy.template uses field 'context'")
    with pytest.raises(OverrideParseException) as raised:
        OverridesParser.create().parse_overrides(["algo.kl_beta=[0.1"])
    message = user_message(raised.value)
    assert "algo.kl_beta=[0.1" in message and "\n" not in message
    config = {"algo": {"kl_beta": 0.1, "group_size": 8}, "model": {}}
    assert closest_keys("algo.kl_bta", config) == ["algo.kl_beta"]
    assert closest_keys("algoo.kl_beta", config) == ["algo.kl_beta"]
    assert closest_keys("algo.kl_beta", config) == []


def test_a_run_folder_that_cannot_be_written_is_one_line_before_any_work(tmp_path):
    line = error_line(train_command(tmp_path, "model=tiny", "paths.run_dir=/proc/x/run"))
    assert line.startswith("error: paths.run_dir=/proc/x/run: /proc is not a writable folder")


def test_an_eval_head_named_with_a_wrong_folder_is_one_line(tmp_path):
    """`python -m src.eval eval.adapters.grpo=WRONG/PATH`: exit status 1 and one line, not a
    table without the head the user asked for."""
    wrong = tmp_path / "runs" / "one" / "modle"
    result = command(
        "src.eval",
        "task=medmcqa",
        f"eval.adapters.grpo={wrong}",
        f"paths.output_root={tmp_path}",
        environment={"CI": "true", "HYDRA_FULL_ERROR": None},
    )
    line = error_line(result)
    assert line.startswith(f"error: eval.adapters.grpo: no saved model at {wrong}")


def test_a_model_config_placed_as_the_reader_names_its_own_folder(make_cfg):
    """conf/model/tiny.yaml's folder is interpolated from its own keys, so the config works
    wherever it is placed (`+model@policy.reader=tiny`), not only as `model`."""
    cfg = make_cfg(
        "task=medqa_rewriter", "+model@policy.reader=tiny", "policy.reader.builder.num_layers=2"
    )
    assert cfg.policy.reader.name_or_path.endswith("tiny_llama_h128_l2")
    assert cfg.model.name_or_path != cfg.policy.reader.name_or_path


def test_a_config_group_added_with_a_plus_is_not_a_key():
    from src.runs.read_keys import check_added_keys

    check_added_keys(["+experiment=rewriter_gemma_base", "+model@policy.reader=tiny", "seed=1"])
    check_added_keys(["+trainer.profiler=simple", "++seed=3"])  # a section's key; a forced set
    with pytest.raises(ConfigError, match=r"^\+sft_adaptr adds a key"):
        check_added_keys(["+sft_adaptr=/tmp"])


def test_a_key_added_under_a_section_read_by_name_must_be_a_setting():
    """`+eval.k=0` would be read by nothing and the run would go on without a word; a
    declared key the task's config lacks, a key deeper in (a head's adapter) and a forced set
    (`++`, which may override a key the config has) pass."""
    from src.runs.read_keys import check_added_keys

    declared = {"room.k", "eval.heads"}.__contains__
    with pytest.raises(ConfigError, match=r"^\+eval.k adds a key that nothing reads"):
        check_added_keys(["+eval.k=0"], declared)
    with pytest.raises(ConfigError, match=r"^\+sampling.lag adds a key that nothing reads"):
        check_added_keys(["+sampling.lag=2"], declared)
    check_added_keys(["+room.k=4", "+eval.adapters.mine=/tmp"], declared)


def test_a_forced_key_must_be_declared_or_interpolated():
    """`++KEY=VALUE` adds the key or overrides it: under a section read by name it must be a
    setting, and at the top it must be one a table declares or a config interpolates (a
    task's `rewriter_adapter`, read as `${rewriter_adapter}`)."""
    from src.runs.read_keys import check_added_keys

    declared = {"seed", "eval.output_dir"}.__contains__
    interpolated = {"rewriter_adapter"}.__contains__
    check_added_keys(
        ["++seed=3", "++eval.output_dir=/tmp", "++rewriter_adapter=/tmp", "++trainer.x=1"],
        declared,
        interpolated,
    )
    with pytest.raises(ConfigError, match=r"^\+\+eval.k sets a key that nothing reads"):
        check_added_keys(["++eval.k=0"], declared, interpolated)
    with pytest.raises(ConfigError, match=r"^\+\+sede sets a key that no setting declares"):
        check_added_keys(["++sede=3"], declared, interpolated)


def test_the_keys_a_config_interpolates_are_its_top_level_names(make_cfg):
    from src.runs.read_keys import interpolated_roots

    roots = interpolated_roots(make_cfg("task=medqa_searcher"))
    assert {"rewriter_adapter", "trainer", "paths"} <= roots
    assert "rewriter" not in roots and "seed_" not in roots


def test_an_unknown_key_is_told_where_a_plus_would_be_read(monkeypatch):
    """The `+` form is advised only where a part takes the key (Lightning's Trainer, peft's
    LoraConfig); elsewhere the section's keys are named."""
    from src.runs.cli import unknown_key_message

    config = {
        "trainer": {"_target_": "lightning.pytorch.Trainer", "max_steps": 2},
        "model": {"lora": {"r": 8}},
        "eval": {"heads": ["base"], "split": "validation"},
    }
    assert unknown_key_message("trainer.profiler", config, "+trainer.profiler=simple") == (
        "trainer.profiler is not a key of the config; to add it as a new key use "
        "+trainer.profiler=simple"
    )
    assert "use +model.lora.bias=all" in unknown_key_message(
        "model.lora.bias", config, "+model.lora.bias=all"
    )
    assert unknown_key_message("eval.k", config, "+eval.k=0") == (
        "eval.k is not a key of the config, and nothing reads it; eval has heads, split"
    )
    assert unknown_key_message("nokey", config, "+nokey=1") == (
        "nokey is not a key of the config; no config of this run reads it"
    )
