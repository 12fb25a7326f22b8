"""Sandbox runs started from a fresh interpreter, for callers inside the trainer process.

The sandbox forks its keeper from the process that asks for a run. A reward worker is
single-threaded, but the trainer holds torch's threads (and CUDA or vLLM state): a fork of it
inherits their locks in whatever state they were. Tools and environments run in the trainer
(TRL's tool loop calls them there), so each of their sandbox runs goes through :func:`call_fresh`:
a new interpreter, started with ``subprocess`` (fork + exec, nothing inherited), runs the job and
exits. Both the ``python`` tool and ``code-repair`` use it.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
from typing import Any

__all__ = ["FreshRunError", "call_fresh"]

GRACE_S = 10.0
"""What a job may take beyond its own deadline (the interpreter's start, the imports) before it is killed."""


class FreshRunError(RuntimeError):
    """The fresh interpreter did not answer: it was killed at its deadline, or it failed (not the job's result)."""


def call_fresh(target: str, job: Any, deadline_s: float) -> Any:
    """``target(job)`` in a new Python interpreter; returns its result.

    ``target`` is ``"module:function"``, importable from this process's ``sys.path``; ``job`` and the
    result travel as JSON. The interpreter's process group is killed ``deadline_s + GRACE_S`` seconds
    after it starts; raises :class:`FreshRunError` then, or when the interpreter exits with an error.

    >>> call_fresh("json:dumps", [1, "a"], deadline_s=5)
    '[1, "a"]'
    """
    from rlvr_plugins.engine.pool import parent_path  # the caller's side only: the fresh interpreter need not import it

    boot = f"import sys; sys.path[:0] = {parent_path()!r}; from rlvr_code.fresh import _main; _main()"
    request = json.dumps({"target": target, "job": job}).encode("utf-8", "surrogatepass")
    deadline = deadline_s + GRACE_S
    proc = subprocess.Popen(
        [sys.executable, "-c", boot],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        out, err = proc.communicate(request, timeout=deadline)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise FreshRunError(f"the run did not answer within {deadline:g}s and was killed") from None
    if proc.returncode != 0:
        tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        raise FreshRunError(f"the run failed: {tail[0][:300]}")
    return json.loads(out)


def _main() -> None:
    """The fresh interpreter's side: the request as JSON on stdin, the result as JSON on stdout."""
    request = json.loads(sys.stdin.buffer.read().decode("utf-8", "surrogatepass"))
    module, _, function = request["target"].partition(":")
    result = getattr(importlib.import_module(module), function)(request["job"])
    sys.stdout.write(json.dumps(result))
