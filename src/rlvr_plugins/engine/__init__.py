"""The reward engine: run plugin scoring functions with a hard per-item deadline.

Every call runs in a persistent worker process, and the parent enforces the deadline by killing
the worker's process group; ``in_process=True`` calls in the calling process instead (no deadline,
no isolation). How and why, what is protected and what is not, and what each module does:
docs/engine.md.

Importing this package loads only the options and the value contract (the config reads the options
on every command, before it may fail fast); the process machinery loads with :class:`RewardEngine`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .options import MAX_ABS_REWARD, EngineOptions
from .values import TRACEBACK_SEP, RewardContractError, RewardFunctionError, RewardPluginFailing, ScoreResult

if TYPE_CHECKING:
    from .calls import LOG_CALLBACKS, is_async_callable
    from .reward_engine import RewardEngine

__all__ = [
    "LOG_CALLBACKS",
    "MAX_ABS_REWARD",
    "TRACEBACK_SEP",
    "EngineOptions",
    "RewardContractError",
    "RewardEngine",
    "RewardFunctionError",
    "RewardPluginFailing",
    "ScoreResult",
    "is_async_callable",
]

_ON_FIRST_USE = {"RewardEngine": "reward_engine", "LOG_CALLBACKS": "calls", "is_async_callable": "calls"}


def __getattr__(name: str) -> Any:
    if name not in _ON_FIRST_USE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_ON_FIRST_USE[name]}"), name)
