"""The ``code-tests`` reward plugin: a completion's Python program run against the row's tests."""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rlvr_plugins import Plugin, RewardExploit, RewardFunction, hookimpl
from rlvr_plugins.errors import ConfigError

from . import calls
from .cases import AssertTests, TestCase, extract_program, load_assert_tests, load_cases, outputs_match
from .exploits import CLASSES, CodeExploit
from .sandbox import Limits, RunResult, start_python

__all__ = ["CodeTestsOptions", "CodeTestsPlugin", "CodeTestsScorer", "STDIN_HARNESS", "CALLS_SOURCE"]

MIN_CASE_TIME_S = 0.05
# The channel's cost on the program's side, allowed on top of time_limit_s (measured by
# benchmarks/code_channel_cost.py, two runs at load 8 and 10-12 on 2 cores: 16-27 us per call,
# 3.2-4.8 ms per MB of str, 21-30 ms per MB of a list of small ints; allowed: 3.3-6 times that).
CHANNEL_S_PER_CALL = 100e-6
CHANNEL_S_PER_MB = 0.1

STDIN_HARNESS = f"""\
import _thread, builtins, os, sys
builtins.exit = builtins.quit = sys.exit  # normally added by the site module, which -S skips
_thread.stack_size({calls.THREAD_STACK})  # else glibc gives each thread RLIMIT_STACK (256 MB) of address space
sys.set_int_max_str_digits(0)  # big-number answers print as on the judges the datasets came from (Python < 3.11)
{calls.FORK_FOR_FORKSERVER}_null = os.open(os.devnull, os.O_WRONLY)
os.dup2(_null, 2)  # stderr is not looked at: debug output must not hit the file cap
os.close(_null)
sys.argv[:] = ["solution.py"]
del _thread, builtins, os, sys, _null
__file__ = "solution.py"
exec(compile(open("solution.py", encoding="utf-8").read(), "solution.py", "exec"))
"""

CALLS_SOURCE = Path(calls.__file__).read_text(encoding="utf-8")  # run as it is in both sandboxes of an assert test


# Bounds that every limit fits in: the kernel's rlimits and the clock take C longs, so a larger
# value would make every run fail to start (masked) instead of being refused at --check.
MAX_LIMIT = 2**31 - 1
MAX_TIME_S = 1_000_000.0


@dataclass
class CodeTestsOptions:
    """The plugin's options (``plugins: {code-tests: {...}}``); the scorer runs with them."""

    weight: float = 1.0
    mode: Literal["all", "share"] = "all"
    time_limit_s: float = 2.0
    total_time_s: float = 8.0
    memory_mb: int = 512
    max_processes: int = 8
    output_limit_kb: int = 1024
    open_files: int = 64
    disk_mb: int = 64
    max_cases: int = 0
    isolation: Literal["auto", "namespaces", "basic"] = "auto"
    python: str = ""
    tests_column: str = "tests"
    test_code_column: str = "test"
    entry_point_column: str = "entry_point"
    setup_column: str = "test_setup_code"
    think_opened: bool = False

    def __post_init__(self):
        for name in ("time_limit_s", "total_time_s"):
            if not 0 < getattr(self, name) <= MAX_TIME_S:
                raise ValueError(f"{name} must be > 0 and <= {MAX_TIME_S}, got {getattr(self, name)!r}")
        for name in ("memory_mb", "max_processes", "output_limit_kb", "open_files", "disk_mb"):
            if not 1 <= getattr(self, name) <= MAX_LIMIT:
                raise ValueError(f"{name} must be >= 1 and <= {MAX_LIMIT}, got {getattr(self, name)!r}")
        if self.max_cases < 0:
            raise ValueError(f"max_cases must be >= 0 (0 = all), got {self.max_cases!r}")
        if self.memory_mb < 64:
            raise ValueError(f"memory_mb must be >= 64 (the interpreter needs ~30 MB), got {self.memory_mb}")

    @property
    def limits(self) -> Limits:
        """The sandbox limits of one run."""
        return Limits(
            time_s=self.time_limit_s,
            memory_mb=self.memory_mb,
            max_processes=self.max_processes,
            output_bytes=self.output_limit_kb * 1024,
            open_files=self.open_files,
            disk_mb=self.disk_mb,
        )


