"""Launching a script or ``-m module`` on one process or several (torch.distributed.run, gloo on CPU), and
the scenarios of tests/multiproc/ranks.py that the multi-process tests compare."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RANKS = REPO / "tests" / "multiproc" / "ranks.py"
KIMI_LENGTH = ("gather", "opo", "gpg", "prime-length")  # the scenarios that shape with kimi-length (rlvr-kimi)
KIMI = (*KIMI_LENGTH, "pool-kimi", "partial", "partial-kimi")  # the scenarios that need rlvr-kimi
COMPARED = (
    *KIMI_LENGTH,
    "pool",
    "pool-kimi",
    "partial",
    "partial-kimi",
    "agent",
    "agent-split",
)  # each run on one process and on two


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(arguments: list[str], processes: int, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python ARGUMENTS`` on one process, or on ``processes`` under torch.distributed.run; one torch thread each."""
    head = [sys.executable]
    if processes > 1:
        head += ["-m", "torch.distributed.run", "--nproc_per_node", str(processes)]
        head += ["--master_addr", "127.0.0.1", "--master_port", str(free_port())]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    return subprocess.run([*head, *arguments], capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)


def records(path: Path) -> list[dict]:
    """The JSON lines a scenario wrote (none if it wrote nothing)."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run_scenarios(out: Path, scenarios: list[str], processes: int) -> dict[str, list[dict]]:
    """ranks.py's ``scenarios`` in one launch (a launch is mostly its processes' imports, ~10 CPU-s each);
    each scenario's JSON lines. Fails with the launch's stderr unless every scenario ran."""
    out.mkdir(parents=True)
    result = launch([str(RANKS), str(out), *scenarios], processes)
    assert result.returncode == 0, result.stderr[-4000:]
    return {scenario: records(out / f"{scenario}.jsonl") for scenario in scenarios}
