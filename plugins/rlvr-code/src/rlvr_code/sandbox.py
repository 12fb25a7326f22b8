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
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import logging
import math
import os
import platform
import resource
import select
import shutil
import signal
import stat
import struct
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Literal

__all__ = ["Limits", "RunResult", "Running", "SandboxError", "run_python", "start_python", "namespaces_available",
           "remove_stale_dirs", "seccomp_filter"]

logger = logging.getLogger("rlvr_code.sandbox")

Isolation = Literal["auto", "namespaces", "basic"]

NOBODY = 65534
INNER_UID = 1000
PROGRAM_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/work",
               "MALLOC_ARENA_MAX": "2"}  # glibc reserves 64 MB of address space per thread arena otherwise
KEEPER_GRACE_S = 5.0
DIR_PREFIX = "rlvr-code-"  # then the creating process's pid
STACK_BYTES = 256 << 20  # deep recursion in C (sorting keys, repr) as judges allow it
RUN_UID_BASE = 2_000_000_000  # basic mode as root: the program's uid is this plus the keeper's pid
SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm")  # basic mode as root: swept of the program's files

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 1024, 2048, 1 << 21
_ST_TO_MS = {1: _MS_RDONLY, 2: _MS_NOSUID, 4: _MS_NODEV, 8: _MS_NOEXEC, 1024: _MS_NOATIME,
             2048: _MS_NODIRATIME, 4096: _MS_RELATIME}
_MNT_DETACH = 2
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _PR_SET_CHILD_SUBREAPER = 1, 38, 22, 36
_PR_SET_DUMPABLE = 4
_SECCOMP_MODE_FILTER = 2



@dataclass(frozen=True)
class _Syscalls:
    audit_arch: int
    pivot_root: int
    clone: int
    sendto: int  # fails with EACCES when it names a destination address (a Unix socket of the host)
    denied: tuple[int, ...]  # fail with EACCES
    clone3: int = 435  # fails with ENOSYS: its flags sit behind a pointer, so libc falls back to clone
    x32_bit: int | None = None


# denied: socket, io_uring_setup/enter/register, unshare, setns, mount, umount2, pivot_root,
# chroot, the new mount API (open_tree ... fspick, mount_setattr), ptrace, process_vm_readv/writev,
# bpf, perf_event_open, userfaultfd, add_key, request_key, keyctl, name_to_handle_at, open_by_handle_at;
# then connect, bind, sendmsg, sendmmsg (a socketpair's socket could reach a host Unix socket by
# address) and SysV IPC: shmget, shmat, shmctl, shmdt, semget, semop, semctl, semtimedop, msgget,
# msgsnd, msgrcv, msgctl (segments outside RLIMIT_AS that outlive the process)
_ARCH = {
    "x86_64": _Syscalls(0xC000003E, 155, 56, 44,
                        (41, 425, 426, 427, 272, 308, 165, 166, 155, 161, 428, 429, 430, 431,
                         432, 433, 442, 101, 310, 311, 321, 298, 323, 248, 249, 250, 303, 304,
                         42, 49, 46, 307, 29, 30, 31, 67, 64, 65, 66, 220, 68, 69, 70, 71),
                        x32_bit=0x40000000),
    "aarch64": _Syscalls(0xC00000B7, 41, 220, 206,
                         (198, 425, 426, 427, 97, 268, 40, 39, 41, 51, 428, 429, 430, 431,
                          432, 433, 442, 117, 270, 271, 280, 241, 282, 217, 218, 219, 264, 265,
                          203, 200, 211, 269, 194, 196, 195, 197, 190, 193, 191, 192, 186, 189, 188, 187)),
}
_CLONE_NAMESPACES = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
_READ_ONLY_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
_DEVICES = ("null", "zero", "random", "urandom")


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

    @property
    def ok(self) -> bool:
        """Exited with status 0, in time, within the output cap."""
        return self.exit_code == 0 and not self.timed_out and not self.output_exceeded


# ---------------------------------------------------------------- system calls


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    libc.unshare.argtypes = [ctypes.c_int]
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return libc


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _prctl(option: int, arg: int, what: str) -> None:
    _check(_libc().prctl(option, arg, 0, 0, 0), what)


