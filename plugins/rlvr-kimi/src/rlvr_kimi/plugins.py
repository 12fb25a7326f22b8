"""Kimi k1.5 plugins: ``kimi-length``, the per-prompt length reward (§2.3.3)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlvr_plugins import Plugin, hookimpl
from rlvr_plugins.errors import ConfigError, PluginContractError

from .length import is_correct, kimi_length_reward


class KimiLengthPenalty(Plugin):
    """Adds ``weight * kimi_length_reward`` to the reward from step ``warmup_steps`` on.

    Correctness is read from another reward of the same batch (``correctness_reward``):
    a completion is correct when that reward's raw value is ``>= threshold``; NaN (not
    scored) counts as not correct.
    """

    name = "kimi-length"
    description = "Kimi k1.5 length reward: +0.5 shortest … -0.5 longest per prompt group; wrong answers only lose"

    @dataclass
    class Options:
        weight: float = 1.0
        warmup_steps: int = 0
        correctness_reward: str = "r1-accuracy"
        threshold: float = 1.0

        def __post_init__(self):
            if not math.isfinite(self.weight):
                raise ValueError(f"option 'weight' must be finite, got {self.weight!r}")
            if self.warmup_steps < 0:
                raise ValueError(f"option 'warmup_steps' must be >= 0, got {self.warmup_steps!r}")
            if not self.correctness_reward:
                raise ValueError("option 'correctness_reward' must name a reward, got ''")
            if not math.isfinite(self.threshold):
                raise ValueError(f"option 'threshold' must be finite, got {self.threshold!r}")

    @hookimpl
    def rlvr_validate_run(self, reward_names):
        if self.options.correctness_reward not in reward_names:
            raise ConfigError(self._missing_reward(reward_names))

    def _missing_reward(self, reward_names) -> str:
        return (
            f"plugin {self.name!r}: option correctness_reward={self.options.correctness_reward!r} is not a reward "
            f"of this run. Available rewards: {list(reward_names)}. Enable the plugin that registers it or set "
            "correctness_reward to one of these."
        )

    @hookimpl
    def rlvr_length_penalty(self, completion_lengths, num_generations, rewards_per_func, reward_names, step):
        o = self.options
        if step < o.warmup_steps:
            return None
        if o.correctness_reward not in reward_names:
            raise PluginContractError(self._missing_reward(reward_names))
        column = rewards_per_func[:, list(reward_names).index(o.correctness_reward)]
        correct = is_correct(column, o.threshold)
        return o.weight * kimi_length_reward(completion_lengths, correct, num_generations).to(column.device)
