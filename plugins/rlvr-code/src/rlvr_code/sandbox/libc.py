"""The C library calls the standard library lacks (``mount``, ``umount2``, ``unshare``,
``prctl``, ``syscall``), through ctypes, with a failure raised as ``OSError``."""

from __future__ import annotations

import ctypes
import functools
import os
import signal

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 4, 22, 36, 38


@functools.lru_cache(maxsize=1)
def libc() -> ctypes.CDLL:
    """The process's C library; loaded before any fork (a forked copy of a threaded caller
    must not ``dlopen``)."""
    lib = ctypes.CDLL(None, use_errno=True)
    lib.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    lib.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.unshare.argtypes = [ctypes.c_int]
    lib.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return lib


def check(result: int, what: str) -> None:
    """Raise ``OSError`` with the call's errno when ``result`` is not 0."""
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def prctl(option: int, arg: int, what: str) -> None:
    check(libc().prctl(option, arg, 0, 0, 0), what)


def die_with_parent(parent_pid: int | None, signum: int = signal.SIGKILL) -> None:
    """Get ``signum`` when the parent dies; exit at once if ``parent_pid`` is already gone."""
    prctl(PR_SET_PDEATHSIG, signum, "prctl(PR_SET_PDEATHSIG)")
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(137)
