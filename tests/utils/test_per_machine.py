"""A measurement made once per machine: every process reads the first one's value
(src/utils/per_machine.py)."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest
import torch

from src.utils import per_machine
from src.utils.per_machine import Verdict, machine_key, measured_once

PROCESSES = 4


def kept_values(cache: Path, name: str = "speed") -> dict[str, object]:
    """The values kept in `name`'s file, by machine key (each entry also has its date)."""
    return {
        key: entry["value"]
        for key, entry in json.loads((cache / f"{name}.json").read_text()).items()
    }


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(per_machine.FOLDER_VARIABLE, str(tmp_path / "cache"))
    return tmp_path / "cache"


class Counted:
    """A measurement that returns `value` and counts its calls."""

    def __init__(self, value: object) -> None:
        self.value, self.calls = value, 0

    def __call__(self) -> object:
        self.calls += 1
        return self.value


def test_the_first_value_is_kept_and_read_back(cache: Path) -> None:
    first, second = Counted(True), Counted(False)
    assert measured_once("speed", first) is True
    assert measured_once("speed", second) is True  # read, not measured again
    assert (first.calls, second.calls) == (1, 0)
    assert kept_values(cache) == {machine_key(): True}


def test_another_thread_count_is_measured_for_itself(cache: Path) -> None:
    threads = torch.get_num_threads()
    assert measured_once("speed", Counted(1.5)) == 1.5
    try:
        torch.set_num_threads(threads + 1)
        assert measured_once("speed", Counted(2.5)) == 2.5
    finally:
        torch.set_num_threads(threads)
    assert measured_once("speed", Counted(9.0)) == 1.5
    assert len(json.loads((cache / "speed.json").read_text())) == 2


