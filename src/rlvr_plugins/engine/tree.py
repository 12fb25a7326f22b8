"""A worker's process tree: the worker makes itself a child subreaper, and the parent kills the whole tree.

A reward may start processes that leave the worker's process group (``setsid``, a double-forked
daemon). With ``PR_SET_CHILD_SUBREAPER`` on the worker, an orphaned descendant re-parents to the
worker instead of to init, so while the worker lives every process it started is below it in the
parent links of ``/proc``. :func:`kill_tree` stops that tree top-down (a stopped process cannot fork),
then kills it. Linux only; elsewhere the tree is the worker alone.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Mapping

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Make this process the child subreaper of everything it starts (a no-op outside Linux)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except Exception:
        pass


def parents() -> dict[int, int]:
    """Every process's parent, from ``/proc`` (empty where there is none)."""
    found: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    found[int(name)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    return found


def descendants(root: int, parent_of: Mapping[int, int]) -> set[int]:
    """The processes below ``root`` in ``parent_of`` (pid -> parent pid), ``root`` excluded.

    >>> sorted(descendants(10, {11: 10, 12: 11, 13: 1, 14: 12}))
    [11, 12, 14]
    """
    children: dict[int, list[int]] = {}
    for pid, parent in parent_of.items():
        children.setdefault(parent, []).append(pid)
    found, pending = set(), [root]
    while pending:
        for kid in children.get(pending.pop(), ()):
            if kid not in found and kid != root:
                found.add(kid)
                pending.append(kid)
    return found


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except OSError:
        pass


def kill_tree(root: int, wait_s: float = 5.0) -> None:
    """SIGKILL ``root`` (a subreaper) and every process below it: stop them all first, round by
    round until a round finds no new one, so that none can fork or re-parent out of reach; then
    wait up to ``wait_s`` until those below it are dead (the caller reaps ``root``)."""
    _signal(root, signal.SIGSTOP)
    stopped: set[int] = set()
    while True:
        new = descendants(root, parents()) - stopped
        if not new:
            break
        for pid in new:
            _signal(pid, signal.SIGSTOP)
        stopped |= new
    for pid in stopped:
        _signal(pid, signal.SIGKILL)
    _signal(root, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while any(_running(pid) for pid in stopped) and time.monotonic() < deadline:
        time.sleep(0.005)


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False