def _die_with_parent(parent_pid: int | None, signum: int = signal.SIGKILL) -> None:
    _prctl(_PR_SET_PDEATHSIG, signum, "prctl(PR_SET_PDEATHSIG)")
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(137)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc().mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _bind_read_only(source: str, target: str) -> None:
    _mount(source, target, None, _MS_BIND)
    kept = os.statvfs(target).f_flag
    flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
    flags |= sum(ms for st, ms in _ST_TO_MS.items() if kept & st)
    _mount(None, target, None, flags)


def seccomp_filter(arch: str | None = None) -> bytes:
    """The BPF program (``struct sock_filter`` array).

    Kill the process for a system call of a foreign ABI; EACCES for every call in
    ``_Syscalls.denied`` (sockets, io_uring, namespaces and mounts, ptrace, bpf, keyrings,
    connect/bind/sendmsg, SysV IPC, ...), for x32 calls, for ``clone`` with any namespace flag
    and for ``sendto`` with a destination address; ENOSYS for ``clone3``; allow the rest.
    """
    table = _ARCH[arch or platform.machine()]
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, kill = 0x7FFF0000, 0x80000000
    eacces, enosys = 0x00050000 | errno.EACCES, 0x00050000 | errno.ENOSYS
    checks = ([(jge, table.x32_bit, "eacces")] if table.x32_bit else [])
    checks += [(jeq, nr, "eacces") for nr in table.denied]
    checks += [(jeq, table.clone3, "enosys"), (jeq, table.clone, "clone"), (jeq, table.sendto, "sendto")]
    head = [(ld, 0, 0, 4), (jeq, 1, 0, table.audit_arch), (ret, 0, 0, kill), (ld, 0, 0, 0)]
    first_check = len(head)
    allow_at = first_check + len(checks)
    targets = {"clone": allow_at + 1, "sendto": allow_at + 4, "eacces": allow_at + 9, "enosys": allow_at + 10}
    body = [(op, targets[to] - (first_check + i + 1), 0, k) for i, (op, k, to) in enumerate(checks)]
    tail = [(ret, 0, 0, allow),
            (ld, 0, 0, 16),  # clone: low 32 bits of the flags argument
            (jset, 6, 0, _CLONE_NAMESPACES),
            (ret, 0, 0, allow),
            (ld, 0, 0, 48),  # sendto: the destination address (args[4]), low then high 32 bits
            (jeq, 0, 3, 0),
            (ld, 0, 0, 52),
            (jeq, 0, 1, 0),
            (ret, 0, 0, allow),
            (ret, 0, 0, eacces),
            (ret, 0, 0, enosys)]
    return b"".join(struct.pack("HBBI", *ins) for ins in head + body + tail)


def _install_seccomp() -> None:
    code = seccomp_filter()
    buf = ctypes.create_string_buffer(code)
    fprog = struct.pack("HxxxxxxP", len(code) // 8, ctypes.addressof(buf))
    fbuf = ctypes.create_string_buffer(fprog)
    _prctl(_PR_SET_NO_NEW_PRIVS, 1, "prctl(PR_SET_NO_NEW_PRIVS)")
    _check(_libc().prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fbuf), 0, 0),
           "prctl(PR_SET_SECCOMP)")


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


def _write(path: str, text: str, dir_fd: int | None = None) -> None:
    fd = os.open(path, os.O_WRONLY, dir_fd=dir_fd)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _interpreter() -> str:
    base = os.path.join(sys.base_prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}")
    return base if os.access(base, os.X_OK) else os.path.realpath(sys.executable)


# ---------------------------------------------------------------- namespaces mode (keeper side)


