"""Run one untrusted Python program with hard limits: the sandbox behind ``code-tests``.

Process layout (Linux only)::

    caller (the reward worker)
      └─ keeper   forked copy of the caller: builds the sandbox, enforces the wall-clock
           │      deadline, reaps the program, reports its wait status on a pipe
           └─ program   ``python -I -S solution.py`` after ``execve``, empty environment

``isolation="namespaces"`` (the default when the kernel allows it): the keeper enters new
mount, user, PID, network, IPC and UTS namespaces. The program's filesystem is a size-capped
tmpfs holding only read-only binds of ``/usr`` (and the interpreter's prefix), four device
nodes and a writable ``/work`` and ``/tmp`` (``pivot_root``; the host tree is unmounted).
The program is PID 1 of its own PID namespace: when it exits or is killed, the kernel kills
every process it started, whatever session or group they moved to. The network namespace
has only a loopback interface that is down. ``RLIMIT_NPROC`` is counted per user namespace
(Linux >= 5.14), so ``max_processes`` bounds this program's tree alone and cannot be eaten
by, or eat into, the host user's processes. When the caller runs as root, the program runs
as ``nobody`` (uid 65534) inside a user namespace owned by ``nobody``.

``isolation="basic"`` (the fallback when namespaces are refused, e.g. inside a container
without user namespaces): the program runs in a fresh temporary directory on the host
filesystem as the caller's user (as root: a uid of its own, ``RUN_UID_BASE`` + the keeper's
pid, while the keeper stays root), and the keeper is a child subreaper that kills the
program's group and every descendant that re-parented to it. It does NOT hide the
filesystem; see the README.

In both modes the program starts its own session (``setsid``), so it cannot signal its
keeper's group; the keeper reports ``started`` once the program runs, and a keeper lost
after that is the program's failure (``RunResult.keeper_lost``), not a ``SandboxError``.

Both modes: rlimits (CPU time, address space, processes, file size = output cap, open
files, no core dumps), ``PR_SET_NO_NEW_PRIVS`` and a seccomp filter (:func:`seccomp_filter`)
that makes ``socket(2)`` fail with EACCES for every address family (so neither ctypes nor
``_socket`` can open a socket), denies io_uring, namespaces, mounts, ptrace, bpf, SysV IPC,
addressed Unix sends and other kernel attack surface, and kills a foreign-architecture
system call;
``PR_SET_PDEATHSIG`` on the keeper and the program, so that a SIGKILL of the caller (the
reward engine's deadline) takes the sandbox down with it.

Modules: :mod:`.records` (limits, results, the keeper's configuration), :mod:`.libc` (the C
calls the standard library lacks), :mod:`.syscalls` (system call numbers by name and the
seccomp filter), :mod:`.isolation` (namespaces and basic mode), :mod:`.keeper` (the keeper,
the program and the keeper's reports); this module starts runs and collects their results.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass

from .cleanup import discard
from .isolation import RUN_UID_BASE, SHARED_WRITABLE, drop_root, interpreter_prefix, traversable_by_others
from .keeper import LEFTOVER, ReportKind, read_reports, run_keeper, wait_with_deadline
from .libc import libc
from .records import Isolation, KeeperConfig, Limits, RunResult, SandboxError
from .syscalls import seccomp_filter

__all__ = [
    "Limits",
    "RunResult",
    "Running",
    "SandboxError",
    "run_python",
    "start_python",
    "namespaces_available",
    "remove_stale_dirs",
    "seccomp_filter",
    "RUN_UID_BASE",
    "SHARED_WRITABLE",
]

logger = logging.getLogger("rlvr_code.sandbox")

KEEPER_GRACE_S = 5.0
STALE_BUDGET_S = 0.05  # what the first run of a process spends on the stale directories of others
DIR_PREFIX = "rlvr-code-"  # then the creating process's pid


def _interpreter() -> str:
    base = os.path.join(sys.base_prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}")
    return base if os.access(base, os.X_OK) else os.path.realpath(sys.executable)


def _read_capped(path: str, cap: int) -> tuple[bytes, bool]:
    with open(path, "rb") as f:
        data = f.read(cap + 1)
    return data[:cap], len(data) > cap


@dataclass
class Running:
    """A run started by :func:`start_python`: :meth:`wait` for its result; leaving the ``with``
    block (or :meth:`close`) kills what is left and removes its directory."""

    mode: str
    limits: Limits
    tmp: str
    pid: int | None
    report_r: int
    fds: list[int]
    start: float

    def wait(self) -> RunResult:
        """Wait for the keeper; the program's result. Raises :class:`SandboxError` when the
        sandbox failed before the program started. Once it started, a keeper that died (or
        hung past its grace period) is the program's failure (``keeper_lost``), not an error."""
        pid = self.pid
        keeper_late = wait_with_deadline(pid, self.start + self.limits.time_s + KEEPER_GRACE_S)
        if keeper_late:
            os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        self.pid = None
        reports = read_reports(self.report_r)
        if reports and reports[-1].message == LEFTOVER:  # the keeper could not remove all the program's files
            _swept.pop("pid", None)  # the next run sweeps them (in the background)
        started = reports[0].pid if reports and reports[0].kind is ReportKind.STARTED else None
        final = reports[-1] if reports else None
        if started is None or final is None or final.kind is ReportKind.ERROR:
            raise SandboxError(
                f"sandbox keeper failed ({self.mode}): {final.describe() if final else 'no report'}"
                + (" (killed after its grace period)" if keeper_late else "")
            )
        stdout, exceeded = _read_capped(os.path.join(self.tmp, "stdout"), self.limits.output_bytes)
        stderr, _ = _read_capped(os.path.join(self.tmp, "stderr"), self.limits.output_bytes)
        if final.kind is not ReportKind.FINISHED or keeper_late:
            self._kill_orphans(pid, started)
            return RunResult(
                stdout=stdout,
                stderr=stderr,
                exit_code=None,
                signal=None,
                timed_out=keeper_late,
                output_exceeded=exceeded,
                elapsed_s=time.monotonic() - self.start,
                isolation=self.mode,
                pgid=pid,
                keeper_lost=True,
            )
        status = final.status
        return RunResult(
            stdout=stdout,
            stderr=stderr,
            exit_code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            timed_out=final.timed_out,
            output_exceeded=exceeded,
            elapsed_s=final.elapsed_s,
            isolation=self.mode,
            pgid=pid,
            cpu_s=final.cpu_s,
        )

    def _kill_orphans(self, keeper_pid: int, program: int | None) -> None:
        """The keeper is gone without sweeping: kill the program's group and, in basic mode as
        root, every process of its uid (a daemon that left the group included)."""
        if program is not None:
            try:
                os.killpg(program, signal.SIGKILL)
            except OSError:
                pass
        if self.mode == "basic" and os.geteuid() == 0:
            killer = os.fork()
            if killer == 0:
                try:
                    drop_root(RUN_UID_BASE + keeper_pid)
                    os.kill(-1, signal.SIGKILL)  # as that uid: every process it owns, this one aside
                finally:
                    os._exit(0)
            os.waitpid(killer, 0)

    def close(self) -> None:
        """Stop the run if it is still going: SIGTERM, so the keeper kills and sweeps the
        program's tree itself; SIGKILL for the keeper's group after the grace period."""
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGTERM)
                if wait_with_deadline(self.pid, time.monotonic() + KEEPER_GRACE_S):
                    os.killpg(self.pid, signal.SIGKILL)
                    self._kill_orphans(self.pid, None)
            except OSError:
                pass
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.pid = None
        for fd in [self.report_r, *self.fds]:
            os.close(fd)
        self.report_r, self.fds = -1, []
        discard([self.tmp], owner_prefix=DIR_PREFIX)  # bounded: a directory bomb is removed in the background

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc) -> None:
        if self.report_r >= 0:
            self.close()


