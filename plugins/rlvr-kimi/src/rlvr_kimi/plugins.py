"""Kimi k1.5 plugins: ``kimi-length``, the per-prompt length reward (§2.3.3), and
``kimi-curriculum``, curriculum and prioritised sampling (§2.3.4)."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from rlvr_plugins import Plugin, hookimpl
from rlvr_plugins.errors import ConfigError, PluginContractError, PluginError
from rlvr_plugins.schedules import warmup_schedule

from .schedules import SCHEDULES

if TYPE_CHECKING:
    from .sampler import CurriculumSampler, CurriculumState

# torch (and the modules that use it) is imported inside the hooks that compute: listing the
# plugins and checking a config import no torch.

logger = logging.getLogger(__name__)


def missing_reward_message(plugin: str, correctness_reward: str, reward_names) -> str:
    """The error for a ``correctness_reward`` option that names no reward of the run."""
    return (
        f"plugin {plugin!r}: option correctness_reward={correctness_reward!r} is not a reward "
        f"of this run. Available rewards: {list(reward_names)}. Enable the plugin that registers it or set "
        "correctness_reward to one of these."
    )


class KimiLengthPenalty(Plugin):
    """Adds ``weight * kimi_length_reward`` to the reward from step ``warmup_steps`` on.

    ``warmup_steps: N`` is a shorthand for the weight schedule ``weight: {schedule: step, points:
    [[0, 0], [N, w]]}`` (:func:`rlvr_plugins.schedules.warmup_schedule`), with one difference:
    before step ``N`` the penalty is not computed at all (no ``penalties/kimi-length/mean``),
    where the schedule computes it and multiplies it by 0. Given both, they multiply.

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
        return missing_reward_message(self.name, self.options.correctness_reward, reward_names)

    @hookimpl
    def rlvr_claims(self):
        return ["length-by-correctness"]

    @hookimpl
    def rlvr_length_penalty(self, completion_lengths, num_generations, rewards_per_func, reward_names, step):
        o = self.options
        factor = warmup_schedule(o.warmup_steps).at(step)
        if factor == 0:
            return None
        if o.correctness_reward not in reward_names:
            raise PluginContractError(self._missing_reward(reward_names))
        from .length import is_correct, kimi_length_reward

        column = rewards_per_func[:, list(reward_names).index(o.correctness_reward)]
        correct = is_correct(column, o.threshold)
        return factor * o.weight * kimi_length_reward(completion_lengths, correct, num_generations).to(column.device)


