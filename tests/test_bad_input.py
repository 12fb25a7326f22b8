"""Bad input (issue 16, section D): a one-line error naming the culprit (file:line, key, what is
valid), exit code 2, before torch is imported; never a traceback, never a half-written output."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from rlvr_plugins import cli
from rlvr_plugins.engine import RewardEngine
from rlvr_plugins.errors import ConfigError, shown
from rlvr_plugins.train.config import load_config
from rlvr_plugins.train.data import DataError, read_jsonl_numbered

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "tests" / "configs" / "smoke.yaml"
sys.path.insert(0, str(Path(__file__).parent))
import fault_rewards  # noqa: E402

MINIMAL = "model: {tiny: {}}\ndata: {train: {source: synthetic, task: arithmetic}}\nplugins: {r1-accuracy: {}}\n"
ROW = {"prompt": "1+1=", "completion": "<think>2</think><answer>2</answer>", "answer": "2"}


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def error_of(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


# -- item 15: encodings, --set values, --output ---------------------------------------------


def test_config_that_is_not_utf8_names_file_line_and_column(tmp_path):
    path = write(tmp_path / "c.yaml", MINIMAL.encode() + b"seed: 4\xff2\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == (
        f"invalid config: {path}:4: not valid UTF-8 (byte 0xff at column 8); save the config as UTF-8"
    )


def test_jsonl_that_is_not_utf8_names_file_line_and_column(tmp_path):
    path = write(tmp_path / "rows.jsonl", json.dumps(ROW).encode() + b"\n\n" + b'{"prompt": "caf\xe9"}\n')
    with pytest.raises(DataError) as err:
        read_jsonl_numbered(str(path))
    assert str(err.value) == f"{path}:3: not valid UTF-8 (byte 0xe9 at column 16); save the file as UTF-8"


def test_lone_surrogate_in_a_completion_is_refused_before_scoring(tmp_path, capsys):
    rows = write(tmp_path / "rows.jsonl", json.dumps(ROW) + "\n" + json.dumps({**ROW, "completion": "2 \ud800"}) + "\n")
    out = tmp_path / "scored.jsonl"
    assert cli.main(["score", str(SMOKE), str(rows), "--output", str(out)]) == 2
    assert error_of(capsys) == (
        f"rlvr: error: {rows}:2: column 'completion' has a lone surrogate escape "
        "(\\ud800-\\udfff without its pair), which is not Unicode text\n"
    )
    assert not out.exists()


def test_lone_surrogate_in_the_config_names_file_line_and_key(tmp_path):
    path = write(tmp_path / "c.yaml", MINIMAL + 'eval:\n  cot_instruction: "think \\ud800"\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == (
        f"invalid config: {path}:5: 'eval.cot_instruction' has a lone surrogate escape "
        "(\\ud800-\\udfff without its pair), which is not Unicode text"
    )


def test_a_surrogate_pair_is_text(tmp_path):
    path = write(tmp_path / "rows.jsonl", json.dumps({**ROW, "completion": "smile \U0001f600"}) + "\n")
    assert read_jsonl_numbered(str(path))[0][1]["completion"] == "smile \U0001f600"


def test_set_with_invalid_yaml_is_one_line_naming_the_override(capsys):
    assert cli.main(["train", str(SMOKE), "--check", "--set", "trainer.max_steps=[1"]) == 2
    err = error_of(capsys)
    assert err.startswith(
        "rlvr: error: invalid config in --set: override 'trainer.max_steps=[1': the value is not "
        "valid YAML (--set:1: not valid YAML: while parsing a flow sequence expected ',' or ']'"
    )
    assert err.count("\n") == 1


@pytest.mark.parametrize("case", ["folder", "missing folder", "under a file"])
def test_output_that_cannot_be_written_fails_before_scoring(tmp_path, capsys, monkeypatch, case):
    import rlvr_plugins.cli.score_cmd as score

    monkeypatch.setattr(score, "run_score", lambda *a, **k: pytest.fail("scored before checking --output"))
    rows = write(tmp_path / "rows.jsonl", json.dumps(ROW) + "\n")
    write(tmp_path / "file", "x")
    output, message = {
        "folder": (tmp_path, f"--output {str(tmp_path)!r} is a folder; give a file path"),
        "missing folder": (
            tmp_path / "nope" / "o.jsonl",
            f"--output {str(tmp_path / 'nope' / 'o.jsonl')!r}: folder {str(tmp_path / 'nope')!r} does not exist",
        ),
        "under a file": (
            tmp_path / "file" / "o.jsonl",
            f"--output {str(tmp_path / 'file' / 'o.jsonl')!r}: {str(tmp_path / 'file')!r} is not a folder",
        ),
    }[case]
    assert cli.main(["score", str(SMOKE), str(rows), "--output", str(output)]) == 2
    assert error_of(capsys) == f"rlvr: error: {message}\n"


def test_read_only_output_folder_fails_before_scoring(tmp_path):
    from rlvr_plugins.outputs import OutputError, check_output_file

    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as root: a read-only folder is writable")
        with pytest.raises(OutputError, match=r"ro/o.jsonl' cannot be written: Permission denied"):
            check_output_file(folder / "o.jsonl", "--output")
    finally:
        folder.chmod(0o700)


def test_full_disk_leaves_the_old_output_and_no_temporary_file(tmp_path, capsys, monkeypatch):
    import rlvr_plugins.outputs as outputs

    rows = write(tmp_path / "rows.jsonl", json.dumps(ROW) + "\n")
    config = write(tmp_path / "c.yaml", "model: {tiny: {}}\nplugins: {r1-accuracy: {}}\nengine: {in_process: true}\n")
    out = write(tmp_path / "scored.jsonl", "old\n")

    def no_space(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(outputs.os, "fsync", no_space)
    assert cli.main(["score", str(config), str(rows), "--output", str(out)]) == 2
    assert error_of(capsys).endswith(
        f"rlvr: error: --output {str(out)!r} could not be written: no space left on the "
        "device; nothing was written there\n"
    )
    assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "rows.jsonl", "scored.jsonl"]


def test_atomic_write_keeps_the_file_mode_and_replaces_the_content(tmp_path):
    from rlvr_plugins.outputs import write_atomic

    path = write(tmp_path / "o.jsonl", "old\n")
    path.chmod(0o640)
    write_atomic(path, ["a\n", "b\n"])
    assert path.read_text() == "a\nb\n" and path.stat().st_mode & 0o777 == 0o640


# -- item 17: trainer and sft values are typed ----------------------------------------------


def test_trainer_and_sft_values_are_type_checked_with_file_and_line(tmp_path):
    path = write(
        tmp_path / "c.yaml",
        MINIMAL + "trainer:\n  max_steps: ten\n  learning_rate: [1]\n"
        "  beta: 0.0\nsft:\n  num_train_epochs: {a: 1}\n  completion_column: 3\n  report_to: [none, 1]\n",
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.problems == [
        f"{path}:5: trainer.max_steps must be int, got 'ten' (str)",
        f"{path}:6: trainer.learning_rate must be float, got [1] (list)",
        f"{path}:9: sft.num_train_epochs must be float, got {{'a': 1}} (dict)",
        f"{path}:10: sft.completion_column must be str, got 3 (int)",
        f"{path}:11: sft.report_to must be str | list[str] | None, got ['none', 1] (list)",
    ]


def test_other_section_values_are_type_checked(tmp_path):
    path = write(
        tmp_path / "c.yaml",
        "model: {tiny: {}, trust_remote_code: 'yes'}\n"
        "data: {train: {source: synthetic, task: arithmetic, limit: ten, size: 1.5}}\n"
        "plugins: {r1-accuracy: {}}\neval: {threshold: high}\n",
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.problems == [
        f"{path}:1: model.trust_remote_code must be bool, got 'yes' (str)",
        f"{path}:2: data.train.limit must be int | None, got 'ten' (str)",
        f"{path}:2: data.train.size must be int, got 1.5 (float)",
        f"{path}:4: eval.threshold must be float, got 'high' (str)",
    ]


def test_a_key_set_with_set_is_named_without_a_file_line(tmp_path):
    path = write(tmp_path / "c.yaml", MINIMAL + "trainer:\n  max_steps: 3\n  beta: x\n")
    with pytest.raises(ConfigError) as err:
        load_config(path, ["trainer={max_steps: ten}", "seed=x"])
    assert err.value.problems == [
        "seed must be an integer from 0 to 2**32 - 1, got 'x'",
        "trainer.max_steps must be int, got 'ten' (str)",
    ]


@pytest.mark.parametrize(
    "line, problem",
    [
        ("seed: 4294967296", "seed must be an integer from 0 to 2**32 - 1, got 4294967296"),
        ("seed: -1", "seed must be an integer from 0 to 2**32 - 1, got -1"),
        ("trainer: {learning_rate: .nan}", "{path}:4: trainer.learning_rate must be float (finite), got nan (float)"),
        ("trainer: {max_grad_norm: .inf}", "{path}:4: trainer.max_grad_norm must be float (finite), got inf (float)"),
        ("sft: {learning_rate: -.inf}", "{path}:4: sft.learning_rate must be float (finite), got -inf (float)"),
        ("trainer: {seed: 99999999999}", "{path}:4: trainer.seed must be from 0 to 2**32 - 1, got 99999999999"),
        ("sft: {data_seed: -3}", "{path}:4: sft.data_seed must be from 0 to 2**32 - 1, got -3"),
    ],
)
def test_check_refuses_a_seed_numpy_refuses_and_non_finite_floats(tmp_path, capsys, line, problem):
    path = write(tmp_path / "c.yaml", MINIMAL + line + "\n")
    assert cli.main(["train", str(path), "--check"]) == 2
    assert error_of(capsys) == f"rlvr: error: invalid config in {path}: {problem.format(path=path)}\n"


def test_check_refuses_a_bad_trainer_type_in_one_line(tmp_path, capsys):
    path = write(tmp_path / "c.yaml", MINIMAL + "trainer: {max_steps: ten}\n")
    assert cli.main(["train", str(path), "--check"]) == 2
    assert (
        error_of(capsys) == f"rlvr: error: invalid config in {path}: {path}:4: trainer.max_steps must be int, "
        "got 'ten' (str)\n"
    )


def test_values_trl_accepts_pass_the_type_check(tmp_path):
    path = write(
        tmp_path / "c.yaml",
        MINIMAL + "trainer: {learning_rate: 1e-6, max_steps: 3, scale_rewards: false, "
        "report_to: none, fsdp: [full_shard], num_train_epochs: 2, bf16: null, lr_scheduler_type: constant}\n",
    )
    config = load_config(path, ["trainer.warmup_steps=1e2"])
    assert config["trainer"]["learning_rate"] == 1e-6 and config["trainer"]["warmup_steps"] == 100.0


@pytest.mark.parametrize(
    "value, text, ok",
    [
        (3, "int", True),
        (True, "int", False),
        (3.0, "int", False),
        (3, "float", True),
        (True, "float", False),
        (None, "int | None", True),
        ("x", "str | list[str]", True),
        (["a", "b"], "str | list[str]", True),
        (["a", 2], "str | list[str]", False),
        ([1, 2.5], "list[float] | None", True),
        ({}, "dict | str | None", True),
        (False, "str | False | None", True),
        (True, "str | False | None", False),
        (object(), "any", True),
    ],
)
def test_the_checker_reads_the_generated_annotations_by_hand(value, text, ok):
    from rlvr_plugins.fields import check
    from rlvr_plugins.train.trl_fields import annotation

    assert check(value, annotation(text))[0] is ok


def test_the_generated_field_table_matches_the_installed_trl():
    from rlvr_plugins.train import _trl_fields, trl_fields

    assert _trl_fields.TRL_VERSION == trl_fields.trl_version()
    for section, class_name in trl_fields.CLASSES.items():
        assert _trl_fields.FIELDS[section] == trl_fields.compute(class_name), (
            f"regenerate with: python -m rlvr_plugins.train.trl_fields ({section})"
        )


def test_another_trl_version_computes_the_types_from_trl(monkeypatch):
    from rlvr_plugins.train import _trl_fields, trl_fields

    monkeypatch.setattr(_trl_fields, "TRL_VERSION", "0.0-not-installed")
    assert trl_fields.field_types("trainer")["max_steps"] is int


# -- item 18: aliases refused, every echoed value bounded -----------------------------------


def test_alias_bomb_is_refused_naming_file_and_line(tmp_path):
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    lines += [
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]"
        for i in range(8)
    ]
    path = write(tmp_path / "bomb.yaml", "\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == (
        f"invalid config: {path}:2: not valid YAML: YAML aliases (*a) are not allowed in a "
        "config; write the value out where it is used (column 8)"
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("seed: 1\nmodel: {tiny: {}}\nseed: 2\n", "c.yaml:3: key 'seed' is given twice (first at line 1)"),
        ("a: " + "[" * 5000 + "]" * 5000 + "\n", "c.yaml: YAML nested too deeply"),
        (
            "a: !!python/object:os.system x\n",
            "c.yaml:1: not valid YAML: could not determine a constructor for the tag "
            "'tag:yaml.org,2002:python/object:os.system' (column 4)",
        ),
        (
            "a: [1\n",
            "c.yaml:2: not valid YAML: while parsing a flow sequence expected ',' or ']', but got '<stream end>'"
            " (column 1)",
        ),
    ],
)
def test_yaml_problems_name_file_and_line(tmp_path, text, message):
    path = write(tmp_path / "c.yaml", text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"invalid config: {tmp_path}/{message}"


def test_an_echoed_value_is_bounded(tmp_path, capsys):
    path = write(tmp_path / "c.yaml", MINIMAL + f"seed: [{'z' * 300_000}]\n")
    assert cli.main(["train", str(path), "--check"]) == 2
    err = error_of(capsys)
    assert err.startswith(
        f"rlvr: error: invalid config in {path}: seed must be an integer from 0 to 2**32 - 1, got ['zzzzzzzzzzzz"
    )
    assert len(err) < 170 + len(str(path)) and err.count("\n") == 1


def test_many_problems_are_bounded(tmp_path, capsys):
    path = write(tmp_path / "c.yaml", MINIMAL + "".join(f"k{i}{'z' * 1000}: 1\n" for i in range(200)))
    assert cli.main(["train", str(path), "--check"]) == 2
    err = error_of(capsys)
    assert "(200 problem(s))" in err and err.endswith("  ... and 170 more problem(s)\n")
    assert len(err) < 12_000 and max(len(line) for line in err.splitlines()) < 400


def test_shown_bounds_size_and_work():
    nested = [0]
    for _ in range(30):
        nested = [nested] * 10  # 10**30 leaves if expanded
    started = time.perf_counter()
    assert len(shown(nested)) <= 120 and time.perf_counter() - started < 0.1
    assert shown("x" * 10) == "'xxxxxxxxxx'"


# -- item 19: line cap at read time; one bad item fails alone -------------------------------


def test_line_over_the_cap_names_file_line_without_reading_it_whole(tmp_path, monkeypatch):
    path = tmp_path / "big.jsonl"
    with path.open("w") as fh:
        fh.write(json.dumps(ROW) + "\n")
        fh.write('{"prompt": "' + "x" * (40 * 2**20) + '"}\n')
    monkeypatch.setenv("RLVR_MAX_LINE_MB", "1")
    tracemalloc.start()
    try:
        with pytest.raises(DataError) as err:
            read_jsonl_numbered(str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(err.value) == (
        f"{path}:2: line longer than the limit of 1048576 bytes; set RLVR_MAX_LINE_MB (MiB, "
        "default 16) to allow longer lines"
    )
    assert peak < 4 * 2**20


def test_line_at_the_cap_is_read(tmp_path):
    line = json.dumps({"prompt": "x" * 100})
    path = write(tmp_path / "rows.jsonl", line + "\n" + line)
    assert len(line) == 114 and len(read_jsonl_numbered(str(path), max_bytes=len(line))) == 2
    with pytest.raises(DataError, match=r"rows.jsonl:1: line longer than the limit of 113 bytes"):
        read_jsonl_numbered(str(path), max_bytes=len(line) - 1)


def test_an_item_too_big_for_the_worker_fails_alone():
    items = [{"prompt": "p", "completion": "x" * (40 * 2**20 if i == 2 else i + 1), "example": {}} for i in range(5)]
    with RewardEngine(num_workers=1, memory_limit_mb=100, timeout_s=30) as engine:
        result = engine.score("length", fault_rewards.text_length, items)
    assert result.values[:2] == [1.0, 2.0] and result.values[3:] == [4.0, 5.0]
    assert result.failed == [False, False, True, False, False]
    assert "MemoryError" in result.errors[2]


def test_an_item_over_the_engine_cap_fails_alone_without_being_sent(monkeypatch):
    import rlvr_plugins.engine.dispatch as engine_module

    monkeypatch.setattr(engine_module, "_MAX_ITEM_BYTES", 10_000)
    items = [{"prompt": "p", "completion": "x" * (20_000 if i in (1, 4) else i + 1), "example": {}} for i in range(5)]
    with RewardEngine(num_workers=2, timeout_s=30) as engine:
        result = engine.score("length", fault_rewards.text_length, items)
    assert result.failed == [False, True, False, False, True]
    assert [result.values[i] for i in (0, 2, 3)] == [1.0, 3.0, 4.0]
    assert result.errors[1].startswith("the item is 200") and "at most 10000 bytes" in result.errors[1]


# -- item 20: every command that scores validates the run as train --check does -------------


def test_score_refuses_a_code_budget_that_does_not_fit_the_engine_deadline(tmp_path, capsys):
    pytest.importorskip("rlvr_code")
    config = write(
        tmp_path / "c.yaml", "model: {tiny: {}}\nplugins: {code-tests: {total_time_s: 20}}\nengine: {timeout_s: 10}\n"
    )
    rows = write(tmp_path / "rows.jsonl", json.dumps(ROW) + "\n")
    assert cli.main(["score", str(config), str(rows)]) == 2
    assert "option total_time_s=20 does not fit under the reward engine's deadline engine.timeout_s=10" in error_of(
        capsys
    )


@pytest.mark.parametrize("section", ["eval", "filter", "distill"])
def test_commands_that_score_validate_the_run(tmp_path, section):
    pytest.importorskip("rlvr_code")
    from rlvr_plugins.cli.common import setup

    config = load_config(
        write(
            tmp_path / "c.yaml",
            MINIMAL.replace("r1-accuracy", "code-tests")
            + f"engine: {{timeout_s: 5}}\noutput_dir: {tmp_path / 'out'}\n",
        )
    )
    with pytest.raises(ConfigError, match="total_time_s=.* does not fit under the reward engine's deadline"):
        setup(config, section)
    assert not (tmp_path / "out").exists()


# -- item 21: third-party logging in workers is bounded -------------------------------------


def test_worker_log_records_are_bounded(capfd):
    items = [{"prompt": "p", "completion": "START" + "y" * 1_000_000, "example": {}}]
    with RewardEngine(num_workers=1, timeout_s=30) as engine:
        result = engine.score("logs", fault_rewards.logs_the_whole_input, items)
    assert result.values == [1.0]
    captured = capfd.readouterr()
    err = captured.err
    assert captured.out.splitlines() == ["printed: START" + "y" * 1986 + "... (998015 more characters)", "next line"]
    assert "Timeout during parsing: STARTyyy" in err and "failed on" in err and "cannot parse STARTyyy" in err, [
        line[:100] for line in err.splitlines()
    ]
    assert "more characters)" in err
    assert len(err) < 20_000, len(err)


# -- item 22: every command fails on bad input before importing heavy libraries -------------

PROBE = """
import sys, time
from rlvr_plugins.cli import main
started = time.perf_counter()
code = main(sys.argv[1:])
print(f"EXIT {code} {time.perf_counter() - started:.3f} " +
      ",".join(m for m in ("torch", "trl", "transformers", "datasets", "matplotlib") if m in sys.modules))
