"""``RewardEngine``: one lock, one pool of worker processes, and a tally and a dispatch per ``score()`` call."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .dispatch import Dispatch, score_in_process
from .options import EngineOptions, completion_too_large
from .pool import Pool
from .tally import EngineCounters, Tally
from .values import IN_PROCESS_HINT, RewardContractError, ScoreResult, describe, safe


class RewardEngine:
    """Scores reward plugins item by item, in worker processes, with a hard per-item deadline.

    Built from an :class:`EngineOptions` (keywords replace its fields), or from keywords alone: then
    from :meth:`EngineOptions.bare`, without a run's memory limit and magnitude bound unless given.

    ``on_error`` decides what an exception raised by the reward function does: ``"mask"`` (the
    default) fails that item (no score) and counts it towards ``max_consecutive_failures``;
    ``"raise"`` stops the call at the first one, as TRL does (in-process: the function's own
    exception, with a note naming the reward and the item; in a worker:
    :class:`RewardFunctionError`). Timeouts and worker crashes are failures of the engine's
    isolation, not of the function's logic: they are masked under both settings.
    """

    DEFAULT_TIMEOUT_S = EngineOptions.timeout_s

    def __init__(self, options: EngineOptions | None = None, **keywords: Any) -> None:
        self.options = EngineOptions.bare(**keywords) if options is None else dataclasses.replace(options, **keywords)
        self._lock = threading.RLock()
        self._counters = EngineCounters()
        self._pid = os.getpid()
        self._closed = False
        self._pool = Pool(self.options, self._counters)
        self._finalizer = weakref.finalize(self, self._pool.close)
        self._pool.start()

    @property
    def _workers(self) -> list:
        return self._pool.workers

    def score(self, name: str, fn: Callable[..., float | None], items: Sequence[Mapping[str, Any]]) -> ScoreResult:
        """Call fn(**item) for each item with a hard per-item deadline, in parallel across worker processes."""
        items = list(items)
        with self._lock:
            self._check_usable()
            tally = Tally(self.options, self._counters, name, items)
            self._refuse_too_large(tally)
            if not tally.remaining:
                return tally.result()
            if self.options.in_process:
                return score_in_process(tally, fn)
            key, payload = self._ship(name, fn)
            return Dispatch(self._pool, tally, key, payload).run()

    def _refuse_too_large(self, tally: Tally) -> None:
        """Items whose completion is over ``max_completion_mb`` get no score, with the reason, before any work."""
        limit = self.options.max_completion_mb
        if limit is None:
            return
        for index, item in enumerate(tally.items):
            problem = completion_too_large(item.get("completion"), limit) if isinstance(item, Mapping) else None
            if problem is not None:
                tally.refuse(index, problem)

    def _check_usable(self) -> None:
        if self._closed:
            raise RuntimeError("RewardEngine is closed")
        if os.getpid() != self._pid:
            raise RuntimeError("RewardEngine was created in another process (fork); create a new one here")

    @staticmethod
    def _ship(name: str, fn: Callable[..., Any]) -> tuple[str, bytes]:
        try:
            payload = pickle.dumps(fn, pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            raise RewardContractError(
                f"reward plugin {name!r}: its scoring function {safe(repr(fn), 120)} cannot be pickled for the "
                f"worker processes ({describe(exc)}); use a module-level function or class instance, or "
                f"{IN_PROCESS_HINT}"
            ) from exc
        return f"{name}:{hashlib.blake2b(payload, digest_size=12).hexdigest()}", payload

    @property
    def stats(self) -> dict[str, int]:
        """Cumulative counts: calls (items scored), failures, timeouts, workers_restarted."""
        return self._counters.stats()

    def close(self) -> None:
        """Kill the worker processes; idempotent."""
        with self._lock:
            self._closed = True
            self._finalizer()

    def __enter__(self) -> RewardEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