def _build_root(cfg: _Config, owner: int | None) -> None:
    """Mount the tmpfs root with read-only binds, write the program, pivot into it."""
    root, limits, interpreter, source = cfg.root, cfg.limits, cfg.interpreter, cfg.source
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={limits.disk_mb}m,mode=0755")
    prefix = _interpreter_prefix(interpreter)
    trees = list(_READ_ONLY_TREES)
    if not any(prefix == t or prefix.startswith(t + "/") for t in trees):
        trees.append(prefix)
    for tree in trees:
        target = root + tree
        if os.path.islink(tree):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.symlink(os.readlink(tree), target)
        elif os.path.isdir(tree):
            os.makedirs(target, exist_ok=True)
            _bind_read_only(tree, target)
    os.makedirs(root + "/etc", exist_ok=True)
    if os.path.isfile("/etc/ld.so.cache"):
        open(root + "/etc/ld.so.cache", "wb").close()
        _bind_read_only("/etc/ld.so.cache", root + "/etc/ld.so.cache")
    os.makedirs(root + "/dev", exist_ok=True)
    for dev in _DEVICES:
        if os.path.exists("/dev/" + dev):
            open(root + "/dev/" + dev, "wb").close()
            _mount("/dev/" + dev, root + "/dev/" + dev, None, _MS_BIND)
    open(root + "/dev/stdin", "wb").close()  # no /proc here, so not the usual symlinks to /proc/self/fd/N
    _bind_read_only(cfg.stdin_path, root + "/dev/stdin")
    for path in _output_files(cfg, owner):  # the files themselves, as a judge's file-backed stdout
        target = root + "/dev/" + os.path.basename(path)
        open(target, "wb").close()
        _mount(path, target, None, _MS_BIND)
    for scratch in ("/tmp", "/dev/shm"):  # /dev/shm: POSIX semaphores and shared memory (multiprocessing)
        os.makedirs(root + scratch, exist_ok=True)
        os.chmod(root + scratch, 0o1777)
    os.mkdir(root + "/work", 0o755)
    with open(root + "/work/solution.py", "wb") as f:
        f.write(source)
    if owner is not None:
        os.chown(root + "/work", owner, owner)
        os.chown(root + "/work/solution.py", owner, owner)
    os.chdir(root)
    _check(_libc().syscall(_ARCH[platform.machine()].pivot_root, b".", b"."), "pivot_root")
    _check(_libc().umount2(b".", _MNT_DETACH), "umount old root")
    os.chdir("/work")


_SHARED_DIRS = frozenset({"/", "/tmp", "/var/tmp", "/dev", "/dev/shm", "/home", "/root", "/etc", "/proc", "/sys",
                          "/run", "/var", "/mnt", "/media", "/srv", "/opt", "/work"})


def _output_files(cfg: _Config, owner: int | None) -> list[str]:
    """The stdout and stderr files, given to ``owner`` (the program's uid, when it is not the
    caller's) so that the program can open them again by name (``/dev/stdout``)."""
    paths = [os.path.join(os.path.dirname(cfg.stdin_path), stream) for stream in ("stdout", "stderr")]
    if owner is not None:
        for path in paths:
            os.chown(path, owner, owner)
    return paths


def _interpreter_prefix(interpreter: str) -> str:
    """The directory bound read-only for the interpreter: two levels above its real path
    (``<prefix>/bin/python3``); refused when that is a shared directory of the host."""
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(interpreter)))
    if prefix in _SHARED_DIRS:
        raise SandboxError(f"the interpreter {interpreter} lives directly under {prefix}, which would be bound "
                           "into the sandbox whole; install it under its own prefix (<prefix>/bin/python3)")
    return prefix


def _enter_user_namespace(flags: int, proc: int) -> None:
    """``proc`` is a directory fd of the host's /proc (still usable after ``pivot_root``)."""
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc().unshare(_CLONE_NEWUSER | flags), "unshare")
    _write("self/setgroups", "deny", proc)
    _write("self/uid_map", f"{INNER_UID} {uid} 1\n", proc)
    _write("self/gid_map", f"{INNER_UID} {gid} 1\n", proc)


