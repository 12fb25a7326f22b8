"""What every benchmark shares: the machine's load, paired ratios with a bootstrap confidence
interval, the refusal to compare runs that did different work, and a CPU-time ledger of
whose code ran.

Pure functions and one small class; imported by the scripts beside it (``sys.path``) and
by ``tests/test_benchmarks.py``.
"""

from __future__ import annotations

import functools
import math
import os
import random
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any


def load_average() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages, rounded to 0.01 (``[]`` where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def machine_note(load_start: list[float], load_end: list[float]) -> dict[str, Any]:
    """The ``machine`` block every benchmark prints: cores and the load average at start and end."""
    return {"cpus": os.cpu_count(), "load_average_start": load_start, "load_average_end": load_end}


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ascending ``sorted_values``, linear between order statistics
    (numpy's default): position ``q * (n - 1)``."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = q * (len(sorted_values) - 1)
    low, high = math.floor(pos), math.ceil(pos)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)


def bootstrap_ci(
    values: Sequence[float],
    *,
    statistic: Callable[[Sequence[float]], float] = statistics.median,
    confidence: float = 0.95,
    resamples: int = 4000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic(values)``: ``resamples`` draws of ``len(values)``
    values with replacement (``random.Random(seed)``, so the interval is reproducible), the
    statistic of each, and its ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles."""
    if not values:
        raise ValueError("bootstrap of no values")
    rng = random.Random(seed)
    n = len(values)
    stats = sorted(statistic([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    tail = (1.0 - confidence) / 2.0
    return percentile(stats, tail), percentile(stats, 1.0 - tail)


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float], **bootstrap: Any) -> dict[str, Any]:
    """Per-pair ratios ``numerator[i] / denominator[i]``, their median and its bootstrap interval."""
    if len(numerator) != len(denominator) or not numerator:
        raise ValueError(f"paired ratio needs equal, non-empty series; got {len(numerator)} and {len(denominator)}")
    ratios = [a / b for a, b in zip(numerator, denominator)]
    low, high = bootstrap_ci(ratios, **bootstrap)
    return {"median": statistics.median(ratios), "ci95": [low, high], "pairs": len(ratios)}


class DifferentWork(Exception):
    """Two runs whose outputs differ: a ratio of their times would compare different work."""


def check_identical_work(
    a: dict[str, list],
    b: dict[str, list],
    *,
    rel: float = 1e-5,
    abs_tol: float = 1e-7,
    names: tuple[str, str] = ("a", "b"),
) -> None:
    """Raise :class:`DifferentWork` naming the first difference between two runs' records.

    Each record maps a kind (``completion_ids``, ``loss``, ...) to one entry per step;
    ``*_ids`` and ``str`` entries must be equal exactly, numbers within ``rel`` / ``abs_tol``.
    Both runs must have recorded the same kinds and the same number of steps.
    """
    if sorted(a) != sorted(b):
        raise DifferentWork(f"{names[0]} recorded {sorted(a)}, {names[1]} recorded {sorted(b)}")
    for kind in sorted(a):
        xs, ys = a[kind], b[kind]
        if len(xs) != len(ys):
            raise DifferentWork(f"{kind}: {names[0]} has {len(xs)} steps, {names[1]} has {len(ys)}")
        if not xs:
            raise DifferentWork(f"{kind}: no steps recorded")
        for step, (x, y) in enumerate(zip(xs, ys)):
            if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not kind.endswith("_ids"):
                same = math.isclose(x, y, rel_tol=rel, abs_tol=abs_tol)
            else:
                same = x == y
            if not same:
                raise DifferentWork(f"{kind} differs at step {step}: {names[0]} {short(x)}, {names[1]} {short(y)}")


def short(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


class Ledger:
    """CPU time of each thread charged to the owner of the innermost wrapped call running.

    ``wrap(owner, fn)`` returns ``fn`` that, while it runs, charges its thread's CPU time
    (``time.thread_time``) to ``owner``; a wrapped call inside it charges to its own owner
    until it returns (exclusive time, like a profiler's "tottime" grouped by owner). Time in
    no wrapped call is charged to ``None``. ``totals(thread_ident)`` is a snapshot.
    """

    def __init__(self, clock: Callable[[], float] = time.thread_time) -> None:
        self._clock = clock
        self._local = threading.local()
        self._totals: dict[int, defaultdict[str | None, float]] = defaultdict(lambda: defaultdict(float))

    def _state(self):
        local = self._local
        if not hasattr(local, "stack"):
            local.stack, local.last = [None], self._clock()
            local.totals = self._totals[threading.get_ident()]
        return local

    def _charge(self, local) -> None:
        now = self._clock()
        local.totals[local.stack[-1]] += now - local.last
        local.last = now

    def wrap(self, owner: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            local = self._state()
            self._charge(local)
            local.stack.append(owner)
            try:
                return fn(*args, **kwargs)
            finally:
                self._charge(local)
                local.stack.pop()

        return wrapped

    def totals(self, thread_ident: int) -> dict[str | None, float]:
        return dict(self._totals.get(thread_ident, {}))
