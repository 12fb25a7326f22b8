"""The plugin base class, typed options, and the records plugins register (rewards, environments, exploits)."""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from . import fields
from .episodes import MAX_RESULT_CHARS, TOOL_TIMEOUT_S
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

    ``columns``: the dataset columns ``fn`` reads from ``example`` (returning ``None``, "not
    applicable", for a row without a value), each under the name of the plugin option that
    sets it: ``{"answer_column": "answer"}``. A split in which no row has a value in one of
    them is refused when it is loaded (:func:`rlvr_plugins.rewards.unread_columns`): the reward
    would apply to no item and the run would train without it.
    """

    name: str
    fn: Callable[..., float | None]
    weight: float = 1.0
    isolated: bool = True
    completion_format: Literal["text", "messages"] = "text"
    example: Mapping[str, Any] | None = None
    columns: Mapping[str, str] | None = None

    def __post_init__(self):
        if self.columns is not None and not (
            isinstance(self.columns, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in self.columns.items())
        ):
            raise TypeError(
                f"RewardFunction {self.name!r}: columns must map option names to column names "
                f"({{'answer_column': 'answer'}}), got {self.columns!r}"
            )
        if not self.name or not isinstance(self.name, str):
            raise TypeError(f"RewardFunction.name must be a non-empty string, got {self.name!r}")
        if not callable(self.fn):
            raise TypeError(f"RewardFunction {self.name!r}: fn must be callable, got {type(self.fn).__name__}")
        if not isinstance(self.weight, (int, float)) or not math.isfinite(self.weight):
            raise TypeError(f"RewardFunction {self.name!r}: weight must be a finite number, got {self.weight!r}")
        if self.completion_format not in COMPLETION_FORMATS:
            raise TypeError(
                f"RewardFunction {self.name!r}: completion_format must be one of {list(COMPLETION_FORMATS)}, "
                f"got {self.completion_format!r}"
            )
        if self.example is not None and not (
            isinstance(self.example, Mapping) and {"prompt", "completion"} <= set(self.example)
        ):
            raise TypeError(
                f"RewardFunction {self.name!r}: example must be a mapping with 'prompt', 'completion' "
                f"(and 'example', the dataset row), got {self.example!r}"
            )


@dataclass(frozen=True)
class Environment:
    """One environment contributed through ``rlvr_environments``: TRL's ``environment_factory``, by name.

    ``factory()`` returns a fresh environment object (TRL builds one per rollout and reuses it across
    batches, calling ``reset`` before each episode): ``reset(**row) -> str | None`` receives the dataset
    row and may return text appended to the last user message; every public method other than ``reset``
    and ``get_reward`` is a tool the policy can call (typed arguments and a Google-style docstring, as TRL
    requires); an optional ``get_reward() -> float`` scores the finished episode (a reward column named
    after the environment's class, weight 1). A reward plugin reads the episode's final state through
    its ``environment`` keyword (:class:`RewardFunction`, ``isolated=False``).

    ``name`` is what the rows' ``environment`` column holds when several environments are enabled;
    with one, every row uses it. ``max_result_chars``: a tool's answer longer than this is cut, saying
    how many characters were left out (bytes are decoded as UTF-8, an answer that is not valid UTF-8 is
    an error turn), so that one answer cannot fill the episode's token budget.

    ``tool_timeout_s``: the deadline of one tool call, in seconds. A call that has not answered by then is
    an error turn (``timeout: <tool> did not answer within <s> s``), counted in ``tools/timeouts/<tool>``;
    the episode and the run go on. Tools run in a thread that nobody can kill: the late call runs on,
    unwaited, its answer dropped; while ``episodes.MAX_HUNG_CALLS`` (8) such calls are still running, every
    further tool call is answered with a timeout at once without being started. A tool with a deadline of
    its own (a sandbox) should set this above it, so that its own, more specific error answers first.
    """

    name: str
    factory: Callable[[], Any]
    description: str = ""
    max_result_chars: int = MAX_RESULT_CHARS
    tool_timeout_s: float = TOOL_TIMEOUT_S

    def __post_init__(self):
        if not self.name or not isinstance(self.name, str):
            raise TypeError(f"Environment.name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.max_result_chars, int) or self.max_result_chars < 1:
            raise TypeError(f"Environment {self.name!r}: max_result_chars must be an integer >= 1")
        timeout = self.tool_timeout_s
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise TypeError(
                f"Environment {self.name!r}: tool_timeout_s must be a number of seconds > 0, got {timeout!r}"
            )
        if not callable(self.factory):
            raise TypeError(f"Environment {self.name!r}: factory must be callable, got {type(self.factory).__name__}")


@dataclass(frozen=True)
class RewardExploit:
    """One class of known hacks against one reward, contributed through ``rlvr_reward_exploits``.

    ``build(row)`` returns the hacking completions for one dataset row (``row``: the canonical
    columns, ``answer`` and the others, as the reward's ``example`` sees them; ``prompt`` too): a
    sequence of strings, empty when the class does not apply to that row. It runs in the auditing
    process, never in a worker. ``rlvr audit rewards`` scores every completion through the reward
    engine, as training does, and reports the share scored above ``wrong`` (the value a wrong
    completion gets, default 0.0) as the class's *accept rate*.
    """

    reward: str
    name: str
    build: Callable[[Mapping[str, Any]], Any]
    description: str = ""
    wrong: float = 0.0

    def __post_init__(self):
        for key in ("reward", "name"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key):
                raise TypeError(f"RewardExploit.{key} must be a non-empty string, got {getattr(self, key)!r}")
        if not callable(self.build):
            raise TypeError(f"RewardExploit {self.name!r}: build must be callable, got {type(self.build).__name__}")
        if not isinstance(self.wrong, (int, float)) or not math.isfinite(self.wrong):
            raise TypeError(f"RewardExploit {self.name!r}: wrong must be a finite number, got {self.wrong!r}")


def describe_options(options_cls: type) -> list[str]:
    """``["weight (float, default 1.0)", ...]`` for error messages and ``rlvr plugins``."""
    annotations = fields.hints(options_cls)
    out = []
    for f in dataclasses.fields(options_cls):
        default = fields.default_of(f)
        shown_default = "required" if default is dataclasses.MISSING else default
        out.append(f"{f.name} ({fields.type_name(annotations[f.name])}, default {shown_default!r})")
    return out


def parse_options(plugin: str, options_cls: type, raw: Mapping[str, Any]) -> Any:
    """Validate ``raw`` against the dataclass ``options_cls`` (its type hints, ``Annotated`` rules included,
    checked by :mod:`rlvr_plugins.fields`) and instantiate it.

    Every problem (unknown key, wrong type, missing required option) is reported in one
    :class:`PluginOptionError`, with the valid options listed.
    """
    if not isinstance(raw, Mapping):
        raise PluginOptionError(
            plugin, [f"options must be a mapping, got {type(raw).__name__} {shown(raw)}"], describe_options(options_cls)
        )
    annotations = fields.hints(options_cls)
    values, found = fields.check_fields(annotations, raw, fields.required_fields(options_cls))
    problems, keys = [], []
    for p in found:
        keys.append(None if p.kind == "missing" else p.key)
        if p.kind == "unknown":
            close = difflib.get_close_matches(p.key, annotations, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"unknown option {shown(p.key)}{hint}")
        elif p.kind == "missing":
            problems.append(f"option {p.key!r} is required")
        else:
            finite = " (finite)" if p.finite or (p.kind == "rule" and fields._non_finite(p.value)) else ""
            problems.append(
                f"option {p.key!r} must be {fields.type_name(annotations[p.key])}{finite}, got {shown(p.value)}"
            )
    if problems:
        raise PluginOptionError(plugin, problems, describe_options(options_cls), keys)
    try:
        return options_cls(**values)
    except (TypeError, ValueError) as exc:
        raise PluginOptionError(plugin, [str(exc)], describe_options(options_cls)) from exc