"""


def bad_inputs(tmp_path: Path) -> list[list[str]]:
    bad = write(tmp_path / "bad.yaml", MINIMAL + "trainer: {max_steps: ten}\n")
    missing_data = write(
        tmp_path / "nodata.yaml",
        MINIMAL.replace("source: synthetic, task: arithmetic", "source: jsonl, path: nope.jsonl"),
    )
    rows = write(tmp_path / "rows.jsonl", json.dumps(ROW) + "\n")
    unknown_plugin = write(
        tmp_path / "unknown.yaml", MINIMAL.replace("r1-accuracy: {}", "r1-acuracy: {}") + "sft: {}\n"
    )
    bad_option = write(
        tmp_path / "option.yaml", MINIMAL.replace("r1-accuracy: {}", "r1-accuracy: {weight: abc}") + "sft: {}\n"
    )
    cases = []
    for command in ("train", "eval", "sft", "filter", "distill", "score"):
        files = [str(rows)] if command == "score" else []
        cases += [[command, "nope.yaml", *files], [command, str(bad), *files]]
        cases += [[command, str(unknown_plugin), *files], [command, str(bad_option), *files]]
        cases += [] if command == "score" else [[command, str(missing_data)]]  # score reads no data section
    cases += [
        ["score", str(SMOKE), "nope.jsonl"],
        ["score", str(SMOKE), str(rows), "--output", str(tmp_path)],
        ["train", str(SMOKE), "--set", "trainer.max_steps=[1"],
        ["plugins", "--config", "nope.yaml"],
        ["compare", str(tmp_path / "nope")],
        ["audit", "--draws", "1"],
        ["sft", str(write(tmp_path / "nosft.yaml", MINIMAL))],
        ["filter", str(write(tmp_path / "nomodel.yaml", MINIMAL.replace("model: {tiny: {}}\n", "")))],
    ]
    return cases


def test_every_command_fails_fast_without_heavy_imports(tmp_path):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    for args in bad_inputs(tmp_path):
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path
        )
        elapsed = time.perf_counter() - started
        assert result.stdout.startswith("EXIT 2 "), (args, result.stdout, result.stderr[-2000:])
        _, _, in_main, heavy = (result.stdout.strip() + " ").split(" ", 3)
        assert heavy.strip() == "", (args, heavy)
        assert result.stderr.startswith("rlvr: error: ") and "Traceback" not in result.stderr, (args, result.stderr)
        assert result.stderr.count("\n") == 1, (args, result.stderr)
        assert float(in_main) < 1.0 and elapsed < 2.0, (args, in_main, elapsed)


def test_check_notes_a_data_file_that_an_earlier_stage_writes(tmp_path, capsys):
    path = write(
        tmp_path / "c.yaml", MINIMAL.replace("source: synthetic, task: arithmetic", "source: jsonl, path: later.jsonl")
    )
    assert cli.main(["train", str(path), "--check"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"note: {path}:2: data.train.path: data file 'later.jsonl' does not exist (relative paths are tried from "
        "the current directory, then from the config file's folder); the run needs it when it starts"
    )


# -- files that are not regular files: a FIFO, a device, a symbolic-link loop ---------------


@pytest.fixture
def odd_files(tmp_path):
    """A FIFO (reading it would block until a writer comes), /dev/zero (never ends) and a
    symbolic-link loop, with the reason each one is refused."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    special = "is not a regular file (a FIFO, device or socket); give a file"
    return [(str(fifo), special), ("/dev/zero", special), (str(tmp_path / "a"), "is a symbolic-link loop")]


