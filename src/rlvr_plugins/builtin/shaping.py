"""Built-in length shaping: ``dapo-overlong`` (DAPO's soft overlong punishment), ``cosine-length``
(Yeo et al. 2025's cosine length reward) and ``prime-length`` (prime-rl's pass-rate-scaled group
length penalty)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import hookimpl
from ..errors import ConfigError, PluginContractError
from ..plugin import Plugin


def _missing_correctness_reward(plugin: Plugin, reward_names) -> str:
    return (
        f"plugin {plugin.name!r}: option correctness_reward={plugin.options.correctness_reward!r} is not a reward "
        f"of this run. Available rewards: {list(reward_names)}. Set correctness_reward to one of these."
    )


def check_correctness_reward(plugin: Plugin, reward_names) -> None:
    """Refuse (at start-up) a shaping plugin whose ``correctness_reward`` option names no reward of the run."""
    if plugin.options.correctness_reward not in reward_names:
        raise ConfigError(_missing_correctness_reward(plugin, reward_names), source="plugins")


def correctness_column(plugin: Plugin, rewards_per_func, reward_names):
    """``(N,)``: the raw values of the plugin's ``correctness_reward`` (its column of ``rewards_per_func``)."""
    if plugin.options.correctness_reward not in reward_names:
        raise PluginContractError(_missing_correctness_reward(plugin, reward_names))
    return rewards_per_func[:, list(reward_names).index(plugin.options.correctness_reward)]


class MaxLengthShaping(Plugin):
    """A length shaping with an ``L_max`` option (``max_length``) that defaults to the run's
    ``max_completion_length``, learnt in ``rlvr_validate_run``; a larger one is refused there."""

    def __init__(self, options=None):
        super().__init__(options)
        self._run_max_length: int | None = None

    def max_length(self) -> int:
        """``L_max``: the option, else the run's ``max_completion_length``."""
        max_length = self.options.max_length or self._run_max_length
        if max_length is None:
            raise ConfigError(
                f"plugin {self.name!r}: option 'max_length' is not set and the run's max_completion_length "
                "is unknown; set max_length",
                source="plugins",
            )
        return max_length

    def check_run_length(self, grpo_args) -> None:
        """Learn the run's ``max_completion_length``; refuse an ``L_max`` beyond it."""
        run_max = getattr(grpo_args, "max_completion_length", None)
        self._run_max_length = run_max if isinstance(run_max, int) else None
        max_length = self.max_length()
        if self._run_max_length is not None and max_length > self._run_max_length:
            raise ConfigError(
                f"plugin {self.name!r}: option max_length={max_length} exceeds trainer.max_completion_length="
                f"{self._run_max_length}, so no completion reaches the penalty's end; set max_length <= "
                f"{self._run_max_length}",
                source="plugins",
            )


