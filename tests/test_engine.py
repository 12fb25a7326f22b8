from __future__ import annotations

import functools
import io
import logging
import math
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import engine_fixtures as fx  # noqa: E402
from rlvr_plugins.engine import (  # noqa: E402
    RewardContractError,
    RewardEngine,
    RewardPluginFailing,
    ScoreResult,
)

TIMEOUT = 1.0
SLACK = 1.5  # deadline + kill + reap on a busy 2-core machine


def engine(**kwargs) -> RewardEngine:
    return RewardEngine(**{"num_workers": 2, "timeout_s": TIMEOUT, **kwargs})


def warm(e: RewardEngine, name: str, fn, item) -> None:
    """Start the workers and load fn in both, so timings below measure scoring only."""
    assert not any(e.score(name, fn, [dict(item), dict(item)]).failed)


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def timed_score(e, name, fn, items):
    start = time.monotonic()
    result = e.score(name, fn, items)
    return result, time.monotonic() - start


# ------------------------------------------------------------------ values


def test_values_and_order_across_two_workers():
    with engine() as e:
        result = e.score("double", fx.double, [{"x": i} for i in range(200)])
        assert isinstance(result, ScoreResult)
        assert result.values == [2.0 * i for i in range(200)]
        assert result.failed == [False] * 200 and result.errors == [None] * 200

        result = e.score("maybe", fx.none_if_multiple_of_3, [{"x": i} for i in range(200)])
        for i, (value, failed) in enumerate(zip(result.values, result.failed)):
            assert failed is False
            assert math.isnan(value) if i % 3 == 0 else value == float(i)
        assert e.stats["calls"] == 400 and e.stats["failures"] == 0


def test_contiguous_chunks_keep_groups_on_one_worker():
    with engine() as e:
        warm(e, "pids", fx.slow_pid, {"x": 0})
        pids = e.score("pids", fx.slow_pid, [{"x": i} for i in range(40)]).values
    assert len(set(pids)) == 2
    switches = sum(a != b for a, b in zip(pids, pids[1:]))
    assert switches <= 3, pids
    assert pids[0] != pids[-1]


def test_large_items_round_trip():
    items = [{"value": float(i), "text": "\u00e9" * 50_000 + str(i)} for i in range(100)]
    with engine() as e:
        result = e.score("big", fx.returns_value, items)
    assert result.values == [float(i) for i in range(100)] and not any(result.failed)


def test_partial_callable_instance_and_accepted_scalars():
    np = pytest.importorskip("numpy")
    with engine() as e:
        assert e.score("add", functools.partial(fx.add, b=1), [{"a": 1}, {"a": 2}]).values == [2.0, 3.0]
        assert e.score("scaled", fx.Scaled(3), [{"x": 1}, {"x": 2}]).values == [3.0, 6.0]
        values = [np.float32(0.5), np.int64(3), np.bool_(True), True, 7, 1e30, np.array(2.0)]
        result = e.score("scalars", fx.returns, [{"value": v} for v in values])
        assert result.values == [0.5, 3.0, 1.0, 1.0, 7.0, 1e30, 2.0]
        assert all(type(v) is float for v in result.values)


def test_function_is_shipped_once_per_worker():
    scorer = fx.CountsLoads()
    with engine(num_workers=1) as e:
        first = e.score("loads", scorer, [{"x": i} for i in range(40)])
        second = e.score("loads", scorer, [{"x": i} for i in range(40)])
    assert first.values == second.values == [1.0] * 40


def test_empty_items():
    with engine() as e:
        assert e.score("double", fx.double, []) == ScoreResult([], [], [])


# ------------------------------------------------------------------ deadlines


def test_sleeping_item_is_killed_at_the_deadline_and_the_worker_replaced():
    with engine() as e:
        warm(e, "sleepy", fx.sleep_if, {"x": 0})
        items = [{"x": i, "hang": i == 3} for i in range(10)]
        result, elapsed = timed_score(e, "sleepy", fx.sleep_if, items)
        assert elapsed < TIMEOUT + SLACK
        assert result.failed == [i == 3 for i in range(10)]
        assert result.errors[3] == "timeout after 1s"
        assert math.isnan(result.values[3])
        assert [v for i, v in enumerate(result.values) if i != 3] == [float(i) for i in range(10) if i != 3]
        assert e.stats["timeouts"] == 1 and e.stats["workers_restarted"] == 1

        again = e.score("sleepy", fx.sleep_if, [{"x": i} for i in range(10)])
        assert again.values == [float(i) for i in range(10)] and not any(again.failed)


