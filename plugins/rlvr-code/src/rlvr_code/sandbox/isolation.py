"""The two isolation modes, as the keeper sets them up before it forks the program.

``namespaces``: new mount, user, PID, network, IPC and UTS namespaces; the root is a
size-capped tmpfs with read-only binds of ``/usr`` (and the interpreter's prefix), four device
nodes and a writable ``/work`` and ``/tmp`` (``pivot_root``; the host tree is unmounted).

``basic``: a temporary working directory on the host filesystem; the keeper is a child
subreaper, and as root the program runs as a uid of its own (:func:`run_uid`), whose
processes and leftover files are found by that uid.
"""

from __future__ import annotations

import os
import signal
import stat
import time

from .cleanup import DISCARD_BUDGET_S as CLEANUP_BUDGET_S
from .cleanup import remove_tree
from .libc import PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE, check, libc, prctl
from .records import KeeperConfig, SandboxError
from .syscalls import CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER, CLONE_NEWUTS, arch_table

NOBODY = 65534
INNER_UID = 1000
RUN_UID_BASE = 2_000_000_000  # basic mode as root: the program's uid is this plus the keeper's pid
SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm")  # basic mode as root: swept of the program's files

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 1024, 2048, 1 << 21
_ST_TO_MS = {
    1: _MS_RDONLY,
    2: _MS_NOSUID,
    4: _MS_NODEV,
    8: _MS_NOEXEC,
    1024: _MS_NOATIME,
    2048: _MS_NODIRATIME,
    4096: _MS_RELATIME,
}
_MNT_DETACH = 2
_READ_ONLY_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
_DEVICES = ("null", "zero", "random", "urandom")
_SHARED_DIRS = frozenset(
    {
        "/",
        "/tmp",
        "/var/tmp",
        "/dev",
        "/dev/shm",
        "/home",
        "/root",
        "/etc",
        "/proc",
        "/sys",
        "/run",
        "/var",
        "/mnt",
        "/media",
        "/srv",
        "/opt",
        "/work",
    }
)


def drop_root(uid: int = NOBODY) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def traversable_by_others(path: str) -> bool:
    parts = os.path.realpath(path).split("/")
    return all(os.stat("/".join(parts[:i]) or "/").st_mode & 0o001 for i in range(1, len(parts) + 1))


def interpreter_prefix(interpreter: str) -> str:
    """The directory bound read-only for the interpreter: two levels above its real path
    (``<prefix>/bin/python3``); refused when that is a shared directory of the host."""
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(interpreter)))
    if prefix in _SHARED_DIRS:
        raise SandboxError(
            f"the interpreter {interpreter} lives directly under {prefix}, which would be bound "
            "into the sandbox whole; install it under its own prefix (<prefix>/bin/python3)"
        )
    return prefix


def _output_files(cfg: KeeperConfig, owner: int | None) -> list[str]:
    """The stdout and stderr files, given to ``owner`` (the program's uid, when it is not the
    caller's) so that the program can open them again by name (``/dev/stdout``)."""
    paths = [os.path.join(os.path.dirname(cfg.stdin_path), stream) for stream in ("stdout", "stderr")]
    if owner is not None:
        for path in paths:
            os.chown(path, owner, owner)
    return paths