def test_a_config_that_is_a_fifo_device_or_link_loop_is_refused_at_once(odd_files, capsys):
    for path, why in odd_files:
        assert cli.main(["train", path, "--check"]) == 2
        assert error_of(capsys) == f"rlvr: error: invalid config: config file {path!r} {why}\n"


def test_completions_that_are_a_fifo_device_or_link_loop_are_refused_at_once(tmp_path, odd_files, capsys):
    config = write(tmp_path / "c.yaml", MINIMAL)
    for path, why in odd_files:
        assert cli.main(["score", str(config), path]) == 2
        assert error_of(capsys) == f"rlvr: error: data file {path!r} {why}\n"


def test_a_data_path_that_is_a_fifo_is_named_by_check(tmp_path, odd_files, capsys):
    """--check only notes a data file it cannot read (it may be made before the run), saying why."""
    fifo = odd_files[0][0]
    config = write(
        tmp_path / "c.yaml",
        MINIMAL.replace("{source: synthetic, task: arithmetic}", f"{{source: jsonl, path: {fifo}}}"),
    )
    assert cli.main(["train", str(config), "--check"]) == 0
    assert (
        f"note: {config}:2: data.train.path: data file {fifo!r} is not a regular file (a FIFO, device or "
        "socket); give a file; the run needs it when it starts\n"
    ) in "".join(capsys.readouterr())