def test_gil_holding_big_integer_power_is_killed():
    with engine() as e:
        warm(e, "bigint", fx.big_power_if, {"x": 0})
        result, elapsed = timed_score(e, "bigint", fx.big_power_if, [{"x": 1}, {"x": 2, "hang": True}, {"x": 3}])
        assert elapsed < TIMEOUT + SLACK
        assert result.failed == [False, True, False]
        assert result.values[0] == 1.0 and result.values[2] == 3.0


def test_math_verify_on_adversarial_latex_returns_within_the_deadline():
    pytest.importorskip("math_verify")
    timeout = 2.0
    tower = "$2^{2^{2^{2^{2^{100}}}}}$"
    scorer = fx.MathVerifyUnguarded()
    with engine(num_workers=1, timeout_s=timeout) as e:
        assert e.score("math", scorer, [{"gold": "$1/2$", "pred": "$0.5$"}, {"gold": "$3$", "pred": "$4$"}]).values == [
            1.0,
            0.0,
        ]
        result, elapsed = timed_score(e, "math", scorer, [{"gold": "$1$", "pred": tower}])
    assert elapsed < timeout + SLACK
    assert result.failed == [True] and result.errors == ["timeout after 2s"]


def test_score_from_a_non_main_thread_with_a_hanging_item():
    box = {}
    with engine() as e:
        warm(e, "sleepy", fx.sleep_if, {"x": 0})

        def run():
            box["result"], box["elapsed"] = timed_score(e, "sleepy", fx.sleep_if, [{"x": 1, "hang": True}, {"x": 2}])

        thread = threading.Thread(target=run)
        thread.start()
        thread.join(TIMEOUT + 10)
        assert not thread.is_alive()
        assert box["elapsed"] < TIMEOUT + SLACK
        assert box["result"].failed == [True, False] and box["result"].values[1] == 2.0
        assert e.score("double", fx.double, [{"x": 4}]).values == [8.0]


def test_plugin_that_disarms_sigalrm_still_meets_the_deadline():
    with engine(num_workers=1) as e:
        result, elapsed = timed_score(e, "alarm", fx.disarm_alarm_then_hang, [{"x": 1}])
        assert result.failed == [True] and result.errors[0] == "timeout after 1s"
        assert elapsed < TIMEOUT + SLACK + 2.0  # includes starting the worker
        assert e.score("double", fx.double, [{"x": 1}]).values == [2.0]


def test_interrupt_in_the_parent_kills_busy_workers_and_leaves_the_engine_usable():
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with RewardEngine(num_workers=1, timeout_s=30) as e:
            warm(e, "sleepy", fx.sleep_if, {"x": 0})
            signal.setitimer(signal.ITIMER_REAL, 0.5)
            start = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                e.score("sleepy", fx.sleep_if, [{"x": 1, "hang": True}])
            assert time.monotonic() - start < 5
            assert e.score("sleepy", fx.sleep_if, [{"x": 2}]).values == [2.0]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ------------------------------------------------------------------ failures


@pytest.mark.parametrize(
    ("fn", "error"),
    [
        (fx.raise_value_error_if_negative, "ValueError: negative: -1"),
        (fx.raise_base_exception_if_negative, "PluginGaveUp: gave up"),
        (fx.sys_exit_if_negative, "SystemExit: 3"),
        (fx.hard_exit_if_negative, "worker process exited with code 1"),
        (fx.segfault_if_negative, "worker process killed by SIGSEGV"),
    ],
    ids=["ValueError", "BaseException", "SystemExit", "os._exit", "segfault"],
)
def test_failing_item_is_reported_and_the_engine_keeps_working(fn, error):
    with engine(num_workers=1) as e:
        result = e.score("bad", fn, [{"x": -1}])
        assert result.failed == [True] and result.errors == [error] and math.isnan(result.values[0])
        assert e.stats["failures"] == 1 and e.stats["calls"] == 1
        assert e.score("bad", fn, [{"x": i} for i in range(5)]).values == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_crash_in_the_middle_of_a_batch_requeues_the_rest():
    items = [{"x": -1 if i in (5, 12) else i} for i in range(20)]
    with engine(num_workers=1) as e:
        result = e.score("crashy", fx.hard_exit_if_negative, items)
        assert result.failed == [i in (5, 12) for i in range(20)]
        assert [v for i, v in enumerate(result.values) if i not in (5, 12)] == [
            float(i) for i in range(20) if i not in (5, 12)
        ]
        assert e.stats["workers_restarted"] == 2 and e.stats["timeouts"] == 0