class DAPOOverlong(MaxLengthShaping):
    """DAPO's soft overlong punishment (Yu et al. 2025, §3.4, Eq. 13) as a length penalty.

    ``weight · R(|y|)`` with ``R = 0`` up to ``L_max − L_cache`` tokens, then linear down to
    ``−1`` at ``L_max`` (and ``−1`` beyond); formula in
    :func:`rlvr_plugins.advantages.overlong_penalty`. ``max_length`` (``L_max``) defaults to the
    run's ``max_completion_length``, ``cache`` (``L_cache``) to a fifth of it (DAPO: 4096 of
    20480). Like every length penalty it is added after the estimator, group-centred, never
    divided by a std.

    With TRL's ``mask_truncated_completions=True`` a completion cut at ``max_completion_length``
    takes no part in the loss, so its ``−1`` never pushes it down; it still lowers its group's
    mean penalty, which raises the shaping advantage of the group's other completions. With
    the default ``False`` (DAPO's setting) the truncated completion is pushed down by ``−1``
    relative to its group.
    """

    name = "dapo-overlong"
    description = "DAPO soft overlong punishment: 0 below L_max - L_cache, linear to -1 at L_max"

    @dataclass
    class Options:
        max_length: int | None = None
        cache: int | None = None
        weight: float = 1.0

        def __post_init__(self):
            if self.max_length is not None and self.max_length < 1:
                raise ValueError(f"option 'max_length' must be >= 1, got {self.max_length!r}")
            if self.cache is not None and self.cache < 1:
                raise ValueError(f"option 'cache' must be >= 1, got {self.cache!r}")
            if self.max_length is not None and self.cache is not None and self.cache > self.max_length:
                raise ValueError(f"option 'cache' ({self.cache}) must not exceed 'max_length' ({self.max_length})")
            if not math.isfinite(self.weight) or self.weight < 0:
                raise ValueError(f"option 'weight' must be a finite number >= 0, got {self.weight!r}")

    def limits(self) -> tuple[int, int]:
        """``(L_max, L_cache)``: the options, else the run's ``max_completion_length`` and a fifth of it."""
        max_length = self.max_length()
        cache = self.options.cache or max(1, max_length // 5)
        if cache > max_length:
            raise ConfigError(
                f"plugin {self.name!r}: option cache={cache} exceeds L_max={max_length}; set cache <= {max_length}",
                source="plugins",
            )
        return max_length, cache

    @hookimpl
    def rlvr_validate_run(self, grpo_args):
        self.check_run_length(grpo_args)
        self.limits()

    @hookimpl
    def rlvr_claims(self):
        return ["truncated-completions"]

    @hookimpl
    def rlvr_length_penalty(self, completion_lengths):
        from ..advantages import overlong_penalty  # torch: when the hook runs

        max_length, cache = self.limits()
        return self.options.weight * overlong_penalty(completion_lengths, max_length, cache)


class CosineLength(MaxLengthShaping):
    """The cosine length reward of Yeo et al. 2025, "Demystifying Long Chain-of-Thought Reasoning in
    LLMs" (its "cosine length-scaling reward"), as a length shaping.

    ``weight · R(|y|, correct)``: for a correct answer ``R`` falls along a half cosine from
    ``max_value_correct`` (empty) to ``min_value_correct`` (at ``max_length`` tokens), for a wrong
    one it rises from ``min_value_wrong`` to ``max_value_wrong``: short correct answers earn more,
    long wrong answers lose less (the model is pushed to think longer when it fails). Formula in
    :func:`rlvr_plugins.advantages.cosine_length_reward`; the defaults (0.5 … 1 correct, −1 … −0.5
    wrong) have the paper's shape. open-r1's ``cosine`` reward has the same formula but defaults
    ``min_value_wrong=0.0, max_value_wrong=-0.5``, under which a wrong answer loses *more* the
    longer it is (0 when empty, −0.5 at ``max_len``); set those two options to reproduce it.
    Correctness is read from another reward of the batch (``correctness_reward``, required):
    correct when its raw value is ``>= threshold``; not scored (NaN) counts as wrong.
    ``max_length`` defaults to the run's ``max_completion_length``; lengths are tokens (open-r1
    counts characters).

    Why a length shaping (``rlvr_length_penalty``) and not a reward: ``R`` is a function of the
    length, and the two things a reward cannot do here decide it. (1) As a reward it would reach
    the estimator, and GRPO's division by the group std would turn the length differences of an
    all-wrong group (−0.98 against −0.97) into advantages of about ±1, as large as right
    against wrong: the fault the shaping rule exists for (added after the estimator,
    group-centred, never divided by a std). (2) It needs the verdict of the correctness reward,
    which a reward function, scoring one completion in a worker, does not see. As shaping, the
    jump between the correct and the wrong range (at least ``min_value_correct −
    max_value_wrong``, 1.0 by default) adds a correctness signal at that scale beside the
    estimator's; to train on ``R`` alone, as the paper does, give the correctness reward
    ``weight: 0`` (the estimator then sees only zeros and the advantage is ``R``'s group-centred
    value, a mean baseline).
    """

    name = "cosine-length"
    description = "Yeo et al. 2025 cosine length reward: short correct earn more, long wrong lose less"

    @dataclass
    class Options:
        correctness_reward: str
        max_length: int | None = None
        min_value_correct: float = 0.5
        max_value_correct: float = 1.0
        min_value_wrong: float = -1.0
        max_value_wrong: float = -0.5
        threshold: float = 1.0
        weight: float = 1.0

        def __post_init__(self):
            if not self.correctness_reward:
                raise ValueError("option 'correctness_reward' must name a reward, got ''")
            if self.max_length is not None and self.max_length < 1:
                raise ValueError(f"option 'max_length' must be >= 1, got {self.max_length!r}")
            for key in ("min_value_correct", "max_value_correct", "min_value_wrong", "max_value_wrong", "threshold"):
                if not math.isfinite(getattr(self, key)):
                    raise ValueError(f"option {key!r} must be finite, got {getattr(self, key)!r}")
            if not math.isfinite(self.weight) or self.weight < 0:
                raise ValueError(f"option 'weight' must be a finite number >= 0, got {self.weight!r}")

    @hookimpl
    def rlvr_validate_run(self, reward_names, grpo_args):
        check_correctness_reward(self, reward_names)
        self.check_run_length(grpo_args)

    @hookimpl
    def rlvr_claims(self):
        return ["length-by-correctness"]

    @hookimpl
    def rlvr_length_penalty(self, completion_lengths, rewards_per_func, reward_names):
        import torch

        from ..advantages import cosine_length_reward  # torch: when the hook runs

        o = self.options
        column = correctness_column(self, rewards_per_func, reward_names)
        correct = ~torch.isnan(column) & (column >= o.threshold)
        shaped = cosine_length_reward(
            completion_lengths.to(column.device),
            correct,
            self.max_length(),
            (o.min_value_correct, o.max_value_correct),
            (o.min_value_wrong, o.max_value_wrong),
        )
        return o.weight * shaped


class PrimeLength(Plugin):
    """prime-rl's length penalty (its GRPO ``length_penalty``), as a length shaping.

    ``weight · P_i`` with ``P_i = −p_g · |o_i| / max_{j∈g} |o_j|``: each completion loses the
    share of its group's longest length it used, times the group's pass rate ``p_g`` (the mean
    of ``correctness_reward``'s raw value over the group's scored completions). Formula in
    :func:`rlvr_plugins.advantages.group_length_penalty`; ``weight`` defaults to prime-rl's
    ``num_output_tokens_weight`` (0.25). prime-rl subtracts the penalty from the reward before its
    mean baseline (``r − P − mean(r − P)``), which is exactly this shaping added to a
    mean-baseline estimator: group-centred, never divided by a std. Its other two terms (input
    tokens, turns) are constant within a single-turn group, so centring removes them; they are
    left out.

    Not ``kimi-length`` (Kimi k1.5): that one normalises by the group's length *range*
    (``0.5 − (len − min) / (max − min)``), rewards short correct answers with up to +0.5 and gates
    wrong answers per answer (``min(0, λ)``), whatever the group's pass rate. This one divides by
    the group's longest length, penalises every completion alike, and scales the whole penalty
    by the pass rate, so a prompt the policy never solves feels no length pressure and one it
    always solves the most. Both may be enabled (neither claims the other's job), though two
    group length pressures at once is rarely what one wants.
    """

    name = "prime-length"
    description = "prime-rl length penalty: -pass rate x |o| / longest |o| of the group"

    @dataclass
    class Options:
        correctness_reward: str
        weight: float = 0.25

        def __post_init__(self):
            if not self.correctness_reward:
                raise ValueError("option 'correctness_reward' must name a reward, got ''")
            if not math.isfinite(self.weight) or self.weight < 0:
                raise ValueError(f"option 'weight' must be a finite number >= 0, got {self.weight!r}")

    @hookimpl
    def rlvr_validate_run(self, reward_names):
        check_correctness_reward(self, reward_names)

    @hookimpl
    def rlvr_length_penalty(self, completion_lengths, num_generations, rewards_per_func, reward_names):
        from ..advantages import group_length_penalty  # torch: when the hook runs

        column = correctness_column(self, rewards_per_func, reward_names)
        return self.options.weight * group_length_penalty(completion_lengths.to(column.device), column, num_generations)