def _drop_root(uid: int = NOBODY) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def _setup_namespaces(cfg: _Config) -> None:
    others = _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS
    proc = os.open("/proc", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if os.geteuid() == 0:
            _check(_libc().unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
            _build_root(cfg, owner=NOBODY)
            _drop_root()
            _prctl(_PR_SET_DUMPABLE, 1, "prctl(PR_SET_DUMPABLE)")  # else /proc/self/uid_map stays root's
            _enter_user_namespace(others, proc)
            _prctl(_PR_SET_DUMPABLE, 0, "prctl(PR_SET_DUMPABLE)")  # no ptrace of this copy of the caller
        else:
            _enter_user_namespace(_CLONE_NEWNS, proc)
            _build_root(cfg, owner=None)
            _check(_libc().unshare(others), "unshare(pid, net, ipc, uts)")
    finally:
        os.close(proc)


# ---------------------------------------------------------------- basic mode (keeper side)


def _run_uid() -> int:
    """Basic mode as root: the program's uid, unique to this run (the keeper's pid above a base
    no real account uses). No other process has it, so the program can signal nothing but its
    own tree, its process count starts at 0, and its leftover files are found by owner."""
    return RUN_UID_BASE + os.getpid()


def _setup_basic(cfg: _Config) -> None:
    work = cfg.root
    with open(os.path.join(work, "solution.py"), "wb") as f:
        f.write(cfg.source)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1, "prctl(PR_SET_CHILD_SUBREAPER)")
    os.chdir(work)
    if cfg.run_uid is not None:
        os.chown(work, cfg.run_uid, cfg.run_uid)
        os.chmod(work, 0o700)
        _output_files(cfg, cfg.run_uid)
        if not _traversable_by_others(cfg.interpreter):
            raise PermissionError(f"basic isolation as root runs the program as an unprivileged uid, which cannot "
                                  f"execute {cfg.interpreter}; choose an interpreter every user can run "
                                  "(option python, e.g. /usr/bin/python3)")
    else:
        _prctl(_PR_SET_DUMPABLE, 0, "prctl(PR_SET_DUMPABLE)")  # the program (same uid) cannot read our memory


def _processes_of(uid: int) -> int:
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                count += os.stat("/proc/" + name).st_uid == uid
            except OSError:
                pass
    return count


def _children_of(pid: int) -> list[int]:
    kids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                if int(fields[1]) == pid:
                    kids.append(int(name))
            except (OSError, IndexError, ValueError):
                pass
    return kids


def _sweep_descendants() -> None:
    """Kill and reap every child of this (subreaper) process until none is left: orphans
    re-parent to it, so each round catches the children of the processes killed before."""
    me = os.getpid()
    while True:
        for kid in _children_of(me):
            try:
                os.kill(kid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.waitpid(-1, 0)
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return


def _remove_files_of(uid: int) -> None:
    """Remove what ``uid`` left in the host's shared writable directories: at their top, and in
    every world-writable folder of someone else's found in them (at any depth through such
    folders), since the program could write there too."""
    pending = list(SHARED_WRITABLE)
    while pending:
        base = pending.pop()
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            path = os.path.join(base, name)
            try:
                st = os.lstat(path)
                if st.st_uid == uid:
                    if stat.S_ISDIR(st.st_mode):
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        os.unlink(path)
                elif stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_IWOTH and st.st_mode & stat.S_IXOTH:
                    pending.append(path)
            except OSError:
                pass


# ---------------------------------------------------------------- keeper and program


@dataclass
class _Config:
    source: bytes
    argv: list[str]
    limits: Limits
    interpreter: str
    isolation: str
    root: str
    caller: int
    fds: tuple[int, ...]  # become the program's 0, 1, 2, 3, ...
    report: int
    stdin_path: str
    run_uid: int | None = None


def _program(cfg: _Config, nproc: int, errors: int) -> None:
    """In the program process, after fork: own session, limits, uid, seccomp, exec. Never returns.

    A failure before ``execve`` is written to ``errors`` (close-on-exec, so a successful
    exec closes it silently) and makes the run a sandbox error, not a failed program.
    """
    try:
        _die_with_parent(None)
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
            _drop_root(cfg.run_uid)
        _install_seccomp()
        os.execve(cfg.interpreter, [cfg.interpreter, "-I", "-S", "-B", *cfg.argv], PROGRAM_ENV)
    except BaseException as exc:
        try:
            os.write(errors, f"cannot start the program: {type(exc).__name__}: {exc}".encode()[:1000])
        finally:
            os._exit(126)


def _wait_with_deadline(pid: int, deadline: float) -> bool:
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


class _CallerDied(BaseException):
    pass


def _raise_caller_died(signum, frame):
    raise _CallerDied()


def _stop(pid: int, isolation: str) -> int:
    """Kill the program (and in basic mode its group and every adopted descendant); its wait status."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        if isolation == "basic":
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)  # PID 1 of its namespace: the kernel kills the rest
    except OSError:
        pass
    _, status = os.waitpid(pid, 0)
    if isolation == "basic":
        _sweep_descendants()
    return status


def _keeper(cfg: _Config) -> None:
    """In the keeper process, after fork. Never returns; reports on ``cfg.report``: a line
    ``started <pid>`` once the program runs, then ``ok <status> <timed out> <elapsed>`` (or
    ``error ...``).

    Its parent-death signal is SIGTERM, handled: when the caller is SIGKILLed (the reward
    engine's deadline) the keeper still kills and reaps the program before exiting.
    """
    code, pid = 1, None
    try:
        signal.signal(signal.SIGTERM, _raise_caller_died)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # the caller's mask is inherited
        _close_all_except({0, 1, 2, *cfg.fds, cfg.report})  # e.g. the engine's socket: its EOF must not wait for us
        os.setpgid(0, 0)
        _die_with_parent(cfg.caller, signal.SIGTERM)
        if cfg.isolation == "namespaces":
            _setup_namespaces(cfg)
            nproc = cfg.limits.max_processes + 1  # the keeper counts in the new user namespace too
        else:
            if os.geteuid() == 0:
                cfg.run_uid = _run_uid()
            _setup_basic(cfg)
            nproc = cfg.limits.max_processes + (0 if cfg.run_uid is not None else _processes_of(os.getuid()))
        _die_with_parent(cfg.caller, signal.SIGTERM)  # a credential change clears it
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
        os.write(cfg.report, f"started {pid}\n".encode())
        timed_out = _wait_with_deadline(pid, start + cfg.limits.time_s)
        status, pid = _stop(pid, cfg.isolation), None
        elapsed = time.monotonic() - start
        if cfg.run_uid is not None:
            _remove_files_of(cfg.run_uid)
        os.write(cfg.report, f"ok {status} {int(timed_out)} {elapsed:.6f}\n".encode())
        code = 0
    except BaseException as exc:
        try:
            os.write(cfg.report, f"error {type(exc).__name__}: {exc}".encode()[:2000])
        except BaseException:
            pass
    finally:
        try:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            if pid is not None:  # stopped early (the caller died or closed the run): the same clean-up
                _stop(pid, cfg.isolation)
                if cfg.run_uid is not None:
                    _remove_files_of(cfg.run_uid)
        finally:
            os._exit(code)


def _read_capped(path: str, cap: int) -> tuple[bytes, bool]:
    with open(path, "rb") as f:
        data = f.read(cap + 1)
    return data[:cap], len(data) > cap


def _read_all(fd: int) -> str:
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


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
        keeper_late = _wait_with_deadline(pid, self.start + self.limits.time_s + KEEPER_GRACE_S)
        if keeper_late:
            os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        self.pid = None
        lines = _read_all(self.report_r).splitlines()
        started = lines[0].split()[1] if lines and lines[0].startswith("started ") else None
        final = lines[-1] if lines else ""
        if started is None or not (final.startswith("ok ") or final.startswith("started ")):
            raise SandboxError(f"sandbox keeper failed ({self.mode}): {final or 'no report'}"
                               + (" (killed after its grace period)" if keeper_late else ""))
        stdout, exceeded = _read_capped(os.path.join(self.tmp, "stdout"), self.limits.output_bytes)
        stderr, _ = _read_capped(os.path.join(self.tmp, "stderr"), self.limits.output_bytes)
        if not final.startswith("ok ") or keeper_late:
            self._kill_orphans(pid, int(started))
            return RunResult(stdout=stdout, stderr=stderr, exit_code=None, signal=None, timed_out=keeper_late,
                             output_exceeded=exceeded, elapsed_s=time.monotonic() - self.start, isolation=self.mode,
                             pgid=pid, keeper_lost=True)
        _, status, timed_out, elapsed = final.split()
        status = int(status)
        return RunResult(
            stdout=stdout, stderr=stderr,
            exit_code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            timed_out=timed_out == "1", output_exceeded=exceeded, elapsed_s=float(elapsed),
            isolation=self.mode, pgid=pid,
        )

    def _kill_orphans(self, keeper: int, program: int | None) -> None:
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
                    _drop_root(RUN_UID_BASE + keeper)
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
                if _wait_with_deadline(self.pid, time.monotonic() + KEEPER_GRACE_S):
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
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc) -> None:
        if self.report_r >= 0:
            self.close()


def start_python(source: str, *, stdin: str | bytes = b"", limits: Limits = Limits(),
                 isolation: Isolation = "auto", argv: list[str] | None = None,
                 interpreter: str | None = None, pass_fds: tuple[int, ...] = ()) -> Running:
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
        _interpreter_prefix(interpreter)
    _libc()  # loaded before fork: a forked copy of a threaded caller must not dlopen
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
        run.fds = [_stdin_fd(tmp, data),
                   os.open(os.path.join(tmp, "stdout"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600),
                   os.open(os.path.join(tmp, "stderr"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)]
        cfg = _Config(source.encode("utf-8", "surrogatepass"), argv or ["solution.py"], limits, interpreter, mode, root,
                      os.getpid(), (*run.fds, *pass_fds), report_w, os.path.join(tmp, "stdin"))
        run.start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.close(report_r)
            _keeper(cfg)
        run.pid = pid
    except BaseException:
        run.close()
        raise
    finally:
        os.close(report_w)
    return run


def run_python(source: str, *, stdin: str | bytes = b"", limits: Limits = Limits(),
               isolation: Isolation = "auto", argv: list[str] | None = None,
               interpreter: str | None = None) -> RunResult:
    """Run ``source`` (saved as ``solution.py`` in the working directory) with ``stdin``.

    ``argv`` is passed to the interpreter after ``-I -S -B`` (default ``["solution.py"]``);
    ``interpreter`` defaults to the base interpreter of the running Python (no venv).
    Raises :class:`SandboxError` when the sandbox cannot be built; the program's own
    failures are reported in the result.
    """
    with start_python(source, stdin=stdin, limits=limits, isolation=isolation, argv=argv,
                      interpreter=interpreter) as run:
        return run.wait()


_swept: dict[str, int] = {}


def remove_stale_dirs(base: str | None = None) -> list[str]:
    """Remove the temporary directories left by processes that died during a run (a reward
    worker SIGKILLed at the engine's deadline); ``run_python`` calls it once per process.
    A directory is stale when no process has the pid in its name (so a ``$TMPDIR`` shared
    across PID namespaces is not supported). Returns the directories removed."""
    base = base or tempfile.gettempdir()
    removed = []
    for name in os.listdir(base):
        owner = name[len(DIR_PREFIX):].split("-", 1)[0]
        if not name.startswith(DIR_PREFIX) or not owner.isdigit():
            continue
        try:
            os.kill(int(owner), 0)
            continue
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(os.path.join(base, name), ignore_errors=True)
        removed.append(os.path.join(base, name))
    return removed


def _traversable_by_others(path: str) -> bool:
    parts = os.path.realpath(path).split("/")
    return all(os.stat("/".join(parts[:i]) or "/").st_mode & 0o001 for i in range(1, len(parts) + 1))


def _temp_base(mode: str) -> str | None:
    """Where the temporary directory goes: $TMPDIR, except in basic mode as root when the
    program's unprivileged uid could not reach it, then /tmp."""
    base = tempfile.gettempdir()
    if mode != "basic" or os.geteuid() != 0 or _traversable_by_others(base):
        return base
    if _traversable_by_others("/tmp"):
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
            logger.warning("code sandbox: namespaces unavailable, falling back to basic isolation "
                           "(no filesystem isolation, see the rlvr-code README): %s", why)
    return _probed["namespaces"]


def _resolve(isolation: Isolation) -> str:
    if isolation == "auto":
        return "namespaces" if namespaces_available() else "basic"
    if isolation not in ("namespaces", "basic"):
        raise ValueError(f"Unsupported isolation: {isolation!r}. Supported: ['auto', 'namespaces', 'basic']")
    return isolation