def start_python(
    source: str,
    *,
    stdin: str | bytes = b"",
    limits: Limits = Limits(),
    isolation: Isolation = "auto",
    argv: list[str] | None = None,
    interpreter: str | None = None,
    pass_fds: tuple[int, ...] = (),
) -> Running:
    """Start ``source`` (saved as ``solution.py`` in the working directory) with ``stdin``;
    returns at once (see :class:`Running`), so that several programs can run side by side.

    ``argv`` is passed to the interpreter after ``-I -S -B`` (default ``["solution.py"]``);
    ``interpreter`` defaults to the base interpreter of the running Python (no venv);
    ``pass_fds`` become the program's file descriptors 3, 4, ... (the caller keeps and closes
    its own copies). Raises :class:`SandboxError` when the sandbox cannot be built.
    """
    if not sys.platform.startswith("linux"):
        raise SandboxError("the code sandbox needs Linux")
    mode = _resolve(isolation)
    interpreter = interpreter or _interpreter()
    if not os.access(interpreter, os.X_OK):
        raise SandboxError(f"{interpreter} is not an executable interpreter")
    if mode == "namespaces":
        interpreter_prefix(interpreter)
    libc()  # loaded before fork: a forked copy of a threaded caller must not dlopen
    seccomp_filter()  # built once per process, before fork: the program installs the cached copy
    data = stdin.encode("utf-8", "surrogatepass") if isinstance(stdin, str) else bytes(stdin)
    base = _temp_base(mode)
    if _swept.get("pid") != os.getpid():
        _swept["pid"] = os.getpid()
        remove_stale_dirs(base)
    tmp = tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-", dir=base)
    report_r, report_w = os.pipe()
    run = Running(mode, limits, tmp, None, report_r, [], time.monotonic())
    try:
        root = os.path.join(tmp, "root" if mode == "namespaces" else "work")
        os.mkdir(root, 0o755)
        if os.geteuid() == 0:
            os.chmod(tmp, 0o711)
        run.fds = [
            _stdin_fd(tmp, data),
            os.open(os.path.join(tmp, "stdout"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600),
            os.open(os.path.join(tmp, "stderr"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600),
        ]
        cfg = KeeperConfig(
            source=source.encode("utf-8", "surrogatepass"),
            argv=argv or ["solution.py"],
            limits=limits,
            interpreter=interpreter,
            isolation=mode,
            root=root,
            caller=os.getpid(),
            fds=(*run.fds, *pass_fds),
            report=report_w,
            stdin_path=os.path.join(tmp, "stdin"),
        )
        run.start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.close(report_r)
            run_keeper(cfg)
        run.pid = pid
    except BaseException:
        run.close()
        raise
    finally:
        os.close(report_w)
    return run


def run_python(
    source: str,
    *,
    stdin: str | bytes = b"",
    limits: Limits = Limits(),
    isolation: Isolation = "auto",
    argv: list[str] | None = None,
    interpreter: str | None = None,
) -> RunResult:
    """Run ``source`` (saved as ``solution.py`` in the working directory) with ``stdin``.

    ``argv`` is passed to the interpreter after ``-I -S -B`` (default ``["solution.py"]``);
    ``interpreter`` defaults to the base interpreter of the running Python (no venv).
    Raises :class:`SandboxError` when the sandbox cannot be built; the program's own
    failures are reported in the result.
    """
    with start_python(
        source, stdin=stdin, limits=limits, isolation=isolation, argv=argv, interpreter=interpreter
    ) as run:
        return run.wait()


_swept: dict[str, int] = {}


def remove_stale_dirs(base: str | None = None) -> list[str]:
    """Remove the temporary directories left by processes that died during a run (a reward
    worker SIGKILLed at the engine's deadline, a background remover killed with its worker);
    ``start_python`` calls it once per process, and again after a keeper left files behind.
    A directory is stale when no process has the pid in its name (so a ``$TMPDIR`` shared
    across PID namespaces is not supported). What is not removed within ``STALE_BUDGET_S``
    is removed in the background (:func:`.cleanup.discard`): the run that sweeps never pays
    for a mess. Returns the stale paths found."""
    bases = [base or tempfile.gettempdir()]
    if os.geteuid() == 0:  # basic mode as root: what a keeper could not remove of its run uid's files
        bases += [d for d in SHARED_WRITABLE if d not in bases]
    stale = []
    for folder in bases:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            owner = name[len(DIR_PREFIX) :].split("-", 1)[0]
            if not name.startswith(DIR_PREFIX) or not owner.isdigit():
                continue
            try:
                os.kill(int(owner), 0)
                continue
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
            stale.append(os.path.join(folder, name))
    discard(stale, STALE_BUDGET_S, owner_prefix=DIR_PREFIX)
    return stale


def _temp_base(mode: str) -> str | None:
    """Where the temporary directory goes: $TMPDIR, except in basic mode as root when the
    program's unprivileged uid could not reach it, then /tmp."""
    base = tempfile.gettempdir()
    if mode != "basic" or os.geteuid() != 0 or traversable_by_others(base):
        return base
    if traversable_by_others("/tmp"):
        return "/tmp"
    raise SandboxError(f"basic isolation as root: an unprivileged uid cannot reach {base} or /tmp")


def _stdin_fd(tmp: str, data: bytes) -> int:
    """The input file, readable by the program's user (namespaces mode binds it at /dev/stdin)."""
    path = os.path.join(tmp, "stdin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return os.open(path, os.O_RDONLY | os.O_CLOEXEC)


_probed: dict[str, bool] = {}


def namespaces_available() -> bool:
    """Whether the namespaces sandbox works here (probed once per process)."""
    if "namespaces" not in _probed:
        for _ in range(3):  # a transient failure (fork refused on a loaded host) must not downgrade for good
            try:
                result = run_python("print('ok')", limits=Limits(time_s=10.0), isolation="namespaces")
                _probed["namespaces"] = result.ok and result.stdout == b"ok\n"
                why = result.stderr.decode(errors="replace")[-300:]
            except SandboxError as exc:
                _probed["namespaces"] = False
                why = str(exc)
            if _probed["namespaces"]:
                break
        if not _probed["namespaces"]:
            logger.warning(
                "code sandbox: namespaces unavailable, falling back to basic isolation "
                "(no filesystem isolation, see the rlvr-code README): %s",
                why,
            )
    return _probed["namespaces"]


def _resolve(isolation: Isolation) -> str:
    if isolation == "auto":
        return "namespaces" if namespaces_available() else "basic"
    if isolation not in ("namespaces", "basic"):
        raise ValueError(f"Unsupported isolation: {isolation!r}. Supported: ['auto', 'namespaces', 'basic']")
    return isolation