# -- plugin options: a float option is a finite float ----------------------------------------


@pytest.mark.parametrize("weight, shown_as", [(".inf", "inf"), (".nan", "nan"), ("-.inf", "-inf"), ("1e400", "inf")])
def test_a_non_finite_float_option_is_a_one_line_error(tmp_path, capsys, weight, shown_as):
    path = write(tmp_path / "c.yaml", MINIMAL.replace("r1-accuracy: {}", f"r1-accuracy: {{weight: {weight}}}"))
    assert cli.main(["train", str(path), "--check"]) == 2
    err = error_of(capsys)
    assert err.startswith(
        f"rlvr: error: {path}:3: plugin 'r1-accuracy': option 'weight' must be float (finite), got {shown_as}. "
        "Valid options: weight (float, default 1.0);"
    )
    assert err.count("\n") == 1


def test_an_int_option_past_the_float_range_is_a_one_line_error(tmp_path, capsys):
    path = write(tmp_path / "c.yaml", MINIMAL.replace("r1-accuracy: {}", "r1-accuracy: {weight: 1" + "0" * 400 + "}"))
    assert cli.main(["train", str(path), "--check"]) == 2
    assert error_of(capsys).startswith(
        f"rlvr: error: {path}:3: plugin 'r1-accuracy': option 'weight' must be float (finite), got 1000"
    )