def test_the_folder_defaults_to_the_users_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(per_machine.FOLDER_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere/cache")
    assert per_machine.folder() == Path("/somewhere/cache/grpo-lab")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert per_machine.folder() == Path.home() / ".cache" / "grpo-lab"


def test_the_processor_is_named_with_its_family_and_model() -> None:
    cpuinfo = (
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
        "model name\t: AMD EPYC\n\nprocessor\t: 1\ncpu family\t: 26\nmodel name\t: Other\n"
    )
    assert per_machine.processor_in(cpuinfo) == "AMD EPYC (family 25, model 17)"
    assert per_machine.processor_in("processor\t: 0\nBogoMIPS\t: 50.00\n") is None
    assert per_machine.processor()  # whatever this machine is, it has a name


def test_a_spoilt_file_is_measured_again_and_rewritten(cache: Path, caplog) -> None:
    cache.mkdir()
    (cache / "speed.json").write_text("{not json")
    assert measured_once("speed", Counted("fast")) == "fast"
    assert "is not a JSON object of measurements" in caplog.text
    assert kept_values(cache) == {machine_key(): "fast"}


def test_where_nothing_can_be_kept_each_call_measures(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "a_file").write_text("")
    monkeypatch.setenv(per_machine.FOLDER_VARIABLE, str(tmp_path / "a_file" / "cache"))
    measure = Counted(True)
    assert measured_once("speed", measure) is True
    assert measured_once("speed", measure) is True
    assert measure.calls == 2  # measured once per call, and no error


def _measure_in_a_process(folder: str, barrier, results) -> None:
    os.environ[per_machine.FOLDER_VARIABLE] = folder
    barrier.wait()
    # each process's own measurement differs: only one may be kept and read by all
    results.put(measured_once("speed", lambda: os.getpid()))


def test_processes_started_together_all_read_one_measurement(cache: Path) -> None:
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(PROCESSES), context.Queue()
    processes = [
        context.Process(target=_measure_in_a_process, args=(str(cache), barrier, results))
        for _ in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    values = [results.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    pids = {process.pid for process in processes}
    assert len(set(values)) == 1 and values[0] in pids, values
    assert kept_values(cache) == {machine_key(): values[0]}


def test_a_verdict_in_doubt_is_not_kept_and_the_next_process_times_again(cache: Path) -> None:
    doubtful = Counted(Verdict(True, clear=False, timings={"a": 1e-3}, doubt="timings overlap"))
    assert measured_once("speed", doubtful) is True
    assert not (cache / "speed.json").exists() or kept_values(cache) == {}
    assert per_machine.choices()["speed"]["source"] == "measured now, not kept: timings overlap"
    clear = Counted(Verdict(False, clear=True, timings={"a": 2e-3, "b": 1e-3}))
    assert measured_once("speed", clear) is False  # timed again, then kept
    assert measured_once("speed", Counted(True)) is False
    assert (doubtful.calls, clear.calls) == (1, 1)
    entry = json.loads((cache / "speed.json").read_text())[machine_key()]
    assert entry["timings"] == {"a": 2e-3, "b": 1e-3} and entry["measured_at"]
    assert per_machine.choices()["speed"]["source"] == "kept"
    (line,) = [line for line in per_machine.choice_lines() if line.startswith("speed:")]
    assert line.startswith("speed: False (kept at ") and line.endswith("; a 2000 us, b 1000 us)")


def test_a_value_kept_before_dates_were_kept_is_still_read(cache: Path) -> None:
    cache.mkdir()
    (cache / "speed.json").write_text(json.dumps({machine_key(): True}))
    assert measured_once("speed", Counted(False)) is True


def test_forget_makes_the_next_process_measure_again(cache: Path) -> None:
    assert measured_once("speed", Counted(1)) == 1
    assert per_machine.kept("speed")["value"] == 1
    per_machine.forget("speed")
    assert per_machine.kept("speed") is None
    assert measured_once("speed", Counted(2)) == 2


def test_the_kept_names_are_this_machines_only(cache: Path) -> None:
    assert per_machine.kept_names() == []  # no folder yet
    measured_once("speed.128x512", Counted(1))
    measured_once("depth", Counted(2))
    (cache / "elsewhere.json").write_text(json.dumps({"another machine": True}))
    assert per_machine.kept_names() == ["depth", "speed.128x512"]


def test_a_machine_is_busy_when_other_processes_hold_a_core() -> None:
    context = multiprocessing.get_context("fork")
    spinner = context.Process(target=_spin, daemon=True)
    spinner.start()
    try:
        found = per_machine.machine_busy(share=0.25, window=0.5)
    finally:
        spinner.kill()
    processors = os.cpu_count() or 1
    if processors <= 3:  # one spinning process holds more than a quarter of the processors
        assert found.startswith("other processes kept ") and found.endswith(
            f"of {processors} processors busy"
        )


def _spin() -> None:
    while True:
        pass


def test_a_pinned_choice_is_taken_whatever_is_kept_or_measured(cache: Path) -> None:
    assert measured_once("speed", Counted(True)) is True  # kept for the machine
    per_machine.pin({"speed": False, "other": 3}, "as the run continued chose")
    measure = Counted(True)
    assert measured_once("speed", measure) is False and measured_once("other", measure) == 3
    assert measure.calls == 0  # neither read nor timed
    assert per_machine.choices()["speed"]["source"] == "as the run continued chose"
    assert per_machine.chosen_values()["speed"] is False  # what a checkpoint keeps
    assert kept_values(cache) == {machine_key(): True}  # the machine's own value untouched


def test_the_environment_pins_a_file_of_choices(cache, tmp_path, monkeypatch) -> None:
    from src.utils.errors import ConfigError

    chosen = tmp_path / "choices.json"
    chosen.write_text(json.dumps({"speed": "mkl"}))
    monkeypatch.setenv(per_machine.PIN_VARIABLE, str(chosen))
    per_machine.pin_from_environment()
    assert measured_once("speed", Counted("onednn")) == "mkl"
    chosen.write_text("[1, 2]")
    with pytest.raises(ConfigError, match=r"GRPO_MACHINE_CHOICES=.*holds no \{name: value\}"):
        per_machine.pin_from_environment()
    monkeypatch.setenv(per_machine.PIN_VARIABLE, str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError, match="cannot be read as JSON"):
        per_machine.pin_from_environment()


def test_a_pinned_choice_the_run_never_asks_for_is_said_once(cache, caplog) -> None:
    """A choices file of another machine's or model's shapes pins nothing: the run says which
    names it never asked for, and where they were pinned from."""
    import logging

    from src.runs.record import log_machine_choices

    per_machine.pin({"speed": "mkl", "onednn_products.9x9": True}, "pinned by $X=other.json")
    assert measured_once("speed", Counted("onednn")) == "mkl"
    assert per_machine.unused_pins() == {"onednn_products.9x9": "pinned by $X=other.json"}
    with caplog.at_level(logging.WARNING):
        log_machine_choices([])
    (line,) = [r.getMessage() for r in caplog.records if "never asked for" in r.getMessage()]
    assert "onednn_products.9x9" in line and "other.json" in line and "speed" not in line
    per_machine.unpin()
