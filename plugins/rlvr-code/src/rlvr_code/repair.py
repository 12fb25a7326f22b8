"""The ``code-repair`` environment: SWE-style RL in miniature.

A row gives a small buggy module (``source``) and its assert-style tests (``tests``). An episode
owns one working directory holding ``solution.py`` (editable) and ``tests.py`` (read-only); the
policy's tools read a file, replace the module and run the tests. Every test run goes through the
``code-tests`` sandbox (the tests in one sandbox, the module in another: :mod:`rlvr_code.calls`),
started from a fresh interpreter rather than a fork of the trainer, which holds torch's threads.
The reward is the final test result: 1.0 when the row's own tests pass against the module as the
episode left it, else 0.0. The tests come from the row, never from the working directory.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
import weakref
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from rlvr_plugins import Plugin, hookimpl

from . import calls
from .cases import AssertTests, load_assert_tests
from .fresh import GRACE_S, FreshRunError, call_fresh
from .plugins import CodeTestsOptions, CodeTestsScorer
from .sandbox import DIR_PREFIX
from .sandbox.cleanup import remove_tree

__all__ = ["CodeRepairEnv", "CodeRepairOptions", "CodeRepairPlugin", "run_tests_in_sandbox"]


@dataclass(frozen=True)
class CodeRepairOptions:
    """The environment's options (``plugins: {code-repair: {...}}``)."""

    time_limit_s: float = 2.0
    total_time_s: float = 8.0
    memory_mb: int = 512
    max_file_kb: int = 64
    max_report_chars: int = 2000
    isolation: Literal["auto", "namespaces", "basic"] = "auto"
    python: str = ""
    source_column: str = "source"
    tests_column: str = "tests"
    module_path: str = "solution.py"
    tests_path: str = "tests.py"

    def __post_init__(self):
        self.sandbox_options()  # the sandbox's own checks of the shared limits
        if not 1 <= self.max_file_kb <= 1 << 20:
            raise ValueError(f"max_file_kb must be >= 1 and <= {1 << 20}, got {self.max_file_kb!r}")
        if self.max_report_chars < 100:
            raise ValueError(f"max_report_chars must be >= 100, got {self.max_report_chars!r}")
        for name in ("module_path", "tests_path"):
            value = getattr(self, name)
            if not value or value != os.path.basename(value) or value in (".", ".."):
                raise ValueError(f"{name} must be a plain file name, got {value!r}")
        if self.module_path == self.tests_path:
            raise ValueError(f"module_path and tests_path must differ, both are {self.module_path!r}")

    def sandbox_options(self) -> CodeTestsOptions:
        """The ``code-tests`` options a test run uses (assert-style tests: the module's CPU time
        within ``time_limit_s``, both sandboxes under ``total_time_s``)."""
        return CodeTestsOptions(
            time_limit_s=self.time_limit_s,
            total_time_s=self.total_time_s,
            memory_mb=self.memory_mb,
            isolation=self.isolation,
            python=self.python,
        )


def run_tests_in_sandbox(program: str, tests: AssertTests, options: CodeTestsOptions) -> tuple[bool, str]:
    """``(passed, report)`` of the tests against ``program`` in the ``code-tests`` sandbox. The
    report is ``"passed"``, or why not: the tests' traceback, a time-out, the module's crash.

    >>> run_tests_in_sandbox("def add(a, b):\\n    return a + b\\n", AssertTests("assert add(1, 2) == 3", ("add",)),
    ...                      CodeTestsOptions(time_limit_s=5.0, total_time_s=20.0))
    (True, 'passed')
    """
    scorer = CodeTestsScorer(options)
    verdict, served = scorer.run_pair(program, tests)
    if scorer.passed(verdict, served):
        return True, "passed"
    if verdict.timed_out:
        return False, f"failed: the tests did not finish within {options.total_time_s:g}s"
    if verdict.ok:  # the tests ran to their end: the module's side failed (see CodeTestsScorer.passed)
        return False, f"failed: the module used more than {options.time_limit_s:g}s of CPU time or did not exit cleanly"
    lines = with_test_lines(verdict.stderr.decode("utf-8", "replace"), tests.code)
    if lines and lines[-1].startswith("ProgramFailed") and "the program ended" in lines[-1]:
        lines.append(
            f"(the module stopped: it raised or exited at import, crashed, or ran past its limits of "
            f"{options.total_time_s:g}s and {options.memory_mb} MB)"
        )
    return False, "failed:\n" + ("\n".join(lines) or f"the tests ended with status {verdict.exit_code}")