def test_plugin_option_errors_name_the_file_and_line_of_the_option(tmp_path, capsys):
    """Issue 26: a plugin's option error said which plugin and option, but not where in the config it is."""
    text = "model: {tiny: {}}\ndata: {train: {source: synthetic, task: arithmetic}}\nplugins:\n"
    text += "  r1-accuracy: {}\n  r1-format:\n    think_opened: false\n    wieght: 2\n"
    path = write(tmp_path / "c.yaml", text)
    assert cli.main(["train", str(path), "--check"]) == 2
    assert error_of(capsys).startswith(f"rlvr: error: {path}:7: plugin 'r1-format': unknown option 'wieght' (did")
    assert cli.main(["train", str(path), "--check", "--set", "plugins.r1-format={weight: x}"]) == 2
    assert error_of(capsys).startswith("rlvr: error: plugin 'r1-format': option 'weight' must be float, got 'x'")
    both = text.replace("r1-accuracy: {}", "r1-accuracy:\n    weight: [1]")
    path = write(tmp_path / "c.yaml", both)
    assert cli.main(["score", str(path), str(write(tmp_path / "r.jsonl", json.dumps(ROW) + "\n"))]) == 2
    assert error_of(capsys).splitlines()[1:] == [
        f"  - {path}:5: plugin 'r1-accuracy': option 'weight' must be float, got [1]. Valid options: weight (float, "
        "default 1.0); answer_column (str, default 'answer'); think_opened (bool, default False); fallback (one of "
        "'gsm8k' or null, default 'gsm8k'); time_budget_s (float, default 5.0)",
        f"  - {path}:8: plugin 'r1-format': unknown option 'wieght' (did you mean 'weight'?). Valid options: weight "
        "(float, default 1.0); think_opened (bool, default False)",
    ]


