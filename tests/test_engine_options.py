"""EngineOptions: the reward engine's options, their defaults and rules, in one place (no worker is started)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from rlvr_plugins.engine import EngineOptions, RewardEngine
from rlvr_plugins.errors import ConfigError
from rlvr_plugins.rewards import Engines
from rlvr_plugins.train.config import validate
from rlvr_plugins.train.run import engine_options

RUN_DEFAULTS = {
    "num_workers": 2,
    "timeout_s": 10.0,
    "max_consecutive_failures": 64,
    "nonfinite": "error",
    "on_error": "mask",
    "in_process": False,
    "memory_limit_mb": 4096,
    "max_abs_value": 1e6,
    "max_completion_mb": 4.0,
    "max_workers": None,
}
"""The defaults of ``rlvr train`` before EngineOptions existed (run.py's engine_options)."""

BAD = [
    ("num_workers", 0, "an integer >= 1"),
    ("num_workers", 1.5, "an integer >= 1"),
    ("num_workers", True, "an integer >= 1"),
    ("timeout_s", 0, "a number > 0"),
    ("timeout_s", float("nan"), "a number > 0"),
    ("timeout_s", "10", "a number > 0"),
    ("max_consecutive_failures", 0, "an integer >= 1"),
    ("nonfinite", "ignore", "'error' or 'mask'"),
    ("on_error", "sometimes", "'mask' (a reward that raises fails that item) or 'raise' (it stops the run)"),
    ("in_process", "yes", "true or false"),
    ("memory_limit_mb", 0, "an integer >= 1 (MiB of address space per worker) or null for no limit"),
    ("memory_limit_mb", 512.0, "an integer >= 1 (MiB of address space per worker) or null for no limit"),
    ("max_abs_value", -1.0, "a number > 0, or null for no bound"),
    ("max_completion_mb", 0, "a number > 0 (MiB of text) or null for no limit"),
]


def test_the_defaults_are_those_of_rlvr_train():
    assert dataclasses.asdict(EngineOptions()) == RUN_DEFAULTS
    assert engine_options({}) == RUN_DEFAULTS == engine_options({"engine": None})
    assert Engines().settings() == EngineOptions()


def test_a_bare_engine_has_no_memory_limit_and_no_magnitude_bound():
    assert EngineOptions.bare() == dataclasses.replace(
        EngineOptions(), memory_limit_mb=None, max_abs_value=None, max_completion_mb=None
    )
    assert EngineOptions.bare(memory_limit_mb=100).memory_limit_mb == 100
    with RewardEngine(in_process=True) as engine:
        assert engine.options == EngineOptions.bare(in_process=True)
    with RewardEngine(EngineOptions(), in_process=True) as engine:
        assert engine.options == EngineOptions(in_process=True)


@pytest.mark.parametrize(("name", "value", "valid"), BAD, ids=[f"{n}={v!r}" for n, v, _ in BAD])
def test_each_bad_value_is_one_error_naming_the_option_and_what_is_valid(name, value, valid):
    message = f"invalid reward engine options: {name} must be {valid}, got {value!r}"
    for build in (EngineOptions, RewardEngine, Engines):
        with pytest.raises(ValueError) as err:
            build(**{name: value})
        assert str(err.value) == message, build


def test_every_bad_value_is_reported_at_once():
    with pytest.raises(ValueError, match=r"num_workers must be .*, got 0; nonfinite must be .*, got 'x'$"):
        EngineOptions(num_workers=0, nonfinite="x")


def test_numbers_become_floats_and_deadline_s_is_none_in_process():
    options = EngineOptions(timeout_s=3, max_abs_value=5)
    assert type(options.timeout_s) is float and type(options.max_abs_value) is float
    assert options.deadline_s == 3.0
    assert EngineOptions(in_process=True).deadline_s is None
    assert EngineOptions(memory_limit_mb=None, max_abs_value=None).max_abs_value is None


def test_the_config_section_uses_its_own_names_and_the_same_rules():
    section = {"workers": 3, "max_abs_reward": 5, "timeout_s": 2, "memory_limit_mb": None}
    assert EngineOptions.from_config(section) == EngineOptions(
        num_workers=3, max_abs_value=5.0, timeout_s=2.0, memory_limit_mb=None
    )
    assert EngineOptions.config_keys() == {
        "workers",
        "max_workers",
        "timeout_s",
        "max_consecutive_failures",
        "nonfinite",
        "on_error",
        "in_process",
        "memory_limit_mb",
        "max_abs_reward",
        "max_completion_mb",
    }
    assert EngineOptions.config_problems({"workers": 0, "max_abs_reward": "big", "timeout_s": 1}) == [
        ("workers", "must be an integer >= 1, got 0"),
        ("max_abs_reward", "must be a number > 0, or null for no bound, got 'big'"),
    ]


def test_config_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("plugins: {}\nengine:\n  workers: 2\n  timeout_s: -1\n")
    config = yaml.safe_load(path.read_text())
    config.update({"_config_file": str(path), "_lines": {"engine": 2, "engine.workers": 3, "engine.timeout_s": 4}})
    with pytest.raises(ConfigError) as err:
        validate(config, need_data=False, need_model=False)
    assert err.value.problems == [f"{path}:4: engine.timeout_s must be a number > 0, got -1"]


def test_the_configuration_docs_state_the_same_defaults():
    text = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text()
    section = text.split("## `engine`", 1)[1].split("\n## ", 1)[0]
    documented = dict(re.findall(r"^\| `(\w+)` \| `([^`]+)` \|", section, flags=re.MULTILINE))
    names = {"workers": "num_workers", "max_abs_reward": "max_abs_value"}
    defaults = {names.get(key, key): yaml.safe_load(value) for key, value in documented.items()}
    defaults["max_abs_value"] = float(defaults["max_abs_value"])  # YAML 1.1 reads 1e6 as a string
    assert defaults == RUN_DEFAULTS


def test_workers_are_at_most_four_per_cpu_unless_max_workers_allows_more(monkeypatch):
    from rlvr_plugins.engine import options

    monkeypatch.setattr(options, "cpu_count", lambda: 2)
    assert EngineOptions(num_workers=8).num_workers == 8  # 4 x 2 CPUs
    with pytest.raises(ValueError) as err:
        Engines(num_workers=1_000_000)
    assert str(err.value) == (
        "invalid reward engine options: num_workers must be at most 8 (4 per CPU, 2 CPUs), got 1000000 "
        "(or give max_workers)"
    )
    assert EngineOptions(num_workers=12, max_workers=12).num_workers == 12
    with pytest.raises(ValueError, match=r"num_workers must be at most max_workers=3, got 4 \(or give max_workers\)$"):
        EngineOptions(num_workers=4, max_workers=3)
    assert EngineOptions.config_problems({"workers": 1_000_000}) == [
        ("workers", "must be at most 8 (4 per CPU, 2 CPUs), got 1000000 (or set engine.max_workers)")
    ]
    assert EngineOptions.config_problems({"workers": 9, "max_workers": 9}) == []
    assert EngineOptions.config_problems({"max_workers": 0}) == [
        ("max_workers", "must be an integer >= 1, or null for 4 per CPU, got 0")
    ]


def test_check_refuses_a_million_workers_at_once_and_probes_with_one_worker(monkeypatch, rlvr_cli):
    import time

    from rlvr_plugins.engine import options

    monkeypatch.setattr(options, "cpu_count", lambda: 2)
    smoke = Path(__file__).parent / "configs" / "smoke.yaml"
    t = time.perf_counter()
    result = rlvr_cli("train", smoke, "--check", "--set", "engine.workers=1000000")
    assert result.exit_code == 2 and time.perf_counter() - t < 5
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert "engine.workers must be at most 8 (4 per CPU, 2 CPUs), got 1000000 (or set engine.max_workers)" in result.err
    started = []
    original = Engines._engine

    def recording(self, in_process):
        started.append(self.settings())
        return original(self, in_process)

    monkeypatch.setattr(Engines, "_engine", recording)
    result = rlvr_cli("train", smoke, "--check", "--set", "engine.workers=8")
    assert result.exit_code == 0, result.err
    assert [s.num_workers for s in started] == [1]  # the probe: one worker, not engine.workers