def with_test_lines(traceback: str, code: str) -> list[str]:
    """The checker's traceback without the harness's frames, each frame in the tests followed by
    its line of code (the tests run from a string, so Python cannot show it).

    >>> with_test_lines('Traceback:\\n  File "<string>", line 9, in check\\n  File "tests.py", line 2, in <module>\\n'
    ...                 'AssertionError', "x = 1\\nassert f(x) == 2\\n")
    ['Traceback:', '  File "tests.py", line 2, in <module>', '    assert f(x) == 2', 'AssertionError']
    """
    source = code.splitlines()
    out = []
    for line in traceback.strip().splitlines():
        if line.startswith((calls.TRAFFIC_MARK, '  File "<string>"')):
            continue
        out.append(line)
        frame = re.match(r'  File "tests\.py", line (\d+)', line)
        if frame and 0 < int(frame.group(1)) <= len(source):
            out.append("    " + source[int(frame.group(1)) - 1].strip())
    return out


def run_tests_job(job: dict[str, Any]) -> tuple[bool, str]:
    """:func:`run_tests_in_sandbox` on a JSON job (the fresh interpreter's side of :func:`.fresh.call_fresh`)."""
    tests = AssertTests(job["code"], tuple(job["names"]), tuple(job["modules"]))
    return run_tests_in_sandbox(job["program"], tests, CodeTestsOptions(**job["options"]))


def _run_in_fresh_process(program: str, tests: AssertTests, options: CodeTestsOptions) -> tuple[bool, str]:
    """:func:`run_tests_in_sandbox` in a new interpreter (:func:`.fresh.call_fresh`)."""
    job = {
        "program": program,
        "code": tests.code,
        "names": list(tests.names),
        "modules": list(tests.modules),
        "options": dataclasses.asdict(options),
    }
    passed, report = call_fresh("rlvr_code.repair:run_tests_job", job, options.total_time_s)
    return bool(passed), str(report)