def test_item_that_cannot_be_unpickled_in_the_worker_fails_its_batch_only():
    items = [{"value": float(i)} for i in range(40)]
    items[20] = {"value": fx.OnlyInParent()}
    with engine(num_workers=1) as e:
        result = e.score("odd", fx.returns, items)
    failed = [i for i, f in enumerate(result.failed) if f]
    assert 20 in failed and failed == list(range(failed[0], failed[-1] + 1)) and len(failed) < 40
    assert "not available in the worker" in result.errors[20]
    assert [result.values[i] for i in range(40) if i not in failed] == [float(i) for i in range(40) if i not in failed]


def test_memory_limit_turns_a_runaway_allocation_into_a_failure():
    with engine(num_workers=1, memory_limit_mb=512) as e:
        result = e.score("alloc", fx.allocate_mb, [{"mb": 1}, {"mb": 4096}, {"mb": 2}])
    assert result.values[0] == 1024 * 1024 and result.values[2] == 2 * 1024 * 1024
    assert result.failed == [False, True, False] and result.errors[1].startswith("MemoryError")


def test_a_worker_that_ran_out_of_memory_is_replaced():
    """Each item keeps 64 MB: the worker runs out at some item k; that item fails (MemoryError), the
    worker is replaced, and the next item starts afresh (1.0): never two failures in a row."""
    items = [{"mb": 64}] * 24
    with engine(num_workers=1, memory_limit_mb=512, max_consecutive_failures=2) as e:
        result = e.score("hoard", fx.keep_mb, items)
        after = e.score("hoard", fx.keep_mb, [{"mb": 64}])
        restarted = e.stats["workers_restarted"]
    failures = [i for i, f in enumerate(result.failed) if f]
    assert failures and all(result.errors[i].startswith("MemoryError") for i in failures)
    k = failures[0]  # items kept before the limit: the same in every fresh worker
    assert failures == list(range(k, 24, k + 1))
    kept = [v for v, failed in zip(result.values, result.failed) if not failed]
    assert kept == [float(i % (k + 1) + 1) for i in range(24) if i % (k + 1) != k]
    assert after.values == [float(24 % (k + 1) + 1)] and restarted == len(failures)


# ------------------------------------------------------------------ contract


@pytest.mark.parametrize("in_process", [False, True], ids=["workers", "in-process"])
def test_wrong_type_is_a_contract_error_naming_the_plugin(in_process):
    with engine(num_workers=1, in_process=in_process, nonfinite="mask") as e:
        for bad in ["0.5", {"score": 1.0}, [1.0], 1 + 2j, b"1"]:
            with pytest.raises(RewardContractError) as info:
                e.score("my_reward", fx.returns, [{"value": 1.0}, {"value": bad}])
            message = str(info.value)
            assert "'my_reward'" in message and "item 1" in message and type(bad).__name__ in message
            assert "real number" in message
        assert e.score("my_reward", fx.returns, [{"value": 2}]).values == [2.0]


@pytest.mark.parametrize("in_process", [False, True], ids=["workers", "in-process"])
def test_non_finite_is_an_error_by_default_and_masked_on_request(in_process):
    values = [math.nan, math.inf, -math.inf, 10**400, -(10**400)]
    with engine(num_workers=1, in_process=in_process) as e:
        for value in values:
            with pytest.raises(RewardContractError, match="'acc'.*item 0.*finite"):
                e.score("acc", fx.returns, [{"value": value}])
    with engine(num_workers=1, in_process=in_process, nonfinite="mask") as e:
        result = e.score("acc", fx.returns, [{"value": v} for v in values] + [{"value": 0.25}])
        assert result.failed == [True] * 5 + [False] and result.values[5] == 0.25
        assert result.errors[:4] == [
            "non-finite value nan",
            "non-finite value inf",
            "non-finite value -inf",
            "non-finite value inf",
        ]


def test_unpicklable_function_is_a_contract_error():
    with engine(num_workers=1) as e:
        with pytest.raises(RewardContractError, match="'inline'.*cannot be pickled") as exc:
            e.score("inline", lambda x: x, [{"x": 1}])
    assert str(exc.value).endswith(
        "use a module-level function or class instance, or run rewards in the trainer's "
        "process, without workers or deadlines (config: engine: {in_process: true}; "
        "Python: RLVRTrainer(..., engine_options={'in_process': True}), or engines=Engines(in_process=True) "
        "with from rlvr_plugins.rewards import Engines)"
    )