@dataclass(frozen=True)
class CodeTestsScorer:
    """1.0 when the program passes every test case (``mode="all"``) or the share passed (``"share"``).

    ``None`` when the row has no tests; 0.0 when the completion has no program. Raises (the
    engine masks the item) when the row's tests are malformed or the sandbox cannot be built.

    >>> share = CodeTestsScorer(CodeTestsOptions(mode="share"))
    >>> share(prompt="", completion="```python\\nprint(int(input()) * 2)\\n```",
    ...       example={"tests": [{"input": "2", "output": "4"}, {"input": "3", "output": "7"}]})
    0.5
    """

    options: CodeTestsOptions = dataclasses.field(default_factory=CodeTestsOptions)

    def __call__(self, *, prompt, completion, example):
        cases: list[TestCase] | AssertTests | None = load_cases(example.get(self.options.tests_column))
        if not cases:
            cases = load_assert_tests(
                example.get(self.options.test_code_column),
                entry_point=example.get(self.options.entry_point_column),
                setup=example.get(self.options.setup_column),
            )
        if not cases:
            return None
        program = extract_program(completion, think_opened=self.options.think_opened)
        if program is None:
            return 0.0
        if isinstance(cases, AssertTests):
            return float(self.run_asserts(program, cases))
        if self.options.max_cases:
            cases = cases[: self.options.max_cases]
        return self.run_cases(program, cases)

    def _limits(self, time_s: float, expected_bytes: int = 0) -> Limits:
        """One run's limits. The output cap grows to twice the expected output when that is
        larger (a correct program must not fail on the cap)."""
        output = max(self.options.limits.output_bytes, 2 * expected_bytes + 1024)
        return dataclasses.replace(self.options.limits, time_s=time_s, output_bytes=output)

    def _start(self, source: str, limits: Limits, argv: list[str], **kwargs):
        return start_python(
            source,
            limits=limits,
            isolation=self.options.isolation,
            argv=argv,
            interpreter=self.options.python or None,
            **kwargs,
        )

    def run_cases(self, program: str, cases: list[TestCase]) -> float:
        """Run the program once per case, within the total time budget; cases not run fail.

        A case passes when the program exits with status 0 (as the kernel reports it to the
        keeper: ``sys.exit(0)``, the end of the script and ``os._exit(0)`` alike), within its
        time and output limits, and its output matches (see ``outputs_match``)."""
        end = time.monotonic() + self.options.total_time_s
        passed = 0
        for case in cases:
            left = end - time.monotonic()
            if left < MIN_CASE_TIME_S:
                break
            limits = self._limits(
                min(self.options.limits.time_s, left), len(case.output.encode("utf-8", "surrogatepass"))
            )
            with self._start(program, limits, ["-c", STDIN_HARNESS], stdin=case.input) as run:
                result = run.wait()
            ok = result.ok and outputs_match(result.stdout.decode("utf-8", "surrogateescape"), case.output)
            passed += ok
            if not ok and self.options.mode == "all":
                break
        if self.options.mode == "all":
            return float(passed == len(cases))
        return passed / len(cases)

    def run_asserts(self, program: str, tests: AssertTests) -> bool:
        """The tests in one sandbox, the program in another (see :mod:`rlvr_code.calls`): passes
        only if the tests run to their end and the program's CPU time is within
        ``time_limit_s`` plus the channel's own cost (:func:`channel_allowance_s`); both run
        under the wall-clock ceiling ``total_time_s``. Raises ``ValueError`` when the tests call
        the program with an argument that is not plain data."""
        return self.passed(*self.run_pair(program, tests))

    def passed(self, verdict: RunResult, served: RunResult | None) -> bool:
        """The verdict of :meth:`run_pair`'s results (see :meth:`run_asserts`)."""
        if verdict.exit_code == calls.EXIT_UNSENDABLE:
            why = verdict.stderr.decode(errors="replace").strip().splitlines() or ["an argument that cannot be sent"]
            raise ValueError(why[-1][:300])
        if not verdict.ok or served is None or served.exit_code != 0:
            return False
        made, sent = channel_traffic(verdict.stderr)
        return served.cpu_s <= self.options.time_limit_s + channel_allowance_s(made, sent)

    def run_pair(self, program: str, tests: AssertTests) -> tuple[RunResult, RunResult | None]:
        """Run the checker and the program side by side: the checker's result, and the program's
        once it exited after the tests closed the channel (None if the tests failed)."""
        limits = self._limits(self.options.total_time_s)
        calls_r, calls_w = os.pipe()
        answers_r, answers_w = os.pipe()
        pipes = [calls_r, calls_w, answers_r, answers_w]
        served_result = None
        try:
            with (
                self._start(program, limits, ["-c", CALLS_SOURCE, "serve"], pass_fds=(calls_r, answers_w)) as served,
                self._start(
                    tests.code,
                    limits,
                    ["-c", CALLS_SOURCE, "check", *tests.names, "--", *tests.modules],
                    pass_fds=(answers_r, calls_w),
                ) as checker,
            ):
                for fd in pipes:
                    os.close(fd)
                pipes = []
                verdict = checker.wait()
                if verdict.ok:  # the channel is closed: the program exits (by the wall ceiling at the latest)
                    served_result = served.wait()
                served.close()  # a failed test: whatever the program still does is not looked at
        finally:
            for fd in pipes:
                os.close(fd)
        return verdict, served_result