@pytest.mark.parametrize(
    "flag, value, product",
    [
        ("--prompts", "99999999999", "4000 x 99999999999 x 8 = 3199999999968000"),
        ("--generations", "4194305", "4000 x 8 x 4194305 = 134217760000"),
    ],
)
def test_an_audit_too_large_for_memory_is_refused_before_any_work(tmp_path, capsys, flag, value, product):
    """Was a raw MemoryError (numpy) after the imports; now one line, and no output folder."""
    assert cli.main(["audit", flag, value, "--output", str(tmp_path / "out")]) == 2
    assert error_of(capsys) == (
        "rlvr: error: invalid config in rlvr audit: --draws x --prompts x --generations must "
        f"be at most 134217728 (about 1 GiB of draws), got {product}\n"
    )
    assert not (tmp_path / "out").exists()


def test_a_run_folder_config_with_a_value_shared_by_two_keys_reads_back_without_aliases():
    """A config built in Python may share one dict between keys (both splits' ``options``);
    the run folder's ``config.yaml`` must still be a config that the loader (no aliases) reads."""
    from rlvr_plugins.train.config import dump_public, parse_yaml

    options = {"min_digits": 1, "max_digits": 2}
    config = {
        "data": {
            "train": {"task": "arithmetic", "options": options},
            "eval": {"task": "arithmetic", "options": options},
        },
        "_lines": {},
    }
    text = dump_public(config)
    assert "*" not in text and "&" not in text
    value, _ = parse_yaml(text, "config.yaml")
    assert value == {
        "data": {
            "train": {"task": "arithmetic", "options": options},
            "eval": {"task": "arithmetic", "options": options},
        }
    }


# -- issue 21, item 10: integers past Python's digit limit, numbers past the float range ---------------------------

HUGE_INT = "7" * 5000


@pytest.mark.parametrize("command", ["train", "eval", "sft", "filter", "distill", "score"])
def test_an_integer_of_five_thousand_digits_in_a_jsonl_value_is_one_line_naming_file_and_line(
    tmp_path, capsys, monkeypatch, command
):
    monkeypatch.setattr("rlvr_plugins.train.modeling.load_model", lambda *a, **k: pytest.fail("model loaded"))
    rows = write(tmp_path / "rows.jsonl", json.dumps(ROW) + "\n" + json.dumps(ROW)[:-1] + f', "n": {HUGE_INT}}}\n')
    config = write(
        tmp_path / "c.yaml",
        "model: {tiny: {}}\n"
        f"data: {{train: {{source: jsonl, path: {rows}}}, eval: {{source: jsonl, path: {rows}}}}}\n"
        f"plugins: {{r1-accuracy: {{}}}}\nsft: {{examples: 1}}\noutput_dir: {tmp_path / 'out'}\n",
    )
    args = [command, str(config), *([str(rows)] if command == "score" else [])]
    assert cli.main(args) == 2
    assert error_of(capsys) == (
        f"rlvr: error: {rows}:2: an integer of 5000 digits, more than Python reads (4300); no number in a JSONL "
        "value needs that many: write it as a string if it is one\n"
    )


def test_an_integer_of_five_thousand_digits_in_the_config_or_set_is_one_line(tmp_path, capsys):
    config = write(tmp_path / "c.yaml", MINIMAL + f"seed: {HUGE_INT}\n")
    assert cli.main(["train", str(config), "--check"]) == 2
    assert error_of(capsys) == (
        f"rlvr: error: invalid config: {config}:4: not valid YAML: an integer of 5000 digits, more than Python reads "
        "(4300); no number in a config needs that many: write it as a string if it is one (column 7)\n"
    )
    assert cli.main(["train", str(SMOKE), "--check", "--set", f"seed={HUGE_INT}"]) == 2
    err = error_of(capsys)
    assert err.count("\n") == 1 and "an integer of 5000 digits, more than Python reads (4300)" in err


def test_compare_on_metrics_with_a_huge_integer_is_one_line_and_an_integer_past_the_float_range_is_skipped(
    tmp_path, capsys
):
    for name, value in (("a", "1"), ("b", "9" * 400), ("c", HUGE_INT)):
        (tmp_path / name).mkdir()
        write(tmp_path / name / "metrics.jsonl", f'{{"step": 1, "loss": 0.5, "reward": {value}}}\n')
    out = tmp_path / "cmp"
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--output", str(out)]) == 0
    error_of(capsys)
    assert json.loads((out / "compare.json").read_text())  # 10**400 is no float: left out like inf
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "c"), "--output", str(out)]) == 2
    assert error_of(capsys) == (
        f"rlvr: error: {tmp_path / 'c'}: metrics.jsonl cannot be read: {tmp_path / 'c' / 'metrics.jsonl'}:1: an "
        "integer of 5000 digits, more than Python reads (4300); no number in a JSONL value needs that many: write it "
        "as a string if it is one\n"
    )


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        (
            "trainer.temperature=0",
            "trainer.temperature must be a number > 0 (GRPO samples at this temperature; 0 divides by zero), got 0",
        ),
        (
            "trainer.max_completion_length=0",
            "trainer.max_completion_length must be an integer >= 1 (tokens per completion), or null, got 0",
        ),
        ("model.tiny.hidden_size=0", "model.tiny.hidden_size must be an integer >= 1, got 0"),
        ("model.tiny.num_hidden_layers=-2", "model.tiny.num_hidden_layers must be an integer >= 1, got -2"),
        ("trainer.top_p=1.5", "trainer.top_p must be a number in (0, 1], got 1.5"),
        ("trainer.per_device_train_batch_size=0", "trainer.per_device_train_batch_size must be an integer >= 1, got 0"),
        ("sft.max_length=0", "sft.max_length must be an integer >= 1 (tokens per example), or null, got 0"),
    ],
)
def test_check_refuses_values_of_the_right_type_that_would_fail_after_the_sft(capsys, monkeypatch, override, problem):
    monkeypatch.setattr("rlvr_plugins.train.modeling.load_model", lambda *a, **k: pytest.fail("model loaded"))
    assert cli.main(["train", str(SMOKE), "--check", "--set", override]) == 2
    assert error_of(capsys) == f"rlvr: error: invalid config in {SMOKE}: {problem}\n"


