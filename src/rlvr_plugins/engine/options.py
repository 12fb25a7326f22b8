"""Every option of the reward engine: its default, and the rule its value must satisfy, stated once.

Used by :class:`~rlvr_plugins.engine.RewardEngine`, by :class:`~rlvr_plugins.rewards.Engines` and by the
config's ``engine:`` section (where two options have other names, :data:`CONFIG_NAMES`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Literal, get_args

from ..errors import shown

MAX_ABS_REWARD = 1e6
"""The largest reward magnitude a run accepts (``max_abs_value``; the config calls it ``max_abs_reward``).

Rewards are O(1) by design. A larger value is a plugin bug (``RewardContractError``, or a failed
item with ``nonfinite="mask"``), like NaN: ``1e30`` is finite, but it would dominate the group mean,
and its square overflows the float32 group statistics (std ``inf``)."""

OnError = Literal["mask", "raise"]
Nonfinite = Literal["error", "mask"]
ON_ERROR: tuple[str, ...] = get_args(OnError)
NONFINITE: tuple[str, ...] = get_args(Nonfinite)


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "num_workers": (_count, "an integer >= 1"),
    "timeout_s": (_positive, "a number > 0"),
    "max_consecutive_failures": (_count, "an integer >= 1"),
    "nonfinite": (lambda v: v in NONFINITE, "'error' or 'mask'"),
    "on_error": (lambda v: v in ON_ERROR, "'mask' (a reward that raises fails that item) or 'raise' (it stops the run)"),
    "in_process": (lambda v: isinstance(v, bool), "true or false"),
    "memory_limit_mb": (lambda v: v is None or _count(v),
                        "an integer >= 1 (MiB of address space per worker) or null for no limit"),
    "max_abs_value": (lambda v: v is None or _positive(v), "a number > 0, or null for no bound"),
}
"""Per option: the check its value must pass, and what a valid value is (said in error messages)."""

CONFIG_NAMES = {"num_workers": "workers", "max_abs_value": "max_abs_reward"}
"""The options that have another name in the config's ``engine:`` section."""


@dataclasses.dataclass(frozen=True)
class EngineOptions:
    """The reward engine's options, with the defaults of a run (``rlvr train``, :class:`~rlvr_plugins.rewards.Engines`).

    A bare ``RewardEngine(**keywords)`` starts from :meth:`bare` instead: no memory limit and no magnitude
    bound unless given. Every value is checked on construction: a :class:`ValueError` names each bad option
    and what it must be.
    """

    num_workers: int = 2
    """Worker processes for isolated rewards."""
    timeout_s: float = 10.0
    """Hard deadline per item, in seconds: past it the worker is killed and the item fails."""
    max_consecutive_failures: int = 64
    """Failures in a row of one reward that stop the call (``RewardPluginFailing``)."""
    nonfinite: Nonfinite = "error"
    """``"error"``: NaN, infinities and values over ``max_abs_value`` are contract errors; ``"mask"``: failed items."""
    on_error: OnError = "mask"
    """``"mask"``: an exception fails its item; ``"raise"``: the first one stops the call."""
    in_process: bool = False
    """Score in the calling process: no workers, no deadline, no isolation."""
    memory_limit_mb: int | None = 4096
    """Address space (``RLIMIT_AS``) of each worker, in MiB: caps runaway sympy, fits a worker that imports
    torch on CPU (~700). ``None``: no limit."""
    max_abs_value: float | None = MAX_ABS_REWARD
    """The largest reward magnitude accepted (:data:`MAX_ABS_REWARD`); ``None``: no bound."""

    def __post_init__(self) -> None:
        problems = [f"{name} must be {what}, got {shown(value)}" for name, value, what in _problems(vars(self))]
        if problems:
            raise ValueError("invalid reward engine options: " + "; ".join(problems))
        object.__setattr__(self, "timeout_s", float(self.timeout_s))
        if self.max_abs_value is not None:
            object.__setattr__(self, "max_abs_value", float(self.max_abs_value))

    @classmethod
    def bare(cls, **options: Any) -> EngineOptions:
        """The options of ``RewardEngine(**options)``: the engine as a mechanism, without a run's limits
        (``memory_limit_mb`` and ``max_abs_value`` are ``None`` unless given)."""
        return cls(**{"memory_limit_mb": None, "max_abs_value": None, **options})

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
        return [(keys[name], f"must be {what}, got {shown(value)}") for name, value, what in _problems(values)]


def _config_keys() -> dict[str, str]:
    return {f.name: CONFIG_NAMES.get(f.name, f.name) for f in dataclasses.fields(EngineOptions)}


def _problems(values: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    return [(name, values[name], what) for name, (ok, what) in RULES.items() if name in values and not ok(values[name])]