class KimiCurriculum(Plugin):
    """The train sampler: easy prompts first (curriculum), then ``∝ max(1 - s_i, floor)`` (priority).

    State (success counts, blocked prompts, drawn chunks) is updated only from the gathered
    batch of ``rlvr_on_rewards``, so every process draws the same prompts, and it is saved
    in every checkpoint so a resumed run draws exactly what the uninterrupted run draws.
    """

    name = "kimi-curriculum"
    description = (
        "Kimi k1.5 sampling: curriculum from easy to hard, prompts drawn with probability "
        "proportional to max(1 - success rate, floor)"
    )

    @dataclass
    class Options:
        difficulty_column: str = "difficulty"
        difficulty_labels: dict[str, float] | None = None
        difficulty_from_pass_rate: bool = False
        schedule: Literal["linear", "step", "none"] = "linear"
        start_quantile: float = 0.25
        full_at_step: int = 100
        num_stages: int = 4
        correctness_reward: str = "r1-accuracy"
        threshold: float = 1.0
        floor: float = 0.05
        prior_success: float = 0.5
        prior_strength: float = 2.0
        skip_zero_variance_steps: int = 0

        def __post_init__(self):
            if self.schedule not in SCHEDULES:
                raise ValueError(f"Unsupported schedule: {self.schedule!r}. Supported: {list(SCHEDULES)}")
            if not 0.0 < self.start_quantile <= 1.0:
                raise ValueError(f"option 'start_quantile' must lie in (0, 1], got {self.start_quantile!r}")
            if self.full_at_step < 0:
                raise ValueError(f"option 'full_at_step' must be >= 0, got {self.full_at_step!r}")
            if self.num_stages < 1:
                raise ValueError(f"option 'num_stages' must be >= 1, got {self.num_stages!r}")
            if not self.difficulty_column:
                raise ValueError("option 'difficulty_column' must name a column, got ''")
            if self.difficulty_labels is not None:
                bad = {
                    k: v
                    for k, v in self.difficulty_labels.items()
                    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                }
                if bad:
                    raise ValueError(f"option 'difficulty_labels' must map labels to finite numbers, got {bad!r}")
            if self.difficulty_labels is not None and self.difficulty_from_pass_rate:
                raise ValueError("options 'difficulty_labels' and 'difficulty_from_pass_rate' exclude each other")
            if not self.correctness_reward:
                raise ValueError("option 'correctness_reward' must name a reward, got ''")
            if not math.isfinite(self.threshold):
                raise ValueError(f"option 'threshold' must be finite, got {self.threshold!r}")
            if not 0.0 < self.floor <= 1.0:
                raise ValueError(f"option 'floor' must lie in (0, 1], got {self.floor!r}")
            if not 0.0 <= self.prior_success <= 1.0:
                raise ValueError(f"option 'prior_success' must lie in [0, 1], got {self.prior_success!r}")
            if not (self.prior_strength >= 0.0 and math.isfinite(self.prior_strength)):
                raise ValueError(f"option 'prior_strength' must be a finite number >= 0, got {self.prior_strength!r}")
            if self.skip_zero_variance_steps < 0:
                raise ValueError(
                    f"option 'skip_zero_variance_steps' must be >= 0, got {self.skip_zero_variance_steps!r}"
                )

    def __init__(self, options=None):
        super().__init__(options)
        self.state: CurriculumState | None = None
        self.sampler: CurriculumSampler | None = None
        self._loaded: dict | None = None
        self._position: dict[int, int] = {}

    @property
    def curriculum_on(self) -> bool:
        return self.options.schedule != "none"

    @hookimpl
    def rlvr_adjust_grpo_config(self, grpo_kwargs, trainer_section):
        if self.curriculum_on and trainer_section.get("remove_unused_columns"):
            raise ConfigError(
                f"plugin {self.name!r} reads the column {self.options.difficulty_column!r}: "
                "trainer.remove_unused_columns=true would drop it; remove that setting"
            )

    @hookimpl
    def rlvr_validate_run(self, reward_names):
        if self.options.correctness_reward not in reward_names:
            raise ConfigError(self._missing_reward(reward_names))

    def _missing_reward(self, reward_names) -> str:
        return missing_reward_message(self.name, self.options.correctness_reward, reward_names)

    @hookimpl
    def rlvr_train_sampler(self, dataset, num_generations, prompts_per_batch, repeat_count, shuffle, seed, grpo_args):
        import torch

        from .curriculum import difficulties_from_column
        from .sampler import CurriculumSampler, CurriculumState

        o = self.options
        n = len(dataset)
        difficulties = None
        if self.curriculum_on:
            columns = list(dataset.column_names)
            if o.difficulty_column not in columns:
                raise PluginError(
                    f"plugin {self.name!r}: the train set has no column {o.difficulty_column!r} "
                    f"(option difficulty_column) for the curriculum; columns present: {columns}. "
                    "Map one with data.columns, set difficulty_column, or set schedule: none"
                )
            try:
                values = difficulties_from_column(
                    dataset[o.difficulty_column],
                    column=o.difficulty_column,
                    labels=o.difficulty_labels,
                    from_pass_rate=o.difficulty_from_pass_rate,
                )
            except ValueError as exc:
                raise PluginError(f"plugin {self.name!r}: {exc}") from exc
            difficulties = torch.tensor(values, dtype=torch.float64)
        if "rlvr_index" in dataset.column_names:
            self._position = {int(r): i for i, r in enumerate(dataset["rlvr_index"])}
        else:
            self._position = {i: i for i in range(n)}
        if self._loaded is not None:
            try:
                self.state = CurriculumState.from_dict(self._loaded, n)
            except (KeyError, ValueError) as exc:
                raise PluginContractError(f"plugin {self.name!r}: cannot resume: {exc}") from exc
            self._loaded = None
        elif self.state is None or self.state.num_prompts != n:
            self.state = CurriculumState.fresh(n)
        try:
            self.sampler = CurriculumSampler(
                num_prompts=n,
                difficulties=difficulties,
                state=self.state,
                rules=o,
                num_generations=num_generations,
                prompts_per_batch=prompts_per_batch,
                repeat_count=repeat_count,
                seed=seed,
                gradient_accumulation_steps=int(getattr(grpo_args, "gradient_accumulation_steps", 1) or 1),
                ignore_data_skip=bool(getattr(grpo_args, "ignore_data_skip", False)),
            )
        except ValueError as exc:
            raise PluginContractError(f"plugin {self.name!r}: {exc}") from exc
        return self.sampler

    @hookimpl
    def rlvr_pool_prompts(self, step, round):
        if self.sampler is None:
            raise PluginContractError(
                f"plugin {self.name!r}: the rollout pool asked for prompts before the sampler was built"
            )
        return self.sampler.pool_order(step, round)

    @hookimpl
    def rlvr_pool_started(self, prompts, drawn, round):
        if self.sampler is None:
            raise PluginContractError(
                f"plugin {self.name!r}: the rollout pool started groups before the sampler was built"
            )
        try:
            self.sampler.start(
                [self._position[int(i)] for i in prompts], round, [self._position[int(i)] for i in drawn]
            )
        except (KeyError, ValueError) as exc:
            raise PluginContractError(f"plugin {self.name!r}: {exc}") from exc

    @hookimpl
    def rlvr_on_rewards(
        self, example_indices, rewards, rewards_per_func, reward_names, valid, num_generations, log_metric, round
    ):
        if self.sampler is None:
            raise PluginContractError(
                f"plugin {self.name!r}: rewards arrived before the sampler was built; "
                "the training prompts must come from this plugin's sampler"
            )
        import torch

        from rlvr_plugins.advantages import zero_variance_groups

        from .curriculum import group_outcomes
        from .length import is_correct

        o = self.options
        if o.correctness_reward not in reward_names:
            raise PluginContractError(self._missing_reward(reward_names))
        column = rewards_per_func[:, list(reward_names).index(o.correctness_reward)]
        correct = is_correct(column, o.threshold)
        counted = valid.to(torch.bool) & ~torch.isnan(column)
        successes, attempts = group_outcomes(correct, counted, num_generations)
        zero_var = zero_variance_groups(rewards, valid.to(torch.bool), num_generations)
        try:
            ids = [self._position[int(i)] for i in example_indices[::num_generations]]
            metrics = self.sampler.observe(ids, successes.tolist(), attempts.tolist(), zero_var.tolist(), round)
        except (KeyError, ValueError) as exc:
            raise PluginContractError(f"plugin {self.name!r}: {exc}") from exc
        if self.sampler.repeated:
            logger.warning(
                "%s: %d groups of the last counted chunk were generated again (a resume inside a "
                "generation batch); their rewards are not counted twice",
                self.name,
                self.sampler.repeated,
            )
        for key, value in (metrics or {}).items():
            log_metric(f"curriculum/{key}", value)

    @hookimpl
    def rlvr_state_dict(self):
        if self.state is not None:
            return self.state.to_dict()
        return self._loaded

    @hookimpl
    def rlvr_load_state_dict(self, state):
        self._loaded = dict(state)
        self.state = None
        self.sampler = None
