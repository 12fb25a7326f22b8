"""Removing what a run left on the host's filesystem, bounded in time and never recursive.

A program may leave a directory nested thousands of levels deep (``shutil.rmtree`` recurses once
per level: ``RecursionError``; the path outgrows ``PATH_MAX``) or millions of entries (minutes to
remove). :func:`remove_tree` walks with one directory descriptor at a time and a stack of names,
so depth costs neither recursion nor descriptors, and it stops at a deadline. :func:`discard`
removes what fits in a short budget and hands the rest to a background process of low priority,
so that no item, this one or the next, pays for a program's mess with its own time.
"""

from __future__ import annotations

import math
import os
import stat
import time

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
DISCARD_BUDGET_S = 0.25
"""Time a run's clean-up spends in the foreground before it hands the rest to a background process."""

_deleters: list[int] = []


def _empty(fd: int) -> list[str] | None:
    """Remove the files and empty directories in the directory ``fd``; the subdirectories left
    (not empty), or None when it cannot be read."""
    try:
        entries = list(os.scandir(fd))
    except OSError:
        return None
    left = []
    for entry in entries:
        is_dir = False
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
            if is_dir and entry.stat(follow_symlinks=False).st_nlink > 2:  # it has subdirectories: no rmdir yet
                left.append(entry.name)
                continue
            (os.rmdir if is_dir else os.unlink)(entry.name, dir_fd=fd)
        except FileNotFoundError:
            pass
        except OSError:
            if is_dir:
                left.append(entry.name)
    return left


def _open_dir(name: str, fd: int | None) -> int:
    """Open a directory (no symbolic link followed) and make sure its owner may list, enter and
    change it: in basic mode as an ordinary user the program's files are the caller's, and it may
    have taken those rights away (``chmod 0``)."""
    try:
        child = os.open(name, _DIR_FLAGS, dir_fd=fd)
    except PermissionError:
        if not stat.S_ISDIR(os.lstat(name, dir_fd=fd).st_mode):
            raise
        os.chmod(name, 0o700, dir_fd=fd)
        child = os.open(name, _DIR_FLAGS, dir_fd=fd)
    st = os.fstat(child)
    if st.st_uid == os.geteuid() and st.st_mode & 0o700 != 0o700:
        os.fchmod(child, stat.S_IMODE(st.st_mode) | 0o700)
    return child


def remove_tree(path: str, deadline: float = math.inf) -> bool:
    """Remove ``path`` and everything below it without following symbolic links, iteratively,
    until ``deadline`` (``time.monotonic()``); True when it is gone. Never raises.

    One directory descriptor is open at a time: the walk goes down by name and back up by
    ``..``; each level above keeps the names of its subdirectories still to empty, so every
    directory is listed once (plus once more if a subdirectory could not be entered)."""
    if time.monotonic() >= deadline:
        return not os.path.lexists(path)
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return True
        fd = _open_dir(path, None)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    above: list[tuple[list[str], str, tuple[int, int]]] = []  # per level above: (still to empty, entered, identity)
    try:
        left = _empty(fd)
        while left is not None and time.monotonic() < deadline:
            if left:
                name = left.pop()
                try:
                    child = _open_dir(name, fd)
                except OSError:
                    continue  # gone, or cannot be entered: the rmdir of this level reports it
                st = os.fstat(fd)
                above.append((left, name, (st.st_dev, st.st_ino)))
                os.close(fd)
                fd = child
                left = _empty(fd)
            elif above:
                parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = parent
                left, name, identity = above.pop()
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) != identity:  # the tree was moved under us: never go elsewhere
                    return False
                try:
                    os.rmdir(name, dir_fd=fd)
                except FileNotFoundError:
                    pass
            else:
                os.close(fd)
                fd = -1
                os.rmdir(path)
                return True
        return False
    except OSError:
        return False
    finally:
        if fd >= 0:
            os.close(fd)


def discard(paths: list[str], budget_s: float = DISCARD_BUDGET_S, owner_prefix: str = "") -> list[str]:
    """Remove ``paths`` within ``budget_s``; what is left is renamed (``owner_prefix`` + the pid of a
    background process + ``-discard-`` + its old name, in the same directory) and removed by that
    process, at the lowest priority, after this returns. Returns the paths handed over. Never raises."""
    _reap()
    deadline = time.monotonic() + budget_s
    left = [path for path in paths if not remove_tree(path, deadline)]
    if not left:
        return []
    try:
        pid = os.fork()
    except OSError:
        return left  # the next sweep of stale directories finds them
    if pid == 0:
        try:
            os.closerange(3, 1 << 16)  # e.g. the reward engine's socket: its end of file must not wait for us
            os.nice(19)
            for path in left:
                moved = os.path.join(
                    os.path.dirname(path), f"{owner_prefix}{os.getpid()}-discard-{os.path.basename(path)}"
                )
                try:
                    os.rename(path, moved)
                except OSError:
                    moved = path
                remove_tree(moved)
        finally:
            os._exit(0)
    _deleters.append(pid)
    return left


def _reap() -> None:
    """Collect the background removers that have finished (only ours: never ``waitpid(-1)``)."""
    for pid in list(_deleters):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _deleters.remove(pid)


def wait_for_discards(timeout_s: float) -> bool:
    """Wait until this process's background removers are done; True when they are (tests)."""
    end = time.monotonic() + timeout_s
    while _deleters and time.monotonic() < end:
        _reap()
        time.sleep(0.02)
    _reap()
    return not _deleters
