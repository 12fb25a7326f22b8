"""Reward plugins as TRL reward functions, scored through the reward engine."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from .engine import RewardEngine, ScoreResult
from .errors import RLVRError
from .plugin import RewardFunction

TRL_CONTROL_KWARGS = frozenset({"trainer_state", "log_extra", "log_metric", "environments", "completion_ids"})

MAX_ABS_REWARD = 1e6
"""The largest reward magnitude a run accepts (``RewardEngine(max_abs_value=...)``; an option overrides it).

Rewards are O(1) by design. A larger value is a plugin bug (``RewardContractError``, or a failed
item with ``nonfinite="mask"``), like NaN: ``1e30`` is finite, but it would dominate the group mean,
and its square overflows the float32 group statistics (std ``inf``)."""


def completion_text(completion: Any) -> str:
    """TRL passes a string, or for chat data a list of messages: return the assistant's text."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, Mapping))
    return str(completion)


def score_items(prompts: Sequence[Any], completions: Sequence[Any], examples: Sequence[Mapping[str, Any]]):
    """The engine's items: one ``{"prompt", "completion", "example"}`` per completion."""
    return [
        {"prompt": p, "completion": completion_text(c), "example": dict(e)}
        for p, c, e in zip(prompts, completions, examples, strict=True)
    ]


class Engines:
    """The isolated engine (worker processes, deadline) and the in-process one, built lazily."""

    def __init__(self, **options: Any):
        self.options = options
        self._isolated: RewardEngine | None = None
        self._local: RewardEngine | None = None
        self._closed_stats: dict[str, Any] = {}

    def for_reward(self, reward: RewardFunction) -> RewardEngine:
        if reward.isolated and not self.options.get("in_process", False):
            if self._isolated is None:
                self._isolated = self._engine(in_process=False)
            return self._isolated
        if self._local is None:
            self._local = self._engine(in_process=True)
        return self._local

    def _engine(self, in_process: bool) -> RewardEngine:
        return RewardEngine(**{"max_abs_value": MAX_ABS_REWARD, **self.options, "in_process": in_process})

    def score(self, reward: RewardFunction, items: list[dict[str, Any]]) -> ScoreResult:
        return self.for_reward(reward).score(reward.name, reward.fn, items)

    def stats(self) -> dict[str, Any]:
        """Cumulative counts over the life of this object, engines closed since included."""
        out = dict(self._closed_stats)
        for engine in (self._isolated, self._local):
            if engine is not None:
                for key, value in engine.stats.items():
                    out[key] = out.get(key, 0) + value
        return out

    def close(self) -> None:
        self._closed_stats = self.stats()
        for engine in (self._isolated, self._local):
            if engine is not None:
                engine.close()
        self._isolated = self._local = None


class TRLReward:
    """One reward plugin seen by TRL: ``f(prompts, completions, **columns) -> list[float]``.

    A completion the engine could not score (timeout, exception) comes back as NaN and is
    recorded in ``last_failed``; the trainer masks it (left out of the group baseline,
    advantage 0). ``None`` from the plugin (reward does not apply) is NaN too, but not a
    failure: TRL's semantics for rewards that apply to part of the data.

    An error that must stop the run (a contract violation, a plugin failing K times in a
    row) is not raised here but kept in ``pending_error`` and the batch is returned as
    failed: the trainer raises it after every process has gathered its rewards, on every
    process at once, so one rank's error cannot leave the others waiting in a collective.
    """

    def __init__(self, reward: RewardFunction, plugin: str, engines: Engines):
        self.reward, self.plugin, self.engines = reward, plugin, engines
        self.__name__ = reward.name
        self.last_failed: list[bool] = []
        self.pending_error: RLVRError | None = None

    def __call__(self, prompts, completions, **columns) -> list[float]:
        keys = [k for k in columns if k not in TRL_CONTROL_KWARGS]
        examples = [{k: columns[k][i] for k in keys} for i in range(len(prompts))]
        try:
            result = self.engines.score(self.reward, score_items(prompts, completions, examples))
        except RLVRError as exc:
            self.pending_error = exc
            self.last_failed = [True] * len(prompts)
            return [math.nan] * len(prompts)
        self.last_failed = list(result.failed)
        return [v if not f else math.nan for v, f in zip(result.values, result.failed, strict=True)]
