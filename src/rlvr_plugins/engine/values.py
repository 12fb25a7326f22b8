"""The value contract: what a reward function may return, what a call gives back, and the errors it raises.

A real number (bool, int, float, numpy or 0-d torch value) becomes a float; ``None`` means "does not
apply"; anything else is a plugin bug. Every text made from plugin output is ASCII-safe and bounded.
"""

from __future__ import annotations

import enum
import math
import numbers
import reprlib
import traceback
from dataclasses import dataclass
from typing import Any

from ..errors import PluginContractError, RLVRError

TRACEBACK_SEP = "\x00traceback\x00"
_ERROR_CHARS = 300
VALID_VALUES = "a real number (int, float, bool, numpy or 0-d torch scalar) or None when the reward does not apply"
IN_PROCESS_HINT = (
    "run rewards in the trainer's process, without workers or deadlines (config: "
    "engine: {in_process: true}; Python: RLVRTrainer(..., engine_options={'in_process': True}), or "
    "engines=Engines(in_process=True) with from rlvr_plugins.rewards import Engines)"
)


@dataclass(frozen=True)
class ScoreResult:
    values: list[float]
    failed: list[bool]
    errors: list[str | None]
    logs: list[list[tuple]] | None = None
    """Per item, the ``log_metric`` / ``log_extra`` calls it made (see ``LOG_CALLBACKS``); None when none asked."""


class RewardContractError(PluginContractError):
    """A plugin returned something that is not a reward (or its function cannot be loaded)."""


class RewardPluginFailing(RLVRError, RuntimeError):
    """A plugin failed on too many consecutive items."""


class RewardFunctionError(RLVRError, RuntimeError):
    """A reward function raised in a worker process, with ``on_error="raise"`` (the message names it and the item)."""


class Outcome(str, enum.Enum):
    """What one call of a reward function gave. Between processes it travels as its string value."""

    OK = "ok"
    """A number (possibly non-finite): the payload is the float."""
    NONE = "none"
    """``None``: the reward does not apply."""
    BAD = "bad"
    """Not a reward: the payload describes the value."""
    ERROR = "error"
    """The function raised: the payload is the description, then :data:`TRACEBACK_SEP` and the traceback."""


OK, NONE, BAD, ERROR = Outcome.OK, Outcome.NONE, Outcome.BAD, Outcome.ERROR
"""The members as module names, for the code that runs once per item: reading an enum member off its
class costs ~0.2 us on CPython 3.11, a module global ~0.02 us."""
OUTCOMES = {outcome.value: outcome for outcome in Outcome}
"""``Outcome(value)`` as a dict lookup (the enum call costs ~0.5 us)."""


def safe(text: Any, limit: int = _ERROR_CHARS) -> str:
    """ASCII-only, control characters and lone surrogates escaped, truncated."""
    try:
        out = ascii(text if isinstance(text, str) else str(text))[1:-1]
    except BaseException:
        out = "<unprintable>"
    return out if len(out) <= limit else out[: limit - 3] + "..."


def describe(exc: BaseException) -> str:
    try:
        message = str(exc)
    except BaseException:
        message = "<unprintable message>"
    return safe(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)


def with_traceback(exc: BaseException) -> str:
    """An error payload: the one-line description, then (after :data:`TRACEBACK_SEP`) the formatted traceback."""
    try:
        text = "".join(traceback.format_exception(exc))
    except BaseException:
        text = "<traceback unavailable>"
    return describe(exc) + TRACEBACK_SEP + text


def _describe_value(value: Any) -> str:
    try:
        text = reprlib.repr(value)
    except BaseException:
        text = "<unrepresentable>"
    return f"{safe(text, 120)} (type {type(value).__module__}.{type(value).__qualname__})"


def convert(value: Any) -> tuple[Outcome, Any]:
    """(OK, float) for a number (possibly non-finite), (NONE, None), or (BAD, description)."""
    if value is None:
        return NONE, None
    if type(value) is float:  # the common case, without the ABC checks below
        return OK, value
    plain = value
    if not isinstance(value, (bool, int, float)) and getattr(value, "shape", None) == () and hasattr(value, "item"):
        try:
            plain = value.item()
        except BaseException:
            return BAD, _describe_value(value)
    if isinstance(plain, numbers.Real):
        try:
            return OK, float(plain)
        except OverflowError:
            return OK, -math.inf if plain < 0 else math.inf
        except BaseException:
            pass
    return BAD, _describe_value(value)