def channel_traffic(stderr: bytes) -> tuple[int, int]:
    """(calls, bytes both ways) from the checker's last stderr line (``calls.TRAFFIC_MARK``).

    >>> channel_traffic(b"debug\\n\\nrlvr-code-channel 3 120\\n")
    (3, 120)
    """
    lines = stderr.decode(errors="replace").strip().splitlines()
    parts = lines[-1].split() if lines else []
    if len(parts) == 3 and parts[0] == calls.TRAFFIC_MARK and parts[1].isdigit() and parts[2].isdigit():
        return int(parts[1]), int(parts[2])
    return 0, 0


def channel_allowance_s(made: int, sent: int) -> float:
    """CPU seconds the program's side of the channel may take on top of ``time_limit_s``: decoding
    each call, encoding each answer, the pipe's system calls. ``CHANNEL_S_PER_CALL`` per call and
    ``CHANNEL_S_PER_MB`` per megabyte sent both ways (measured, with a margin: see the README).

    >>> round(channel_allowance_s(10_000, 0), 3), round(channel_allowance_s(1, 17 << 20), 3)
    (1.0, 1.7)
    """
    return made * CHANNEL_S_PER_CALL + sent / (1 << 20) * CHANNEL_S_PER_MB


class CodeTestsPlugin(Plugin):
    name = "code-tests"
    description = "Code reward: the completion's Python program run against the row's tests in a sandbox"

    Options = CodeTestsOptions

    def scorer(self) -> CodeTestsScorer:
        return CodeTestsScorer(self.options)

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(
            RewardFunction(
                self.name, self.scorer(), self.options.weight, columns={"tests_column": self.options.tests_column}
            )
        )

    @hookimpl
    def rlvr_reward_exploits(self, register):
        o = self.options
        columns = (o.tests_column, o.test_code_column, o.entry_point_column, o.setup_column)
        for kind, description in CLASSES.items():
            register(RewardExploit(self.name, kind, CodeExploit(kind, *columns), description))

    @hookimpl
    def rlvr_validate_run(self, engine_timeout_s):
        budget = self.options.total_time_s
        if engine_timeout_s is not None and budget >= engine_timeout_s:
            raise ConfigError(
                f"plugin {self.name!r}: option total_time_s={budget:g} does not fit under the reward engine's "
                f"deadline engine.timeout_s={engine_timeout_s:g}: the engine would kill the worker mid-item and the "
                f"completion would be masked instead of scored. Set total_time_s below it (leave ~1 s for the "
                f"sandbox set-up) or raise engine.timeout_s.",
                source="plugins",
            )
