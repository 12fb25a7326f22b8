"""Every option of the reward engine: its default, and the rule its value must satisfy, stated once.

Used by :class:`~rlvr_plugins.engine.RewardEngine`, by :class:`~rlvr_plugins.rewards.Engines` and by the
config's ``engine:`` section (where two options have other names, :data:`CONFIG_NAMES`). Values are
checked by :mod:`rlvr_plugins.fields`, the checker of plugin options and of the config's sections.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from .. import fields
from ..errors import shown
from ..fields import Rule, at_least

MAX_ABS_REWARD = 1e6
"""The largest reward magnitude a run accepts (``max_abs_value``; the config calls it ``max_abs_reward``).

Rewards are O(1) by design. A larger value is a plugin bug (``RewardContractError``, or a failed
item with ``nonfinite="mask"``), like NaN: ``1e30`` is finite, but it would dominate the group mean,
and its square overflows the float32 group statistics (std ``inf``)."""

MAX_COMPLETION_MB = 4.0
"""A run's largest completion given to a reward, in MiB of UTF-8 text (``max_completion_mb``).

About 30 times a 32k-token completion (~130 KB of text), and small enough that no reward nor
``rlvr score``'s token count holds gigabytes for one input: a 15 MB completion took 6.4 GB (the
count of a character-level tokenizer), a 50 MB one aborted ``rlvr score``."""

_MiB = 1024 * 1024


def text_bytes(value: Any, limit: int | None = None) -> int:
    """The UTF-8 size of the text in ``value``: a string, or the strings in a list, tuple or dict of them
    (TRL's chat messages), other values counting 0; the count stops once it passes ``limit`` bytes.

    >>> text_bytes("abc"), text_bytes("é"), text_bytes([{"role": "assistant", "content": "hi"}])
    (3, 2, 11)
    """
    if isinstance(value, str):
        return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, dict):
        value = list(value.values())
    if not isinstance(value, (list, tuple)):
        return 0
    total = 0
    for part in value:
        total += text_bytes(part, None if limit is None else limit - total)
        if limit is not None and total > limit:
            break
    return total


def completion_too_large(completion: Any, max_mb: float | None) -> str | None:
    """Why ``completion`` is not given to any reward (over ``max_mb`` MiB of text, :func:`text_bytes`), or None.

    >>> completion_too_large("x" * 3 * 2**20, 2.0)
    'the completion is 3.0 MiB of text, over max_completion_mb=2 (engine.max_completion_mb in a config): not scored'
    """
    if max_mb is None:
        return None
    limit = int(max_mb * _MiB)
    size = text_bytes(completion, limit)
    if size <= limit:
        return None
    return (
        f"the completion is {size / _MiB:.1f} MiB of text, over max_completion_mb={max_mb:g} "
        "(engine.max_completion_mb in a config): not scored"
    )


WORKERS_PER_CPU = 4
"""Without ``max_workers``, a run starts at most this many worker processes per CPU (:func:`worker_cap`)."""


def worker_cap(cpus: int) -> int:
    """The most worker processes an engine starts when ``max_workers`` is not given: 4 per CPU.

    A reward worker mostly waits (on math-verify, a sandbox, a judge's HTTP call), so a few per CPU
    pay; a typo such as ``workers: 1000000`` would start a process storm instead.

    >>> worker_cap(2), worker_cap(64)
    (8, 256)
    """
    return WORKERS_PER_CPU * cpus


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity, as ``taskset`` and containers set it)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


CONFIG_NAMES = {"num_workers": "workers", "max_abs_value": "max_abs_reward"}
"""The options that have another name in the config's ``engine:`` section."""


@dataclasses.dataclass(frozen=True)
class EngineOptions:
    """The reward engine's options, with the defaults of a run (``rlvr train``, :class:`~rlvr_plugins.rewards.Engines`).

    A bare ``RewardEngine(**keywords)`` starts from :meth:`bare` instead: no memory limit, no magnitude
    bound and no completion size limit unless given. Every value is checked on construction: a
    :class:`ValueError` names each bad option and what it must be.
    """

    num_workers: Annotated[int, at_least(1)] = 2
    """Worker processes for isolated rewards; at most ``max_workers``."""
    max_workers: Annotated[
        int | None, Rule(lambda v: v is None or v >= 1, "an integer >= 1, or null for 4 per CPU")
    ] = None
    """The most worker processes allowed; ``None``: :func:`worker_cap` of this machine's CPU count (4 per CPU)."""
    timeout_s: Annotated[float, Rule(lambda v: v > 0, "a number > 0")] = 10.0
    """Hard deadline per item, in seconds: past it the worker is killed and the item fails."""
    max_consecutive_failures: Annotated[int, at_least(1)] = 64
    """Failures in a row of one reward that stop the call (``RewardPluginFailing``)."""
    nonfinite: Annotated[Literal["error", "mask"], Rule(lambda v: True, "'error' or 'mask'")] = "error"
    """``"error"``: NaN, infinities and values over ``max_abs_value`` are contract errors; ``"mask"``: failed items."""
    on_error: Annotated[
        Literal["mask", "raise"],
        Rule(lambda v: True, ("'mask' (a reward that raises fails that item) or 'raise' (it stops the run)")),
    ] = "mask"
    """``"mask"``: an exception fails its item; ``"raise"``: the first one stops the call."""
    in_process: Annotated[bool, Rule(lambda v: True, "true or false")] = False
    """Score in the calling process: no workers, no deadline, no isolation."""
    max_completion_mb: Annotated[
        float | None, Rule(lambda v: v is None or v > 0, "a number > 0 (MiB of text) or null for no limit")
    ] = MAX_COMPLETION_MB
    """The largest completion given to a reward, in MiB of UTF-8 text (:data:`MAX_COMPLETION_MB`): a larger one
    gets no score from any reward, with the reason (:func:`completion_too_large`), and is never sent to a worker,
    so one input cannot hold a worker's or the caller's memory. ``None``: no limit."""
    memory_limit_mb: Annotated[
        int | None,
        Rule(lambda v: v is None or v >= 1, ("an integer >= 1 (MiB of address space per worker) or null for no limit")),
    ] = 4096
    """Address space (``RLIMIT_AS``) of each worker, in MiB: caps runaway sympy, fits a worker that imports
    torch on CPU (~700). ``None``: no limit."""
    max_abs_value: Annotated[
        float | None, Rule(lambda v: v is None or v > 0, ("a number > 0, or null for no bound"))
    ] = MAX_ABS_REWARD
    """The largest reward magnitude accepted (:data:`MAX_ABS_REWARD`); ``None``: no bound."""

    def __post_init__(self) -> None:
        values, problems = fields.check_fields(_hints(), vars(self))
        if problems:
            raise ValueError(
                "invalid reward engine options: "
                + "; ".join(f"{p.key} must be {p.what}, got {shown(p.value)}" for p in problems)
            )
        for name, value in values.items():  # an int given for a float option becomes a float
            object.__setattr__(self, name, value)
        problem = workers_problem(self.num_workers, self.max_workers, cpu_count())
        if problem:
            raise ValueError(f"invalid reward engine options: num_workers {problem} (or give max_workers)")

    @classmethod
    def bare(cls, **options: Any) -> EngineOptions:
        """The options of ``RewardEngine(**options)``: the engine as a mechanism, without a run's limits
        (``memory_limit_mb``, ``max_abs_value`` and ``max_completion_mb`` are ``None`` unless given)."""
        return cls(**{"memory_limit_mb": None, "max_abs_value": None, "max_completion_mb": None, **options})

    @property
    def deadline_s(self) -> float | None:
        """The hard deadline per item, or ``None`` in-process (no deadline): what ``rlvr_validate_run`` receives
        as ``engine_timeout_s``."""
        return None if self.in_process else self.timeout_s

    @classmethod
    def from_config(cls, section: Mapping[str, Any] | None) -> EngineOptions:
        """The options of a config's ``engine:`` section (keys named as in :data:`CONFIG_NAMES`)."""
        section = section or {}
        return cls(**{name: section[key] for name, key in _config_keys().items() if key in section})

    @staticmethod
    def config_keys() -> set[str]:
        """The keys of the config's ``engine:`` section."""
        return set(_config_keys().values())

    @staticmethod
    def config_problems(section: Mapping[str, Any]) -> list[tuple[str, str]]:
        """``(key, problem)`` for each bad value of a config's ``engine:`` section (unknown keys are not checked)."""
        keys = _config_keys()
        values = {name: section[key] for name, key in keys.items() if key in section}
        checked, problems = fields.check_fields(_hints(), values)
        out = [(keys[p.key], f"must be {p.what}, got {shown(p.value)}") for p in problems]
        if not problems:
            problem = workers_problem(
                checked.get("num_workers", cls_default("num_workers")), checked.get("max_workers"), cpu_count()
            )
            if problem:
                out.append((keys["num_workers"], f"{problem} (or set engine.max_workers)"))
        return out


def workers_problem(num_workers: int, max_workers: int | None, cpus: int) -> str | None:
    """Why ``num_workers`` is too many, or None: it must be at most ``max_workers``, or without it
    :func:`worker_cap` ``(cpus)``.

    >>> workers_problem(9, None, 2)
    'must be at most 8 (4 per CPU, 2 CPUs), got 9'
    >>> workers_problem(9, 16, 2) is None, workers_problem(17, 16, 2)
    (True, 'must be at most max_workers=16, got 17')
    """
    if max_workers is not None:
        return None if num_workers <= max_workers else f"must be at most max_workers={max_workers}, got {num_workers}"
    cap = worker_cap(cpus)
    if num_workers <= cap:
        return None
    return f"must be at most {cap} ({WORKERS_PER_CPU} per CPU, {cpus} CPU{'s' if cpus != 1 else ''}), got {num_workers}"


def cls_default(name: str) -> Any:
    """The default of one :class:`EngineOptions` field."""
    return next(f.default for f in dataclasses.fields(EngineOptions) if f.name == name)


_HINTS: dict[str, Any] = {}


def _hints() -> dict[str, Any]:
    """The annotations of :class:`EngineOptions` with their rules (read once: ``get_type_hints`` is slow)."""
    if not _HINTS:
        _HINTS.update(fields.hints(EngineOptions))
    return _HINTS


def _config_keys() -> dict[str, str]:
    return {f.name: CONFIG_NAMES.get(f.name, f.name) for f in dataclasses.fields(EngineOptions)}
