"""The records the sandbox's modules share: the caller's limits and result, the keeper's
configuration, and the error that means the sandbox itself failed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Isolation = Literal["auto", "namespaces", "basic"]


class SandboxError(RuntimeError):
    """The sandbox itself could not be set up (not the program's fault)."""


@dataclass(frozen=True)
class Limits:
    """Per-run limits. ``time_s`` is wall-clock (interpreter start-up included); the CPU-time
    limit is ``ceil(time_s)`` seconds per process; ``memory_mb`` is the address space per
    process; ``disk_mb`` caps the tmpfs (namespaces mode only)."""

    time_s: float = 2.0
    memory_mb: int = 512
    max_processes: int = 8
    output_bytes: int = 1 << 20
    open_files: int = 64
    disk_mb: int = 64


@dataclass(frozen=True)
class RunResult:
    stdout: bytes
    stderr: bytes
    exit_code: int | None
    signal: int | None
    timed_out: bool
    output_exceeded: bool
    elapsed_s: float
    isolation: str
    pgid: int
    keeper_lost: bool = False  # the keeper died after the program started: the program's failure
    cpu_s: float = 0.0  # the program's CPU time (user + system), the children it reaped included

    @property
    def ok(self) -> bool:
        """Exited with status 0, in time, within the output cap."""
        return self.exit_code == 0 and not self.timed_out and not self.output_exceeded


@dataclass
class KeeperConfig:
    """What the keeper needs, built by ``start_python`` before it forks the keeper."""

    source: bytes
    argv: list[str]
    limits: Limits
    interpreter: str
    isolation: str  # "namespaces" or "basic", resolved
    root: str  # the tmpfs mount point (namespaces) or the working directory (basic)
    caller: int  # the pid the keeper dies with
    fds: tuple[int, ...]  # become the program's 0, 1, 2, 3, ...
    report: int  # the pipe the keeper writes its KeeperReports to
    stdin_path: str  # beside it, the stdout and stderr files
    run_uid: int | None = None  # basic mode as root: the program's uid of its own, set by the keeper