# ------------------------------------------------------------------ consecutive failures


@pytest.mark.parametrize("in_process", [False, True], ids=["workers", "in-process"])
def test_consecutive_failures_raise_and_a_success_resets(in_process):
    with engine(num_workers=1, max_consecutive_failures=3, in_process=in_process) as e:
        fn = fx.raise_value_error_if_negative
        result = e.score("flaky", fn, [{"x": -1}, {"x": -2}, {"x": 1}, {"x": -3}, {"x": -4}])
        assert result.failed == [True, True, False, True, True]
        assert e.score("other", fn, [{"x": -5}, {"x": -6}]).failed == [True, True]
        with pytest.raises(RewardPluginFailing) as info:
            e.score("flaky", fn, [{"x": -7}, {"x": 8}])
        message = str(info.value)
        assert "'flaky'" in message and "3 consecutive" in message and "ValueError: negative: -7" in message
        assert e.score("flaky", fn, [{"x": 9}]).values == [9.0]


def test_consecutive_timeouts_raise_plugin_failing():
    with engine(num_workers=1, max_consecutive_failures=2, timeout_s=0.3) as e:
        with pytest.raises(RewardPluginFailing, match="timeout after 0.3s"):
            e.score("stuck", fx.sleep_if, [{"x": i, "hang": True} for i in range(5)])
        assert e.score("double", fx.double, [{"x": 2}]).values == [4.0]