# -- today's surfaces: environments, the rollout pool, prime-length, the agentic task ------------------------

AGENTIC = ", tokenizer: char-agentic"


def surface_config(plugins: str, task: str = "arithmetic", options: str = "", model: str = "") -> str:
    return (
        f"model: {{tiny: {{}}{model}}}\ndata: {{train: {{source: synthetic, task: {task}, size: 16{options}}}}}\n"
        f"plugins: {{r1-accuracy: {{}}, {plugins}}}\n"
    )


DDS_VALID = "max_rounds (an integer from 1 to 100, default 3)"
SURFACE_CASES = {
    "dds max_rounds negative": (
        "dapo-dynamic-sampling: {max_rounds: -1}",
        "'max_rounds' must be an integer from 1 to 100, got -1",
        DDS_VALID,
    ),
    "dds max_rounds zero": (
        "dapo-dynamic-sampling: {max_rounds: 0}",
        "'max_rounds' must be an integer from 1 to 100, got 0",
        DDS_VALID,
    ),
    "dds max_rounds str": ("dapo-dynamic-sampling: {max_rounds: three}", "got 'three'", DDS_VALID),
    "dds max_rounds bool": (
        "dapo-dynamic-sampling: {max_rounds: true}",
        "'max_rounds' must be an integer from 1 to 100, got True",
        DDS_VALID,
    ),
    "dds max_rounds float": ("dapo-dynamic-sampling: {max_rounds: 2.5}", "got 2.5", DDS_VALID),
    "dds max_rounds huge": (
        "dapo-dynamic-sampling: {max_rounds: 1000000000000000000000}",
        "from 1 to 100, got 1000000000000000000000",
        DDS_VALID,
    ),
    "dds max_group_age": (
        "dapo-dynamic-sampling: {max_group_age: -1}",
        "'max_group_age' must be an integer >= 0, got -1",
        DDS_VALID,
    ),
    "dds skip_streak": (
        "dapo-dynamic-sampling: {skip_streak: -1}",
        "'skip_streak' must be an integer >= 0, got -1",
        DDS_VALID,
    ),
    "dds recheck below": (
        "dapo-dynamic-sampling: {recheck_probability: -0.1}",
        "must be a number in [0, 1], got -0.1",
        DDS_VALID,
    ),
    "dds recheck above": (
        "dapo-dynamic-sampling: {recheck_probability: 1.5}",
        "must be a number in [0, 1], got 1.5",
        DDS_VALID,
    ),
    "dds recheck nan": ("dapo-dynamic-sampling: {recheck_probability: .nan}", "(finite), got nan", DDS_VALID),
    "dds recheck str": ("dapo-dynamic-sampling: {recheck_probability: half}", "got 'half'", DDS_VALID),
    "dds recheck bool": ("dapo-dynamic-sampling: {recheck_probability: true}", "got True", DDS_VALID),
    "dds keep_leftovers": (
        "dapo-dynamic-sampling: {keep_leftovers: maybe}",
        "'keep_leftovers' must be bool",
        DDS_VALID,
    ),
    "dds unknown": ("dapo-dynamic-sampling: {max_round: 3}", "did you mean 'max_rounds'?", DDS_VALID),
    "calculator zero": (
        "calculator: {max_digits: 0}",
        "'max_digits' must be an integer from 1 to 10000, got 0",
        "Valid options: max_digits",
    ),
    "calculator huge": (
        "calculator: {max_digits: 1000000000000000000000}",
        "from 1 to 10000",
        "Valid options: max_digits",
    ),
    "calculator str": ("calculator: {max_digits: many}", "got 'many'", "Valid options: max_digits"),
    "python time_s": (
        "python: {time_s: 0}",
        "'time_s' must be a number of seconds in (0, 600]",
        "Valid options: time_s",
    ),
    "python memory_mb": ("python: {memory_mb: 10}", "'memory_mb' must be an integer >= 64", "Valid options: time_s"),
    "python isolation": (
        "python: {isolation: docker}",
        "one of 'auto', 'namespaces', 'basic', got 'docker'",
        "plugin 'python'",
    ),
    "python output_limit_kb": (
        "python: {output_limit_kb: 0}",
        "'output_limit_kb' must be an integer >= 1",
        "plugin 'python'",
    ),
    "repair time_limit_s": (
        "code-repair: {time_limit_s: -1}",
        "time_limit_s must be > 0",
        "Valid options: time_limit_s",
    ),
    "repair time bool": (
        "code-repair: {time_limit_s: true}",
        "'time_limit_s' must be float, got True",
        "plugin 'code-repair'",
    ),
    "repair memory_mb": ("code-repair: {memory_mb: big}", "'memory_mb' must be int, got 'big'", "plugin 'code-repair'"),
    "repair max_file_kb": ("code-repair: {max_file_kb: 0}", "max_file_kb must be >= 1", "plugin 'code-repair'"),
    "repair max_report_chars": (
        "code-repair: {max_report_chars: 5}",
        "max_report_chars must be >= 100",
        "plugin 'code-repair'",
    ),
    "repair module_path": (
        "code-repair: {module_path: a/b.py}",
        "module_path must be a plain file name",
        "plugin 'code-repair'",
    ),
    "repair same paths": ("code-repair: {module_path: t.py, tests_path: t.py}", "must differ", "plugin 'code-repair'"),
    "prime no reward": ("prime-length: {}", "'correctness_reward' is required", "plugin 'prime-length'"),
    "prime unknown reward": (
        "prime-length: {correctness_reward: nope}",
        "is not a reward of this run",
        "['r1-accuracy']",
    ),
    "prime weight negative": (
        "prime-length: {correctness_reward: r1-accuracy, weight: -1}",
        "finite number >= 0",
        "plugin 'prime-length'",
    ),
    "prime weight nan": (
        "prime-length: {correctness_reward: r1-accuracy, weight: .nan}",
        "(finite), got nan",
        "plugin 'prime-length'",
    ),
}
AGENTIC_CASES = {
    "agentic ops": ("{ops: '/'}", "ops must be made of '+', '-' and '*', got '/'"),
    "agentic min_digits": ("{min_digits: 0}", "1 <= min_digits <= max_digits, got min_digits=0, max_digits=3"),
    "agentic digits order": ("{min_digits: 3, max_digits: 2}", "got min_digits=3, max_digits=2"),
    "agentic digits str": ("{max_digits: four}", "max_digits='four'"),
    "agentic tool_rate": ("{tool_rate: 1.5}", "tool_rate must be a share in [0, 1], got 1.5"),
    "agentic slip": ("{slip: -0.1}", "slip must be a share in [0, 1], got -0.1"),
    "agentic slip str": ("{slip: some}", "slip must be a share in [0, 1], got 'some'"),
    "agentic unknown": ("{tools: 1}", "unknown agent task options: ['tools']; valid: ['max_digits'"),
}


