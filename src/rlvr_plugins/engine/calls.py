"""The call protocol: one reward function on one item, in either process.

``fn(**item)``, awaited when it returns an awaitable (on a per-process event loop in a daemon thread,
as TRL runs async rewards), with recording log callbacks when the item names them under
:data:`LOG_CALLBACKS`. The outcome is an :class:`~rlvr_plugins.engine.values.Outcome` and a payload.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .values import BAD, ERROR, Outcome, convert, describe, with_traceback

LOG_CALLBACKS = "__rlvr_log_callbacks__"
"""Item key naming the log callbacks (``log_metric``, ``log_extra``) the function takes; the engine supplies them.

Calls are recorded per item as ``("metric", name, value)`` / ``("extra", column, value)`` and returned in
``ScoreResult.logs``, from worker processes as from the calling one, so the caller replays them in its process."""


def _with_log_callbacks(item: Mapping[str, Any]) -> tuple[dict[str, Any], list[tuple] | None]:
    """The keyword arguments of one call: the item, plus recording log callbacks when it asks for them."""
    wanted = item.get(LOG_CALLBACKS)
    if not wanted:
        return dict(item), None
    logs: list[tuple] = []
    recorders = {
        "log_metric": lambda name, value: logs.append(("metric", name, value)),
        "log_extra": lambda column, value: logs.append(("extra", column, value)),
    }
    kwargs = {k: v for k, v in item.items() if k != LOG_CALLBACKS}
    kwargs.update({name: recorders[name] for name in wanted})
    return kwargs, logs


def invoke(fn: Callable[..., Any], item: Mapping[str, Any]) -> tuple[Any, list[tuple] | None]:
    """``fn(**item)`` (awaited when it returns an awaitable), with the log callbacks the item asks for."""
    kwargs, logs = _with_log_callbacks(item)
    return _resolve(fn(**kwargs)), logs


_PLAIN_RESULTS = (float, int, bool, type(None))  # never awaitable: skip the ABC check


def _resolve(value: Any) -> Any:
    return value if type(value) in _PLAIN_RESULTS else run_coroutine(value) if inspect.isawaitable(value) else value


def call(fn: Callable[..., Any], item: Mapping[str, Any]) -> tuple[Outcome, Any, list[tuple] | None]:
    """One call, never raising: ``(outcome, payload, logs)``."""
    try:
        value, logs = invoke(fn, item)
    except BaseException as exc:
        return ERROR, with_traceback(exc), None
    try:
        return (*convert(value), logs)
    except BaseException as exc:
        return BAD, f"an unconvertible value ({describe(exc)})", logs


_loop_lock = threading.Lock()
_loop: tuple[int, asyncio.AbstractEventLoop] | None = None


def _event_loop() -> asyncio.AbstractEventLoop:
    """One event loop per process, running in a daemon thread (as TRL runs async rewards)."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop[0] != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="rlvr-engine-async", daemon=True).start()
            _loop = (os.getpid(), loop)
        return _loop[1]


def run_coroutine(coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(_as_coroutine(coro), _event_loop()).result()


async def _as_coroutine(awaitable: Any) -> Any:
    return await awaitable


async def gather(fn: Callable[..., Any], items: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Every item of an async reward at once (``asyncio.gather``, like TRL): ``(value, logs)`` or the exception."""

    async def one(item):
        kwargs, logs = _with_log_callbacks(item)
        return await fn(**kwargs), logs

    return await asyncio.gather(*(one(item) for item in items), return_exceptions=True)


def settled(outcome: Any) -> tuple[Any, list[tuple] | None]:
    """A result of :func:`gather`: the ``(value, logs)`` pair, or raise the exception it holds."""
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def is_async_callable(fn: Any) -> bool:
    """True for an ``async def`` function, a partial of one, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004 - the method itself
