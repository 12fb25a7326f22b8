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

from .fresh import GRACE_S, FreshRunError, call_fresh
from .sandbox import Limits

logger = logging.getLogger("rlvr_code.tool")


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
            outcome = call_fresh("rlvr_code.tool_run:python_job", job, self.limits.time_s)
        except FreshRunError as exc:
            outcome = {"sandbox": str(exc)}
        if "sandbox" in outcome:
            logger.warning("python tool: the sandbox could not run the program: %s", outcome["sandbox"])
            raise ValueError("the sandbox could not run the program (not the program's fault)")
        if "error" in outcome:
            raise ValueError(outcome["error"])
        return str(outcome["answer"])


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
        # call_fresh kills the sandbox at its deadline + GRACE_S and answers why; the tool deadline is a backstop
        register(
            Environment(
                "python",
                factory,
                self.description,
                max_result_chars=o.max_output_chars,
                tool_timeout_s=o.time_s + 2 * GRACE_S,
            )
        )
