"""The ``python`` environment: one tool that runs the policy's program in the ``code-tests`` sandbox.

Each call is one sandboxed run (:func:`rlvr_code.sandbox.run_python`: namespaces or basic isolation,
rlimits, seccomp, no network) with its own wall-clock deadline and output cap, started from a fresh
interpreter (:func:`rlvr_code.fresh.call_fresh`, as ``code-repair``'s test runs), never from a fork of
the trainer, which holds torch's threads. Whatever the program
does (raise, hang, flood its output, write bytes that are not UTF-8) the call ends within its
deadline and raises ``ValueError`` with the reason: TRL's tool loop returns the message to the policy
as the tool's turn and counts the call in ``tools/failure_frequency``; the episode and the run go on.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from rlvr_plugins import Environment, Plugin, hookimpl
from rlvr_plugins.fields import Rule, at_least

from .fresh import FreshRunError, call_fresh
from .sandbox import Limits, RunResult, SandboxError
from .sandbox import run_python as run_sandboxed

logger = logging.getLogger("rlvr_code.tool")


def tool_answer(result: RunResult, limits: Limits) -> str:
    """What the policy reads after a run: the program's standard output, or ``ValueError`` saying why
    there is none. (The trainer cuts a long answer to the environment's ``max_result_chars``.)

    >>> ok = RunResult(b"12\\n", b"", 0, None, False, False, 0.1, "basic", 0)
    >>> tool_answer(ok, Limits())
    '12\\n'
    >>> tool_answer(RunResult(b"\\xff", b"", 0, None, False, False, 0.1, "basic", 0), Limits())
    Traceback (most recent call last):
    ValueError: the program's output is not valid UTF-8 (byte 0 of 1)
    """
    if result.timed_out:
        raise ValueError(f"the program ran past its {limits.time_s:g} s deadline and was stopped")
    if result.output_exceeded:
        raise ValueError(f"the program wrote more than {limits.output_bytes} bytes of output and was stopped")
    if result.exit_code != 0:
        last = result.stderr.decode("utf-8", errors="replace").strip().splitlines()[-1:] or [""]
        status = f"exit status {result.exit_code}" if result.exit_code is not None else f"signal {result.signal}"
        raise ValueError(f"the program failed ({status}): {last[0][:300]}".rstrip(": "))
    try:
        return result.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        size = len(result.stdout)
        raise ValueError(f"the program's output is not valid UTF-8 (byte {exc.start} of {size})") from None


class PythonTool:
    """The ``python`` environment: ``run_python(code)`` is its one tool; it keeps no state between calls."""

    def __init__(self, limits: Limits, isolation: Any, interpreter: str | None):
        self.limits, self.isolation, self.interpreter = limits, isolation, interpreter

    def reset(self, **row: Any) -> None:
        return None

    def run_python(self, code: str) -> str:
        """Run a Python program in a sandbox and return what it prints.

        Args:
            code: the program's source code; print the values you want to see.

        Returns:
            The program's standard output.
        """
        limits = dataclasses.asdict(self.limits)
        job = {"code": code, "limits": limits, "isolation": self.isolation, "interpreter": self.interpreter}
        try:
            outcome = call_fresh("rlvr_code.tool:python_job", job, self.limits.time_s)
        except FreshRunError as exc:
            outcome = {"sandbox": str(exc)}
        if "sandbox" in outcome:
            logger.warning("python tool: the sandbox could not run the program: %s", outcome["sandbox"])
            raise ValueError("the sandbox could not run the program (not the program's fault)")
        if "error" in outcome:
            raise ValueError(outcome["error"])
        return str(outcome["answer"])


def python_job(job: dict[str, Any]) -> dict[str, str]:
    """One call of the tool on a JSON job, in the fresh interpreter of :func:`.fresh.call_fresh`:
    ``{"answer": output}``, ``{"error": why}`` (the program's failure) or ``{"sandbox": why}``."""
    limits = Limits(**job["limits"])
    try:
        result = run_sandboxed(job["code"], limits=limits, isolation=job["isolation"], interpreter=job["interpreter"])
    except SandboxError as exc:
        return {"sandbox": str(exc)}
    try:
        return {"answer": tool_answer(result, limits)}
    except ValueError as exc:
        return {"error": str(exc)}


@dataclass(frozen=True)
class PythonToolFactory:
    """A fresh :class:`PythonTool` per call (TRL's ``environment_factory``)."""

    limits: Limits
    isolation: str
    interpreter: str | None

    def __call__(self) -> PythonTool:
        return PythonTool(self.limits, self.isolation, self.interpreter)


class PythonToolPlugin(Plugin):
    name = "python"
    description = "environment 'python': a run_python(code) tool, each call run in the code-tests sandbox"

    @dataclass
    class Options:
        time_s: Annotated[float, Rule(lambda v: 0 < v <= 600, "a number of seconds in (0, 600]")] = 2.0
        memory_mb: Annotated[int, at_least(64)] = 256
        output_limit_kb: Annotated[int, at_least(1)] = 64
        max_output_chars: Annotated[int, at_least(1)] = 1000
        isolation: Literal["auto", "namespaces", "basic"] = "auto"
        python: str = ""

    @hookimpl
    def rlvr_environments(self, register):
        o = self.options
        limits = Limits(time_s=o.time_s, memory_mb=o.memory_mb, output_bytes=o.output_limit_kb * 1024)
        factory = PythonToolFactory(limits, o.isolation, o.python or None)
        register(Environment("python", factory, self.description, max_result_chars=o.max_output_chars))
