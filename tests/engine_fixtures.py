"""Scoring functions for test_engine.py; module-level so the engine's workers import them by reference."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

LOADS = 0


def double(x):
    return 2.0 * x


def add(a, b):
    return float(a + b)


def none_if_multiple_of_3(x):
    return None if x % 3 == 0 else float(x)


def returns(value):
    return value


def returns_value(value, text):
    return value


def pid(x):
    return float(os.getpid())


def slow_pid(x):
    time.sleep(0.03)
    return float(os.getpid())


def sleep_if(x, hang=False):
    if hang:
        time.sleep(60)
    return float(x)


def big_power_if(x, hang=False):
    if hang:
        return float((10 ** (10**8)) % 7)
    return float(x)


class MathVerifyUnguarded:
    """math-verify with its own (signal.alarm) timeouts off; imports it when loaded, like a plugin module would."""

    def __init__(self):
        self.timeouts = None

    def __setstate__(self, state):
        import math_verify  # noqa: F401

        self.__dict__.update(state)

    def __call__(self, gold, pred):
        from math_verify import parse, verify

        gold, pred = parse(gold, parsing_timeout=self.timeouts), parse(pred, parsing_timeout=self.timeouts)
        return float(verify(gold, pred, timeout_seconds=self.timeouts))


def raise_value_error_if_negative(x):
    if x < 0:
        raise ValueError(f"negative: {x}")
    return float(x)


class PluginGaveUp(BaseException):
    """Like math-verify's TimeoutException: not an Exception."""


def raise_base_exception_if_negative(x):
    if x < 0:
        raise PluginGaveUp("gave up")
    return float(x)


def sys_exit_if_negative(x):
    if x < 0:
        sys.exit(3)
    return float(x)


def disarm_alarm_then_hang(x):
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    signal.alarm(0)
    time.sleep(60)
    return float(x)


def hard_exit_if_negative(x):
    if x < 0:
        os._exit(1)
    return float(x)


def segfault_if_negative(x):
    if x < 0:
        ctypes.string_at(0)
    return float(x)


def raise_with_text(text):
    raise ValueError(text)


def characters(completion):
    return float(len(completion))


def allocate_mb(mb):
    return float(len(bytearray(mb * 1024 * 1024)))


_KEPT: list = []


def keep_mb(mb):
    """A reward whose cache keeps what it allocates: once out of memory, this process stays out."""
    _KEPT.append(bytearray(mb * 1024 * 1024))
    return float(len(_KEPT))


def fork_sleeper_then_hang(x, pid_file):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with open(pid_file, "w") as f:
        f.write(str(child.pid))
    time.sleep(60)
    return float(x)


def daemon_then(x, pid_file, hang):
    """Starts a daemon (double fork, its own session), then hangs or returns."""
    child = os.fork()
    if child == 0:
        os.setsid()
        if os.fork() == 0:
            with open(pid_file + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(pid_file + ".tmp", pid_file)
            time.sleep(60)
        os._exit(0)
    os.waitpid(child, 0)
    deadline = time.monotonic() + 10
    while not os.path.exists(pid_file) and time.monotonic() < deadline:
        time.sleep(0.01)
    if hang:
        time.sleep(60)
    return float(x)


def thread_env(x):
    """What torch (or any OpenMP/BLAS library) imported here would use."""
    return float(os.environ["OMP_NUM_THREADS"]) * float(os.environ["MKL_NUM_THREADS"])


class OnlyInParent:
    """Pickles fine; unpickling it (which only the worker does) raises."""

    def __reduce__(self):
        return (_refuse, ())


def _refuse():
    raise RuntimeError("not available in the worker")


class Scaled:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return self.k * x


class CountsLoads:
    """Returns how many times an instance was unpickled in this process."""

    def __init__(self):
        self.tag = "counts-loads"

    def __setstate__(self, state):
        global LOADS
        LOADS += 1
        self.__dict__.update(state)

    def __call__(self, x):
        return float(LOADS)