def check_fails(tmp_path, capsys, text: str) -> str:
    path = write(tmp_path / "c.yaml", text + f"output_dir: {tmp_path / 'out'}\n")
    assert cli.main(["train", str(path), "--check"]) == 2
    err = error_of(capsys)
    assert err.count("\n") == 1 and err.startswith("rlvr: error: ")
    assert not (tmp_path / "out").exists()
    return err


@pytest.mark.parametrize("case", list(SURFACE_CASES))
def test_an_option_of_todays_plugins_is_refused_in_one_line(tmp_path, capsys, case):
    plugins, problem, valid = SURFACE_CASES[case]
    err = check_fails(tmp_path, capsys, surface_config(plugins))
    assert f"plugin '{plugins.split(':')[0]}'" in err and problem in err and valid in err


@pytest.mark.parametrize("case", list(AGENTIC_CASES))
def test_an_agentic_task_option_is_refused_in_one_line(tmp_path, capsys, case):
    options, problem = AGENTIC_CASES[case]
    text = surface_config("calculator: {}", "agentic", f", options: {options}", AGENTIC)
    err = check_fails(tmp_path, capsys, text)
    assert err.startswith("rlvr: error: invalid config: data.train.options: ") and problem in err


@pytest.mark.parametrize(
    ("plugins", "model", "problem"),
    [
        ("", AGENTIC, "model.tokenizer 'char-agentic' renders chat prompts with tool calls, but train row 0"),
        (
            "calculator: {}",
            AGENTIC,
            "plugin 'calculator' enables environment 'calculator', but train row 0 is rendered",
        ),
        ("calculator: {}", "", "the chat template of 'char' cannot render tool calls, but plugin 'calculator'"),
        ("python: {}", "", "the chat template of 'char' cannot render tool calls, but plugin 'python'"),
    ],
)
def test_plain_text_prompts_with_char_agentic_or_an_environment_are_refused(tmp_path, capsys, plugins, model, problem):
    assert problem in check_fails(tmp_path, capsys, surface_config(plugins, "arithmetic", model=model))


def test_rlvr_eval_refuses_a_config_with_an_environment(tmp_path, capsys, monkeypatch):
    import rlvr_plugins.cli.eval_cmd as eval_cmd

    monkeypatch.setattr(eval_cmd, "sample_rows", lambda *a, **k: pytest.fail("evaluated without the tool"))
    text = surface_config("calculator: {}", "agentic", model=AGENTIC) + f"output_dir: {tmp_path / 'out'}\n"
    path = write(
        tmp_path / "c.yaml",
        text.replace("data: {train:", "data: {eval: {source: synthetic, task: agentic, size: 4}, train:"),
    )
    assert cli.main(["eval", str(path)]) == 2
    err = error_of(capsys)
    assert err == (
        "rlvr: error: invalid config: rlvr eval decodes single-turn without tools, but the config enables the "
        "environment 'calculator' (plugin calculator); its numbers would leave the tool out. Episodes with the tool "
        "are evaluated inside rlvr train (eval.every_steps: eval/accuracy and eval/tools/call_frequency in "
        "metrics.jsonl)\n"
    )
    assert not (tmp_path / "out").exists()
