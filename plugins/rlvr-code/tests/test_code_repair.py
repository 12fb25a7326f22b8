"""The code-repair environment: its tools on honest and hostile calls, its reward, its clean-up."""

from __future__ import annotations

import gc
import inspect
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from rlvr_code.repair import CodeRepairEnv, CodeRepairOptions

EXAMPLES = pathlib.Path(__file__).parents[1] / "examples" / "repair.jsonl"
FIXED = "def add(a, b):\n    return a + b\n"
ROW = {"source": "def add(a, b):\n    return a - b\n", "tests": "assert add(2, 3) == 5\nassert add(-1, 1) == 0\n"}
QUICK = CodeRepairOptions(time_limit_s=2.0, total_time_s=3.0, max_file_kb=4)


@pytest.fixture
def env():
    env = CodeRepairEnv(QUICK)
    env.reset(**ROW)
    yield env
    env._close()


def test_the_tools_are_trls_tools_with_typed_arguments_and_docstrings():
    tools = {
        name: fn
        for name, fn in inspect.getmembers(CodeRepairEnv, inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    }
    assert sorted(tools) == ["read_file", "replace_file", "run_tests"]
    from transformers.utils import get_json_schema

    for fn in tools.values():
        get_json_schema(fn)  # what TRL renders in the prompt; raises on a missing type or argument description


def test_an_episode_reads_fixes_and_passes(env):
    assert env.read_file("solution.py") == ROW["source"]
    assert env.read_file("tests.py") == ROW["tests"]
    assert env.run_tests().startswith("failed:\n") and "assert add(2, 3) == 5" in env.run_tests()
    assert env.get_reward() == 0.0
    assert env.replace_file("solution.py", FIXED) == f"wrote {len(FIXED)} bytes to solution.py"
    assert env.read_file("./solution.py") == FIXED
    assert env.run_tests() == "passed"
    assert env.get_reward() == 1.0


def test_the_reward_is_the_final_state_without_a_test_run(env):
    env.replace_file("solution.py", FIXED)
    assert env.get_reward() == 1.0
    env.replace_file("solution.py", ROW["source"])
    assert env.get_reward() == 0.0


@pytest.mark.parametrize(
    "path", ["../solution.py", "/etc/passwd", "../../etc/passwd", "sub/solution.py", "", "solution.py\x00", 3, None]
)
def test_paths_outside_the_repository_are_refused(env, path):
    with pytest.raises(ValueError, match=r"no file .* in the repository; its files are solution.py, tests.py"):
        env.read_file(path)
    with pytest.raises(ValueError, match="no file"):
        env.replace_file(path, FIXED)


def test_a_file_over_the_limit_is_refused_and_the_module_kept(env):
    with pytest.raises(ValueError, match=r"content is 4097 bytes, over the limit of 4096 bytes"):
        env.replace_file("solution.py", "#" * 4097)
    assert env.read_file("solution.py") == ROW["source"]
    with pytest.raises(ValueError, match="content must be a string, got int"):
        env.replace_file("solution.py", 5)


def test_the_tests_cannot_be_deleted_or_edited(env):
    with pytest.raises(ValueError, match="tests.py is read-only: fix solution.py instead"):
        env.replace_file("tests.py", "")
    # a module that deletes or rewrites the tests at import, then exits cleanly, still fails them
    hostile = "import os, sys\nfor f in os.listdir('.'):\n    open(f, 'w').close()\nsys.exit(0)\n"
    env.replace_file("solution.py", hostile)
    assert env.run_tests().startswith("failed")
    assert env.get_reward() == 0.0
    assert env.read_file("tests.py") == ROW["tests"]


def test_an_infinite_loop_is_a_failed_run_within_the_deadline():
    env = CodeRepairEnv(CodeRepairOptions(time_limit_s=1.0, total_time_s=1.5))
    env.reset(**ROW)
    env.replace_file("solution.py", "def add(a, b):\n    while True:\n        pass\n")
    start = time.monotonic()
    report = env.run_tests()
    # the wall-clock ceiling or the CPU rlimit (ceil(1.5 s)) stops it first, whichever the machine's load decides
    assert report == "failed: the tests did not finish within 1.5s" or "ran past its limits of 1.5s" in report
    assert time.monotonic() - start < 1.5 + 5.0
    env.replace_file("solution.py", "while True:\n    pass\n")  # hangs at import, before any test
    assert env.run_tests().startswith("failed")
    env._close()


def test_a_syntax_error_is_reported_with_its_line(env):
    env.replace_file("solution.py", "def add(a, b):\n    return a +\n")
    assert env.run_tests() == "failed: solution.py line 2: SyntaxError: invalid syntax"
    assert env.get_reward() == 0.0


def test_a_long_report_is_cut_to_max_report_chars(env):
    env.replace_file("solution.py", "def add(a, b):\n    raise ValueError('x' * 100000)\n")
    report = env.run_tests()
    assert report.startswith("failed") and "[...]" in report and len(report) <= QUICK.max_report_chars + 7


def test_the_working_directory_is_removed_on_reset_and_when_collected():
    env = CodeRepairEnv(QUICK)
    env.reset(**ROW)
    first = env._workdir
    assert sorted(os.listdir(first)) == ["solution.py", "tests.py"]
    env.reset(**ROW)
    assert not os.path.exists(first) and os.path.isdir(env._workdir)
    second = env._workdir
    del env
    gc.collect()
    assert not os.path.exists(second)


def test_the_working_directories_are_removed_when_the_process_exits(tmp_path):
    script = "from rlvr_code.repair import CodeRepairEnv\nimport sys\n" + (
        f"envs = [CodeRepairEnv(), CodeRepairEnv()]\nfor e in envs:\n    e.reset(**{ROW!r})\n"
        "print(*[e._workdir for e in envs], flush=True)\nsys.exit(0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env={**os.environ, "TMPDIR": str(tmp_path)}
    )
    workdirs = done.stdout.split()
    assert done.returncode == 0 and len(workdirs) == 2 and all(w.startswith(str(tmp_path)) for w in workdirs)
    assert not any(os.path.exists(w) for w in workdirs)


def test_the_working_directory_of_a_crashed_process_is_swept_by_the_next_sandbox_run(tmp_path):
    script = "from rlvr_code.repair import CodeRepairEnv\nimport os, sys\n" + (
        f"e = CodeRepairEnv()\ne.reset(**{ROW!r})\nprint(e._workdir, flush=True)\nos._exit(9)\n"
    )
    env_vars = {**os.environ, "TMPDIR": str(tmp_path)}
    left = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env_vars)
    workdir = left.stdout.strip()
    assert left.returncode == 9 and os.path.isdir(workdir)  # os._exit: no finalizer ran
    sweep = "from rlvr_code.sandbox import remove_stale_dirs\nprint(remove_stale_dirs())"
    subprocess.run([sys.executable, "-c", sweep], check=True, env=env_vars)
    assert not os.path.exists(workdir)


