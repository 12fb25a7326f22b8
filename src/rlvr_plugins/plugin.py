"""The plugin base class, typed options, and the reward-function record."""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Literal, Mapping

from .errors import PluginOptionError, shown


class Plugin:
    """Base class of every plugin, built-in or third-party.

    A subclass sets ``name`` (the key that enables it in the config), may declare a
    nested dataclass ``Options`` (its typed options with defaults), and implements hooks
    as methods decorated with :data:`rlvr_plugins.hookimpl`. The framework builds one
    instance per run: ``Plugin(options)``, with ``self.options`` an ``Options`` instance.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: An estimator plugin whose advantages equal TRL's for a ``GRPOConfig.scale_rewards`` value
    #: (``"group"``, ``"batch"``, ``"none"``) names it here; ``trainer.scale_rewards`` may then be set
    #: to that value beside it. None: no TRL setting computes this estimator.
    trl_scale_rewards: ClassVar[str | None] = None

    @dataclass
    class Options:
        pass

    def __init__(self, options: Any = None):
        self.options: Any = options if options is not None else self.Options()

    @classmethod
    def parse_options(cls, raw: Mapping[str, Any] | None) -> Any:
        """Build ``Options`` from the config mapping; raise naming the plugin and the option."""
        return parse_options(cls.name, cls.Options, raw or {})


COMPLETION_FORMATS = ("text", "messages")


@dataclass(frozen=True)
class RewardFunction:
    """One reward contributed through ``rlvr_reward_functions``.

    ``fn`` scores one completion: ``fn(prompt=..., completion=..., example=...)`` returns a
    float, or ``None`` when the reward does not apply to that row. ``example`` is the
    dataset row (e.g. ``example["answer"]``). ``fn`` must be picklable (a module-level
    function or an instance of a module-level class), because it runs in worker
    processes with a hard deadline. Set ``isolated=False`` only for cheap functions that
    cannot hang: they run in the trainer's process. ``fn`` may be ``async def``: it is
    awaited (in-process, every item of a batch at once with ``asyncio.gather``, as TRL does).

    What else TRL offers a reward function, ``fn`` receives by declaring the keyword (or
    ``**kwargs``), per completion: ``completion_ids`` (its token ids), ``trainer_state``
    (TRL's ``TrainerState``; in a worker process a namespace of its fields, ``log_history`` empty),
    ``log_metric(name, value)`` (a scalar averaged into this step's metrics),
    ``log_extra(column, value)`` (this completion's value of an extra column of the
    completions table) and ``environment`` (this rollout's ``environment_factory``
    instance; only with ``isolated=False``, the instance lives in the trainer's process).
    The two log callbacks work from worker processes too: their calls are replayed in the
    trainer's process.

    ``completion_format``: ``"text"`` (default) hands ``completion`` over as the
    assistant's text also for conversational data; ``"messages"`` hands it over as TRL
    does, a list of messages for conversational data (a string otherwise).

    ``example``: optionally, one item ``{"prompt": ..., "completion": ..., "example": {...}}``
    that ``fn`` can score. ``rlvr train --check`` and the start of every run score it once,
    through the reward engine: a reward that raises on (or cannot be shipped for) its own
    example is refused before any model is loaded.
    """

    name: str
    fn: Callable[..., float | None]
    weight: float = 1.0
    isolated: bool = True
    completion_format: Literal["text", "messages"] = "text"
    example: Mapping[str, Any] | None = None

    def __post_init__(self):
        if not self.name or not isinstance(self.name, str):
            raise TypeError(f"RewardFunction.name must be a non-empty string, got {self.name!r}")
        if not callable(self.fn):
            raise TypeError(f"RewardFunction {self.name!r}: fn must be callable, got {type(self.fn).__name__}")
        if not isinstance(self.weight, (int, float)) or not math.isfinite(self.weight):
            raise TypeError(f"RewardFunction {self.name!r}: weight must be a finite number, got {self.weight!r}")
        if self.completion_format not in COMPLETION_FORMATS:
            raise TypeError(f"RewardFunction {self.name!r}: completion_format must be one of {list(COMPLETION_FORMATS)}, "
                            f"got {self.completion_format!r}")
        if self.example is not None and not (isinstance(self.example, Mapping)
                                             and {"prompt", "completion"} <= set(self.example)):
            raise TypeError(f"RewardFunction {self.name!r}: example must be a mapping with 'prompt', 'completion' "
                            f"(and 'example', the dataset row), got {self.example!r}")


def describe_options(options_cls: type) -> list[str]:
    """``["weight (float, default 1.0)", ...]`` for error messages and ``rlvr plugins``."""
    hints = typing.get_type_hints(options_cls)
    out = []
    for f in dataclasses.fields(options_cls):
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else "required")
        out.append(f"{f.name} ({_type_name(hints[f.name])}, default {default!r})")
    return out


def parse_options(plugin: str, options_cls: type, raw: Mapping[str, Any]) -> Any:
    """Validate ``raw`` against the dataclass ``options_cls`` and instantiate it.

    Every problem (unknown key, wrong type, missing required option) is reported in one
    :class:`PluginOptionError`, with the valid options listed.
    """
    if not isinstance(raw, Mapping):
        raise PluginOptionError(plugin, [f"options must be a mapping, got {type(raw).__name__} {shown(raw)}"],
                                describe_options(options_cls))
    hints = typing.get_type_hints(options_cls)
    fields = {f.name: f for f in dataclasses.fields(options_cls)}
    problems, values = [], {}
    for key, value in raw.items():
        if key not in fields:
            close = difflib.get_close_matches(str(key), fields, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"unknown option {shown(key)}{hint}")
            continue
        ok, converted = _check_type(value, hints[key])
        if not ok:
            finite = "" if not isinstance(value, (int, float)) or _finite_float(value) else " (finite)"
            problems.append(f"option {key!r} must be {_type_name(hints[key])}{finite}, got {shown(value)}")
        else:
            values[key] = converted
    for name, f in fields.items():
        if name not in raw and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            problems.append(f"option {name!r} is required")
    if problems:
        raise PluginOptionError(plugin, problems, describe_options(options_cls))
    try:
        return options_cls(**values)
    except (TypeError, ValueError) as exc:
        raise PluginOptionError(plugin, [str(exc)], describe_options(options_cls)) from exc


def _finite_float(value: int | float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _check_type(value: Any, tp: Any) -> tuple[bool, Any]:
    origin = typing.get_origin(tp)
    if tp is Any:
        return True, value
    if origin in (typing.Union, types.UnionType):
        for arm in typing.get_args(tp):
            ok, converted = _check_type(value, arm)
            if ok:
                return True, converted
        return False, value
    if tp is type(None):
        return value is None, value
    if origin is Literal:
        return value in typing.get_args(tp), value
    if tp is bool:
        return isinstance(value, bool), value
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if tp is float:  # finite: .nan, .inf and ints past the float range are never an option's value
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and _finite_float(value)
        return ok, float(value) if ok else value
    if tp is str:
        return isinstance(value, str), value
    if origin in (list, tuple) or tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return False, value
        args = typing.get_args(tp)
        if args and args[-1] is not Ellipsis and origin is list:
            checked = [_check_type(v, args[0]) for v in value]
            return all(ok for ok, _ in checked), [v for _, v in checked]
        return True, list(value) if origin is list else tuple(value)
    if origin is dict or tp is dict:
        return isinstance(value, Mapping), dict(value) if isinstance(value, Mapping) else value
    return isinstance(value, tp) if isinstance(tp, type) else True, value


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    if origin is not None:
        return str(tp).replace("typing.", "")
    return getattr(tp, "__name__", str(tp))