# ---------------------------------------------------------------- namespaces mode


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    check(libc().mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _bind_read_only(source: str, target: str) -> None:
    _mount(source, target, None, _MS_BIND)
    kept = os.statvfs(target).f_flag
    flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
    flags |= sum(ms for st, ms in _ST_TO_MS.items() if kept & st)
    _mount(None, target, None, flags)


def _write(path: str, text: str, dir_fd: int | None = None) -> None:
    fd = os.open(path, os.O_WRONLY, dir_fd=dir_fd)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _build_root(cfg: KeeperConfig, owner: int | None) -> None:
    """Mount the tmpfs root with read-only binds, write the program, pivot into it."""
    root, limits, interpreter, source = cfg.root, cfg.limits, cfg.interpreter, cfg.source
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={limits.disk_mb}m,mode=0755")
    prefix = interpreter_prefix(interpreter)
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
    check(libc().syscall(arch_table().numbers["pivot_root"], b".", b"."), "pivot_root")
    check(libc().umount2(b".", _MNT_DETACH), "umount old root")
    os.chdir("/work")


def _enter_user_namespace(flags: int, proc: int) -> None:
    """``proc`` is a directory fd of the host's /proc (still usable after ``pivot_root``)."""
    uid, gid = os.geteuid(), os.getegid()
    check(libc().unshare(CLONE_NEWUSER | flags), "unshare")
    _write("self/setgroups", "deny", proc)
    _write("self/uid_map", f"{INNER_UID} {uid} 1\n", proc)
    _write("self/gid_map", f"{INNER_UID} {gid} 1\n", proc)


def setup_namespaces(cfg: KeeperConfig) -> None:
    """Enter the namespaces and build the root; as root, first become ``nobody``, which then
    owns the user namespace."""
    others = CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    proc = os.open("/proc", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if os.geteuid() == 0:
            check(libc().unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
            _build_root(cfg, owner=NOBODY)
            drop_root()
            prctl(PR_SET_DUMPABLE, 1, "prctl(PR_SET_DUMPABLE)")  # else /proc/self/uid_map stays root's
            _enter_user_namespace(others, proc)
            prctl(PR_SET_DUMPABLE, 0, "prctl(PR_SET_DUMPABLE)")  # no ptrace of this copy of the caller
        else:
            _enter_user_namespace(CLONE_NEWNS, proc)
            _build_root(cfg, owner=None)
            check(libc().unshare(others), "unshare(pid, net, ipc, uts)")
    finally:
        os.close(proc)


# ---------------------------------------------------------------- basic mode


def run_uid() -> int:
    """Basic mode as root: the program's uid, unique to this run (the keeper's pid above a base
    no real account uses). No other process has it, so the program can signal nothing but its
    own tree, its process count starts at 0, and its leftover files are found by owner."""
    return RUN_UID_BASE + os.getpid()


def setup_basic(cfg: KeeperConfig) -> None:
    """Write the program into its working directory and make the keeper a subreaper; as root,
    hand the directory and the output files to ``cfg.run_uid``."""
    work = cfg.root
    with open(os.path.join(work, "solution.py"), "wb") as f:
        f.write(cfg.source)
    prctl(PR_SET_CHILD_SUBREAPER, 1, "prctl(PR_SET_CHILD_SUBREAPER)")
    os.chdir(work)
    if cfg.run_uid is not None:
        os.chown(work, cfg.run_uid, cfg.run_uid)
        os.chmod(work, 0o700)
        _output_files(cfg, cfg.run_uid)
        if not traversable_by_others(cfg.interpreter):
            raise PermissionError(
                f"basic isolation as root runs the program as an unprivileged uid, which cannot "
                f"execute {cfg.interpreter}; choose an interpreter every user can run "
                "(option python, e.g. /usr/bin/python3)"
            )
    else:
        prctl(PR_SET_DUMPABLE, 0, "prctl(PR_SET_DUMPABLE)")  # the program (same uid) cannot read our memory


def processes_of(uid: int) -> int:
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


def sweep_descendants() -> None:
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


def remove_files_of(uid: int, keeper: int, budget_s: float = CLEANUP_BUDGET_S) -> bool:
    """Remove what ``uid`` left in the host's shared writable directories: at their top, and in
    every world-writable folder of someone else's found in them (at any depth through such
    folders), since the program could write there too. Within ``budget_s``: a tree not removed
    by then is renamed ``rlvr-code-<keeper>-leftover-<name>`` in its folder, for the next sweep
    of stale directories (``remove_stale_dirs``, in the background). True when nothing is left."""
    deadline = time.monotonic() + budget_s
    clean = True
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
                    if not remove_tree(path, deadline):
                        clean = False
                        os.rename(path, os.path.join(base, f"rlvr-code-{keeper}-leftover-{name}"))
                elif stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_IWOTH and st.st_mode & stat.S_IXOTH:
                    pending.append(path)
            except OSError:
                pass
    return clean
