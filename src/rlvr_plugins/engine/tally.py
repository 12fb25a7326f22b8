"""The results of one ``score()`` call, item by item, and what they add to the engine's counters."""

from __future__ import annotations

import collections
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .options import EngineOptions
from .values import (
    ERROR,
    NONE,
    OK,
    TRACEBACK_SEP,
    VALID_VALUES,
    Outcome,
    RewardContractError,
    RewardFunctionError,
    RewardPluginFailing,
    ScoreResult,
    safe,
)

logger = logging.getLogger("rlvr_plugins.engine")
traceback_logger = logging.getLogger("rlvr_plugins.engine.traceback")
"""The traceback of each failed item, at DEBUG (``rlvr -v`` shows it), captured where the reward ran."""

_SAMPLE_CHARS = 300


@dataclass
class EngineCounters:
    """What an engine has counted over its life: the tally of each call and the pool add to it."""

    calls: int = 0
    failures: int = 0
    timeouts: int = 0
    workers_restarted: int = 0
    consecutive: dict[str, int] = field(default_factory=dict)
    """Per reward name, failed items in a row (across calls, in the order results arrive)."""
    recent_errors: dict[str, collections.deque] = field(default_factory=dict)
    """Per reward name, the last three errors (quoted when the reward fails too often)."""

    def stats(self) -> dict[str, int]:
        """Cumulative counts: calls (items scored), failures, timeouts, workers_restarted."""
        return {
            "calls": self.calls,
            "failures": self.failures,
            "timeouts": self.timeouts,
            "workers_restarted": self.workers_restarted,
        }


def _item_sample(item: Any) -> str:
    try:
        clipped = {k: v[:_SAMPLE_CHARS] if isinstance(v, (str, bytes)) else v for k, v in dict(item).items()}
        text = ascii(clipped)
    except BaseException:
        return "<unrepresentable item>"
    return text if len(text) <= _SAMPLE_CHARS else text[: _SAMPLE_CHARS - 3] + "..."


class Tally:
    """Results of one score() call; ``abort`` is the error that stops it, once there is one."""

    def __init__(
        self, options: EngineOptions, counters: EngineCounters, name: str, items: list[Mapping[str, Any]]
    ) -> None:
        self.options, self.counters, self.name, self.items = options, counters, name, items
        n = len(items)
        self.values, self.failed = [math.nan] * n, [False] * n
        self.errors: list[str | None] = [None] * n
        self.logs: list[list[tuple]] | None = None
        self.remaining = n
        self.abort: BaseException | None = None

    def record(self, index: int, outcome: Outcome, payload: Any, logs: list[tuple] | None = None) -> None:
        if outcome is ERROR:
            payload, _, trace = str(payload).partition(TRACEBACK_SEP)
            if trace:
                traceback_logger.debug("reward %s, item %d: %s", safe(self.name), index, trace.rstrip())
        self.remaining -= 1
        self.counters.calls += 1
        if logs:
            if self.logs is None:
                self.logs = [[] for _ in self.items]
            self.logs[index] = logs
        if outcome is ERROR and self.options.on_error == "raise":
            self.abort = self.abort or RewardFunctionError(
                f"reward plugin {self.name!r} raised on item {index}: {payload} (engine on_error='raise'; "
                "on_error='mask' scores such items as failed instead)"
            )
            return
        limit = self.options.max_abs_value
        if outcome is OK and math.isfinite(payload) and (limit is None or abs(payload) <= limit):
            self._succeed(index, payload)
        elif outcome is NONE:
            self._succeed(index, math.nan)
        elif outcome is ERROR:
            self.fail(index, payload)
        elif outcome is OK and self.options.nonfinite == "mask":
            what = "non-finite" if not math.isfinite(payload) else f"out-of-range (max_abs_value={limit:g})"
            self.fail(index, f"{what} value {payload!r}")
        else:
            self.abort = self.abort or self._contract_error(index, outcome, payload)

    def lost(self, index: int, error: str, timeout: bool = False) -> None:
        """An item that produced no result of its own (timeout, crash, undecodable)."""
        self.remaining -= 1
        self.counters.calls += 1
        self.fail(index, error, timeout)

    def refuse(self, index: int, error: str) -> None:
        """An item never given to the reward (its completion is too large): no score, counted as a failure,
        but not towards ``max_consecutive_failures`` (it says nothing about the reward)."""
        self.remaining -= 1
        self.failed[index], self.errors[index] = True, error
        self.counters.failures += 1
        logger.warning("reward %s did not score item %d: %s", safe(self.name), index, error)

    def fail(self, index: int, error: str, timeout: bool = False) -> None:
        counters, limit = self.counters, self.options.max_consecutive_failures
        self.failed[index], self.errors[index] = True, error
        counters.failures += 1
        counters.timeouts += timeout
        logger.warning(
            "reward %s failed on item %d: %s; item: %s", safe(self.name), index, error, _item_sample(self.items[index])
        )
        recent = counters.recent_errors.setdefault(self.name, collections.deque(maxlen=3))
        recent.append(f"item {index}: {error}")
        count = counters.consecutive[self.name] = counters.consecutive.get(self.name, 0) + 1
        if count >= limit and self.abort is None:
            counters.consecutive[self.name] = 0
            self.abort = RewardPluginFailing(
                f"reward plugin {self.name!r} failed on {count} consecutive items "
                f"(max_consecutive_failures={limit}); last errors: " + "; ".join(recent)
            )

    def _succeed(self, index: int, value: float) -> None:
        self.values[index] = value
        self.counters.consecutive[self.name] = 0

    def _contract_error(self, index: int, outcome: Outcome, payload: Any) -> RewardContractError:
        if outcome is Outcome.OK:
            limit = self.options.max_abs_value
            bound = "" if limit is None else f" and at most {limit:g} in magnitude (max_abs_value)"
            return RewardContractError(
                f"reward plugin {self.name!r} returned {payload!r} for item {index}: rewards must be finite{bound}; "
                f"return {VALID_VALUES}, or set nonfinite='mask' to count such values as failed items"
            )
        return RewardContractError(
            f"reward plugin {self.name!r} returned {payload} for item {index}; expected {VALID_VALUES}"
        )

    def result(self) -> ScoreResult:
        return ScoreResult(values=self.values, failed=self.failed, errors=self.errors, logs=self.logs)
