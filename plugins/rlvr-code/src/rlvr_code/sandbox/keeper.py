"""The keeper and the program: the two processes below the caller, and the reports the keeper
sends up.

The keeper is a forked copy of the caller: it sets up the isolation, forks the program,
enforces the wall-clock deadline, kills and reaps the program, and writes
:class:`KeeperReport` records on a pipe (:func:`write_report`, :func:`read_reports`).
"""

from __future__ import annotations

import enum
import fcntl
import math
import os
import resource
import select
import signal
import struct
import time
from dataclasses import dataclass

from . import isolation
from .libc import die_with_parent
from .records import KeeperConfig, Limits, SandboxError
from .syscalls import install_seccomp

PROGRAM_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/work",
    "MALLOC_ARENA_MAX": "2",
}  # glibc reserves 64 MB of address space per thread arena otherwise
LEFTOVER = "leftover"  # a FINISHED report's message: files of the run uid were renamed, not removed
STACK_BYTES = 256 << 20  # deep recursion in C (sorting keys, repr) as judges allow it


class ReportKind(enum.Enum):
    STARTED = 1  # the program runs: ``pid``
    FINISHED = 2  # the program was reaped: ``status`` (its wait status), ``timed_out``, ``elapsed_s``, ``cpu_s``
    ERROR = 3  # the sandbox failed: ``message``


@dataclass(frozen=True)
class KeeperReport:
    kind: ReportKind
    pid: int = 0
    status: int = 0
    timed_out: bool = False
    elapsed_s: float = 0.0
    message: str = ""
    cpu_s: float = 0.0

    def describe(self) -> str:
        return f"error {self.message}" if self.kind is ReportKind.ERROR else self.kind.name.lower()


_HEAD = struct.Struct("=BiiBddH")  # kind, pid, status, timed_out, elapsed_s, cpu_s, message length
_MESSAGE_BYTES = 2000  # a whole report stays under PIPE_BUF, so each write is atomic


def write_report(fd: int, report: KeeperReport) -> None:
    message = report.message.encode(errors="replace")[:_MESSAGE_BYTES]
    os.write(
        fd,
        _HEAD.pack(
            report.kind.value,
            report.pid,
            report.status,
            report.timed_out,
            report.elapsed_s,
            report.cpu_s,
            len(message),
        )
        + message,
    )


def read_reports(fd: int) -> list[KeeperReport]:
    """Every report on ``fd`` until end of file (the keeper has exited), in order."""
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    data, at, reports = b"".join(chunks), 0, []
    while at + _HEAD.size <= len(data):
        kind, pid, status, timed_out, elapsed_s, cpu_s, length = _HEAD.unpack_from(data, at)
        at += _HEAD.size + length
        if at > len(data):  # cut short: writes under PIPE_BUF are atomic, so never in practice
            break
        message = data[at - length : at].decode(errors="replace")
        reports.append(KeeperReport(ReportKind(kind), pid, status, bool(timed_out), elapsed_s, message, cpu_s))
    return reports


def wait_with_deadline(pid: int, deadline: float) -> bool:
    """Wait until the child ``pid`` exits (without reaping it) or ``deadline`` (monotonic)
    passes; True when the deadline passed first."""
    timed_out = False
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        while not poller.poll(max(0, math.ceil((deadline - time.monotonic()) * 1000))):
            if time.monotonic() >= deadline:
                timed_out = True
                break
        os.close(pidfd)
    else:
        delay = 0.0005
        while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            if time.monotonic() >= deadline:
                timed_out = True
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
    return timed_out


def _close_all_except(keep: set[int]) -> None:
    low = 0
    for fd in sorted(keep):
        if fd > low:  # never an empty range: CPython turns closerange(0, 0) into close_range(0, ~0)
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


def _set_limits(limits: Limits, nproc: int) -> None:
    cpu = max(1, math.ceil(limits.time_s))
    memory = limits.memory_mb * 1024 * 1024
    for which, value in (
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_AS, (memory, memory)),
        (resource.RLIMIT_STACK, (min(memory, STACK_BYTES), resource.RLIM_INFINITY)),  # RLIMIT_AS bounds it
        (resource.RLIMIT_NPROC, (nproc, nproc)),
        (resource.RLIMIT_FSIZE, (limits.output_bytes + 1, limits.output_bytes + 1)),
        (resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files)),
        (resource.RLIMIT_CORE, (0, 0)),
        (resource.RLIMIT_MEMLOCK, (0, 0)),
        (resource.RLIMIT_MSGQUEUE, (0, 0)),
    ):
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY:  # never above what the caller itself may use
            value = (min(value[0], hard), min(value[1], hard))
        resource.setrlimit(which, value)


