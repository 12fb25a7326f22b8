"""Helpers for the rlvr-code tests: interpreters for basic mode, and process inspection."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time

import pytest


def runnable_by_others(path: str) -> bool:
    """Whether a user other than the owner (nobody) can execute ``path``: every directory on the
    way must be o+x and the file o+x."""
    real = os.path.realpath(path)
    parts = real.split("/")
    for i in range(2, len(parts)):
        if not os.stat("/".join(parts[:i])).st_mode & stat.S_IXOTH:
            return False
    return bool(os.stat(real).st_mode & stat.S_IXOTH)


def basic_python() -> str | None:
    """An interpreter for basic mode: as root the program runs as nobody, who needs to run it."""
    if os.geteuid() != 0:
        return None
    for candidate in (sys.executable, shutil.which("python3") or "", "/usr/bin/python3"):
        if candidate and os.path.exists(candidate) and runnable_by_others(candidate):
            return candidate
    pytest.skip("basic isolation as root needs an interpreter that nobody can execute")


def processes() -> list[tuple[int, int, bytes]]:
    """(pid, process group, command line) of every process on the host."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                pgrp = int(f.read().rsplit(b")", 1)[1].split()[2])
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ")
        except (OSError, IndexError, ValueError):
            continue
        out.append((int(name), pgrp, cmdline))
    return out


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def survivors(token: str, wait_s: float = 0.0) -> list[tuple[int, int, bytes]]:
    """Processes whose command line contains ``token``, after waiting up to ``wait_s`` for them to go."""
    end = time.monotonic() + wait_s
    while True:
        left = [p for p in processes() if token.encode() in p[2]]
        if not left or time.monotonic() >= end:
            return left
        time.sleep(0.05)


def host_can_fork() -> bool:
    return subprocess.run(["true"], timeout=30).returncode == 0