class CodeRepairEnv:
    """One code-repair episode at a time (TRL's ``environment_factory`` contract: ``reset(**row)``,
    the public methods are the tools, ``get_reward()``).

    Invalid calls (an unknown or escaping path, a file over ``max_file_kb``, writing the tests)
    raise ``ValueError``: TRL's tool loop hands the message to the policy as ``{"error": ...}``
    and counts it in ``tools/failure_frequency``; the episode goes on. Failing tests are not a
    tool failure: ``run_tests`` returns the report.
    """

    def __init__(self, options: CodeRepairOptions | None = None):
        self._options = options or CodeRepairOptions()
        self._workdir: str | None = None
        self._cleanup: weakref.finalize | None = None
        self._tests: AssertTests | None = None
        self._last_run: tuple[str, bool, str] | None = None

    def reset(self, **row: Any) -> str:
        """Start an episode on ``row``: a fresh working directory with the module and its tests
        (the previous episode's directory is removed). Returns the observation the prompt gets."""
        o = self._options
        self._close()
        source, tests = row.get(o.source_column), row.get(o.tests_column)
        if not isinstance(source, str) or not isinstance(tests, (str, list)):
            raise ValueError(
                f"code-repair: a row needs the module as a string in column {o.source_column!r} and its tests "
                f"(a string or a list of statements) in column {o.tests_column!r}; got "
                f"{type(source).__name__} and {type(tests).__name__}"
            )
        loaded = load_assert_tests(tests)
        if loaded is None:
            raise ValueError(f"code-repair: the row's {o.tests_column!r} column holds no tests")
        self._tests = loaded
        self._workdir = tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-repair-")
        self._cleanup = weakref.finalize(self, remove_tree, self._workdir)
        self._write(o.module_path, source)
        self._write(o.tests_path, loaded.code)
        return (
            f"The repository has two files: {o.module_path} (the module) and {o.tests_path} (its tests, read-only; "
            f"they call the module's functions by name). Fix {o.module_path} so that the tests pass, using the tools "
            "read_file, replace_file and run_tests."
        )

    def read_file(self, path: str) -> str:
        """Read a file of the repository.

        Args:
            path: The file's name in the repository, for example "solution.py" or "tests.py".

        Returns:
            The file's content.
        """
        return self._read(self._name(path))

    def replace_file(self, path: str, content: str) -> str:
        """Replace the whole content of the module.

        Args:
            path: The module's file name, for example "solution.py".
            content: The new content of the file.

        Returns:
            A confirmation with the number of bytes written.
        """
        o = self._options
        if self._name(path) == o.tests_path:
            raise ValueError(f"{o.tests_path} is read-only: fix {o.module_path} instead")
        data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else None
        if data is None:
            raise ValueError(f"content must be a string, got {type(content).__name__}")
        if len(data) > o.max_file_kb * 1024:
            raise ValueError(f"content is {len(data)} bytes, over the limit of {o.max_file_kb * 1024} bytes")
        self._write(o.module_path, content)
        return f"wrote {len(data)} bytes to {o.module_path}"

    def run_tests(self) -> str:
        """Run the repository's tests against the module, in a sandbox.

        Returns:
            "passed", or the failure: the failing test's traceback, a time-out or the module's error.
        """
        passed, report = self._test_result()
        limit = self._options.max_report_chars
        return report if len(report) <= limit else report[: limit // 2] + "\n[...]\n" + report[-limit // 2 :]

    def get_reward(self) -> float | None:
        """1.0 when the row's tests pass against the module as the episode left it, else 0.0;
        ``None`` (no score, left out of the group's baseline) when the sandbox itself failed."""
        try:
            return float(self._test_result()[0])
        except FreshRunError:
            return None

    def _test_result(self) -> tuple[bool, str]:
        """The tests' result on the current module (cached until the module changes)."""
        if self._tests is None or self._workdir is None:
            raise ValueError("no episode: reset() was not called")
        program = self._read(self._options.module_path)
        if self._last_run is not None and self._last_run[0] == program:
            return self._last_run[1], self._last_run[2]
        try:
            compile(program, self._options.module_path, "exec", dont_inherit=True)
        except SyntaxError as exc:
            passed, report = False, f"failed: {self._options.module_path} line {exc.lineno}: SyntaxError: {exc.msg}"
        except (ValueError, RecursionError, MemoryError) as exc:
            passed, report = False, f"failed: {self._options.module_path} cannot be compiled: {type(exc).__name__}"
        else:
            passed, report = _run_in_fresh_process(program, self._tests, self._options.sandbox_options())
        self._last_run = (program, passed, report)
        return passed, report

    def _name(self, path: Any) -> str:
        """The repository file ``path`` names; ``ValueError`` for anything else (no directory, no ``..``,
        no absolute path, no file the repository does not have)."""
        o = self._options
        if self._workdir is None:
            raise ValueError("no episode: reset() was not called")
        files = (o.module_path, o.tests_path)
        name = os.path.normpath(path) if isinstance(path, str) and "\x00" not in path else None
        if name not in files:
            raise ValueError(f"no file {str(path)[:100]!r} in the repository; its files are {', '.join(files)}")
        return name

    def _read(self, name: str) -> str:
        assert self._workdir is not None
        with open(os.path.join(self._workdir, name), encoding="utf-8", errors="surrogatepass") as f:
            return f.read()

    def _write(self, name: str, content: str) -> None:
        assert self._workdir is not None
        with open(os.path.join(self._workdir, name), "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(content)

    def _close(self) -> None:
        """Remove the episode's working directory (also done when the object is collected or the
        interpreter exits; a crashed process's directory is swept by the sandbox's next run)."""
        if self._cleanup is not None:
            self._cleanup()
        self._workdir, self._cleanup, self._tests, self._last_run = None, None, None, None


class CodeRepairPlugin(Plugin):
    name = "code-repair"
    description = (
        "Code-repair environment: read_file, replace_file and run_tests on a row's buggy module, in the code-tests "
        "sandbox; reward 1.0 when the row's tests pass at the end"
    )

    Options = CodeRepairOptions

    @hookimpl
    def rlvr_environments(self, register):
        from rlvr_plugins.plugin import Environment

        # call_fresh kills the sandbox at its deadline + GRACE_S and answers why; the tool deadline is a backstop
        timeout = self.options.total_time_s + 2 * GRACE_S
        register(Environment(self.name, partial(CodeRepairEnv, self.options), self.description, tool_timeout_s=timeout))