def _program(cfg: KeeperConfig, nproc: int, errors: int) -> None:
    """In the program process, after fork: own session, limits, uid, seccomp, exec. Never returns.

    A failure before ``execve`` is written to ``errors`` (close-on-exec, so a successful
    exec closes it silently) and makes the run a sandbox error, not a failed program.
    """
    try:
        die_with_parent(None)
        os.setsid()  # its own session and group: kill(0, ...) and killpg reach only its own tree
        count = len(cfg.fds)
        errors = fcntl.fcntl(errors, fcntl.F_DUPFD_CLOEXEC, count)
        moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, count) for fd in cfg.fds]  # above every target first
        for target, fd in enumerate(moved):
            os.dup2(fd, target)
        _close_all_except({*range(count), errors})
        for signum in (signal.SIGPIPE, signal.SIGXFSZ):  # Python's SIG_IGN would survive exec
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        _set_limits(cfg.limits, nproc)
        if cfg.run_uid is not None:
            isolation.drop_root(cfg.run_uid)
        install_seccomp()
        os.execve(cfg.interpreter, [cfg.interpreter, "-I", "-S", "-B", *cfg.argv], PROGRAM_ENV)
    except BaseException as exc:
        try:
            os.write(errors, f"cannot start the program: {type(exc).__name__}: {exc}".encode()[:1000])
        finally:
            os._exit(126)


class _CallerDied(BaseException):
    pass


def _raise_caller_died(signum, frame):
    raise _CallerDied()


def _stop(pid: int, mode: str) -> tuple[int, float]:
    """Kill the program (and in basic mode its group and every adopted descendant); its wait status
    and CPU time (user + system, with the children it reaped: ``wait4``)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        if mode == "basic":
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)  # PID 1 of its namespace: the kernel kills the rest
    except OSError:
        pass
    _, status, usage = os.wait4(pid, 0)
    if mode == "basic":
        isolation.sweep_descendants()
    return status, usage.ru_utime + usage.ru_stime


def run_keeper(cfg: KeeperConfig) -> None:
    """In the keeper process, after fork. Never returns; reports on ``cfg.report``: STARTED
    once the program runs, then FINISHED (or ERROR).

    Its parent-death signal is SIGTERM, handled: when the caller is SIGKILLed (the reward
    engine's deadline) the keeper still kills and reaps the program before exiting.
    """
    code, pid = 1, None
    try:
        signal.signal(signal.SIGTERM, _raise_caller_died)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # the caller's mask is inherited
        _close_all_except({0, 1, 2, *cfg.fds, cfg.report})  # e.g. the engine's socket: its EOF must not wait for us
        os.setpgid(0, 0)
        die_with_parent(cfg.caller, signal.SIGTERM)
        if cfg.isolation == "namespaces":
            isolation.setup_namespaces(cfg)
            nproc = cfg.limits.max_processes + 1  # the keeper counts in the new user namespace too
        else:
            if os.geteuid() == 0:
                cfg.run_uid = isolation.run_uid()
            isolation.setup_basic(cfg)
            nproc = cfg.limits.max_processes + (0 if cfg.run_uid is not None else isolation.processes_of(os.getuid()))
        die_with_parent(cfg.caller, signal.SIGTERM)  # a credential change clears it
        errors_r, errors_w = os.pipe2(os.O_CLOEXEC)
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _program(cfg, nproc, errors_w)
        for fd in (*cfg.fds, errors_w):
            os.close(fd)
        failed = os.read(errors_r, 1000)
        if failed:
            raise SandboxError(failed.decode(errors="replace"))
        write_report(cfg.report, KeeperReport(ReportKind.STARTED, pid=pid))
        timed_out = wait_with_deadline(pid, start + cfg.limits.time_s)
        (status, cpu), pid = _stop(pid, cfg.isolation), None
        elapsed = time.monotonic() - start
        left = cfg.run_uid is not None and not isolation.remove_files_of(cfg.run_uid, os.getpid())
        write_report(
            cfg.report,
            KeeperReport(
                ReportKind.FINISHED,
                status=status,
                timed_out=timed_out,
                elapsed_s=elapsed,
                message=LEFTOVER if left else "",
                cpu_s=cpu,
            ),
        )
        code = 0
    except BaseException as exc:
        try:
            write_report(cfg.report, KeeperReport(ReportKind.ERROR, message=f"{type(exc).__name__}: {exc}"))
        except BaseException:
            pass
    finally:
        try:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            if pid is not None:  # stopped early (the caller died or closed the run): the same clean-up
                _stop(pid, cfg.isolation)
                if cfg.run_uid is not None:
                    isolation.remove_files_of(cfg.run_uid, os.getpid())
        finally:
            os._exit(code)