def test_a_row_without_tests_is_refused_naming_the_columns():
    with pytest.raises(ValueError, match=r"column 'source' .* column 'tests'"):
        CodeRepairEnv(QUICK).reset(source="x = 1\n")
    with pytest.raises(ValueError, match="uses no function of the program"):
        CodeRepairEnv(QUICK).reset(source="x = 1\n", tests="assert 1 == 1\n")


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="module_path must be a plain file name, got '../x.py'"):
        CodeRepairOptions(module_path="../x.py")
    with pytest.raises(ValueError, match="total_time_s must be > 0"):
        CodeRepairOptions(total_time_s=0)
    with pytest.raises(ValueError, match="module_path and tests_path must differ"):
        CodeRepairOptions(module_path="tests.py")


def test_the_example_rows_fail_as_given():
    rows = [json.loads(line) for line in EXAMPLES.read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= 5
    env = CodeRepairEnv(QUICK)
    for row in rows:
        assert isinstance(row["prompt"], list)
        env.reset(**row)
        assert env.get_reward() == 0.0, row["source"]
    env._close()


def test_a_test_run_that_does_not_answer_is_killed_and_the_episode_goes_on(env, monkeypatch):
    import rlvr_code.fresh as fresh

    monkeypatch.setattr(fresh, "GRACE_S", 0.05 - QUICK.total_time_s)  # a 50 ms deadline: never met
    with pytest.raises(fresh.FreshRunError, match=r"the run did not answer within 0.05s and was killed"):
        env.run_tests()
    assert env.get_reward() is None  # the sandbox failed, not the policy: no score
    monkeypatch.undo()
    env.replace_file("solution.py", FIXED)
    assert env.run_tests() == "passed"


@pytest.mark.skipif(
    not hasattr(__import__("rlvr_plugins.hookspecs").hookspecs, "rlvr_environments"),
    reason="the rlvr_environments hook is not in this rlvr-plugins yet",
)
def test_the_plugin_registers_the_environment_with_its_options():
    from rlvr_plugins.manager import build_plugin_set

    [(owner, environment)] = build_plugin_set({"code-repair": {"max_file_kb": 1}}).environments()
    assert (owner, environment.name) == ("code-repair", "code-repair")
    env = environment.factory()
    env.reset(**ROW)
    with pytest.raises(ValueError, match="over the limit of 1024 bytes"):
        env.replace_file("solution.py", "#" * 1025)
    env._close()
