"""The ``python`` tool's side in the fresh interpreter (:func:`rlvr_code.fresh.call_fresh`): one sandboxed
run and the answer the policy reads. Kept apart from :mod:`rlvr_code.tool` so that the interpreter imports the
sandbox only, not rlvr-plugins (a third of a call's time)."""

from __future__ import annotations

from typing import Any

from .sandbox import Limits, RunResult, SandboxError
from .sandbox import run_python as run_sandboxed

__all__ = ["python_job", "tool_answer"]


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