@pytest.mark.parametrize("in_process", [False, True], ids=["workers", "in-process"])
def test_a_completion_over_max_completion_mb_gets_no_score_with_the_reason(in_process, caplog):
    """Issue 21, item 6: one huge input is refused before any work, in either mode; the others are scored."""
    mib = 1024 * 1024
    items = [
        {"completion": "ok"},
        {"completion": "x" * (2 * mib)},  # 2 MiB of ASCII
        {"completion": "é" * (mib // 2 + 1)},  # 2 bytes each in UTF-8: just over 1 MiB
        {"completion": "é" * (mib // 2)},  # exactly 1 MiB: allowed
        {"completion": [{"role": "assistant", "content": "y" * (3 * mib)}]},  # chat messages count too
    ]
    with engine(num_workers=1, max_completion_mb=1, max_consecutive_failures=1, in_process=in_process) as e:
        with caplog.at_level(logging.WARNING, logger="rlvr_plugins.engine"):
            result = e.score("size", fx.characters, items)
        assert result.values[0] == 2.0 and result.values[3] == mib // 2
        assert result.failed == [False, True, True, False, True]  # three refusals in a row did not stop the call
        assert result.errors[1] == (
            "the completion is 2.0 MiB of text, over max_completion_mb=1 (engine.max_completion_mb in a config): "
            "not scored"
        )
        assert result.errors[2].startswith("the completion is 1.0 MiB of text, over max_completion_mb=1")
        assert result.errors[4].startswith("the completion is 3.0 MiB of text")
        assert "reward size did not score item 1: the completion is 2.0 MiB" in caplog.text
        assert e.stats["failures"] == 3
    with engine(num_workers=1, in_process=in_process) as bare:  # a bare engine has no size limit
        assert bare.score("size", fx.characters, items[1:2]).values == [2.0 * mib]


# ------------------------------------------------------------------ in-process


def test_in_process_scores_and_catches_base_exceptions():
    with engine(in_process=True) as e:
        assert e.score("double", fx.double, [{"x": 1}, {"x": 2}]).values == [2.0, 4.0]
        result = e.score("base", fx.raise_base_exception_if_negative, [{"x": -1}])
        assert result.failed == [True] and result.errors == ["PluginGaveUp: gave up"]
        assert e.score("inline", lambda x: x + 1, [{"x": 1}]).values == [2.0]


# ------------------------------------------------------------------ logging


class _RaisingHandler(logging.Handler):
    def __init__(self):
        super().__init__()
        self.stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")
        self.lines = []

    def emit(self, record):
        line = self.format(record)
        self.stream.write(line + "\n")
        self.stream.flush()
        self.lines.append(line)

    def handleError(self, record):
        raise


def test_failure_log_is_safe_for_surrogates_nul_and_ansi():
    handler = _RaisingHandler()
    log = logging.getLogger("rlvr_plugins.engine")
    log.addHandler(handler)
    nasty = "bad \ud800 nul \x00 ansi \x1b[31mred" + "x" * 5000
    try:
        for in_process in (False, True):
            with engine(num_workers=1, in_process=in_process) as e:
                result = e.score("nasty\udfff", fx.raise_with_text, [{"text": nasty}])
                assert result.failed == [True]
                assert "\\ud800" in result.errors[0] and "\x00" not in result.errors[0]
                assert len(result.errors[0]) <= 300
    finally:
        log.removeHandler(handler)
    assert len(handler.lines) == 2
    for line in handler.lines:
        assert line.isascii() and "\x1b" not in line and "\x00" not in line
        assert "\\x1b[31m" in line and "\\ud800" in line and len(line) < 1000


# ------------------------------------------------------------------ torch


def test_parent_with_torch_threads_spawns_single_threaded_workers():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(2)
    torch.ones(256, 256) @ torch.ones(256, 256)
    with engine() as e:
        assert e.score("threads", fx.thread_env, [{"x": i} for i in range(4)]).values == [1.0] * 4
    with engine(in_process=True) as e:
        assert e.score("tensor", fx.returns, [{"value": torch.tensor(0.25)}]).values == [0.25]
        with pytest.raises(RewardContractError, match="'tensor'.*item 0"):
            e.score("tensor", fx.returns, [{"value": torch.tensor([0.25, 0.5])}])
    assert torch.get_num_threads() == 2


# ------------------------------------------------------------------ cleanup


def test_close_leaves_no_child_processes_and_kills_grandchildren(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    e = engine()
    pids = e.score("pid", fx.pid, [{"x": 0}, {"x": 1}]).values
    result = e.score("forks", fx.fork_sleeper_then_hang, [{"x": 1, "pid_file": str(pid_file)}])
    assert result.failed == [True]
    grandchild = int(pid_file.read_text())
    assert not alive(grandchild)
    e.close()
    e.close()
    assert not any(alive(int(p)) for p in pids)
    assert children_of(os.getpid()) == []
    assert multiprocessing.active_children() == []
    with pytest.raises(RuntimeError, match="closed"):
        e.score("pid", fx.pid, [{"x": 0}])


@pytest.mark.parametrize("hang", [True, False], ids=["hangs: masked, worker replaced", "returns, then close"])
def test_a_daemon_a_reward_started_dies_with_its_worker(tmp_path, hang):
    pid_file = tmp_path / "daemon.pid"
    e = engine(num_workers=1)
    worker = e.score("pid", fx.pid, [{"x": 0}]).values[0]
    result = e.score("daemon", fx.daemon_then, [{"x": 1, "pid_file": str(pid_file), "hang": hang}])
    assert result.failed == [hang]
    daemon = int(pid_file.read_text())
    if not hang:
        assert alive(daemon) and os.getsid(daemon) not in (os.getsid(0), worker)  # out of the worker's session
    e.close()
    assert not alive(daemon)


def test_garbage_collected_engine_kills_its_workers():
    e = engine()
    pids = e.score("pid", fx.pid, [{"x": 0}, {"x": 1}]).values
    del e
    import gc

    gc.collect()
    assert not any(alive(int(p)) for p in pids)


def test_workers_die_with_their_parent(tmp_path):
    script = textwrap.dedent(
        f"""
        import os, sys, threading, time
        sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(Path(__file__).parents[1] / "src")!r}]
        from rlvr_plugins.engine import RewardEngine
        import engine_fixtures as fx
        idle = RewardEngine(num_workers=1, timeout_s=60)
        busy = RewardEngine(num_workers=1, timeout_s=60)
        pids = [idle.score("pid", fx.pid, [{{"x": 0}}]).values[0], busy.score("pid", fx.pid, [{{"x": 0}}]).values[0]]
        print(" ".join(str(int(p)) for p in pids), flush=True)
        threading.Thread(target=busy.score, args=("s", fx.sleep_if, [{{"x": 1, "hang": True}}]), daemon=True).start()
        time.sleep(0.5)
        os._exit(0)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2, out.stderr
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids)


def test_invalid_options_are_rejected():
    for bad in ({"num_workers": 0}, {"timeout_s": 0}, {"nonfinite": "ignore"}, {"max_consecutive_failures": 0}):
        with pytest.raises(ValueError):
            RewardEngine(**bad)
