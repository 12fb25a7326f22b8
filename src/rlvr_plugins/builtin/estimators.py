"""Built-in advantage estimators: ``grpo`` (the default), ``rloo``, ``batch-std``, ``mean-baseline``,
``normalize-then-sum``.

TRL's switches map onto them (``RLVRTrainer`` does this when no estimator is enabled):
``scale_rewards="group"`` → ``grpo``, ``"batch"`` → ``batch-std``, ``"none"`` →
``mean-baseline``, ``multi_objective_aggregation="normalize_then_sum"`` → ``normalize-then-sum``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import hookimpl
from ..plugin import Plugin


class GRPOEstimator(Plugin):
    """``A_i = (r_i - mean(r)) / (std(r) + eps)`` within each prompt group. Biased (std division)."""

    name = "grpo"
    trl_scale_rewards = "group"
    description = "GRPO group z-score advantage (r - mean) / (std + eps); the default estimator"

    @dataclass
    class Options:
        eps: float = 1e-4

    @hookimpl
    def rlvr_compute_advantages(self, rewards, num_generations, valid):
        from .. import advantages  # torch: imported when the hook runs, not to list or check plugins

        return advantages.grpo_advantages(rewards, valid, num_generations, eps=self.options.eps)


class RLOOEstimator(Plugin):
    """``A_i = r_i - (sum_j r_j - r_i) / (G - 1)``: leave-one-out baseline. Unbiased."""

    name = "rloo"
    description = "RLOO leave-one-out baseline r_i - mean of the others; unbiased"

    @hookimpl
    def rlvr_compute_advantages(self, rewards, num_generations, valid):
        from .. import advantages  # torch: imported when the hook runs, not to list or check plugins

        return advantages.rloo_advantages(rewards, valid, num_generations)


class BatchStdEstimator(Plugin):
    """``A_i = (r_i - mean_group(r)) / (std_batch(r) + eps)``: one scale per batch."""

    name = "batch-std"
    trl_scale_rewards = "batch"
    description = "group mean baseline, scaled by the batch standard deviation"

    @dataclass
    class Options:
        eps: float = 1e-4

    @hookimpl
    def rlvr_compute_advantages(self, rewards, num_generations, valid):
        from .. import advantages  # torch: imported when the hook runs, not to list or check plugins

        return advantages.batch_std_advantages(rewards, valid, num_generations, eps=self.options.eps)


class MeanBaselineEstimator(Plugin):
    """``A_i = r_i - mean_group(r)``: the group mean baseline, no std (TRL's ``scale_rewards="none"``)."""

    name = "mean-baseline"
    trl_scale_rewards = "none"
    description = "group mean baseline r - mean, no std division (TRL scale_rewards='none')"

    @hookimpl
    def rlvr_compute_advantages(self, rewards, num_generations, valid):
        from .. import advantages  # torch: imported when the hook runs, not to list or check plugins

        return advantages.mean_baseline_advantages(rewards, valid, num_generations)


class NormalizeThenSumEstimator(Plugin):
    """Each reward z-scored in its group, weighted sum, then z-scored over the batch.

    TRL's ``multi_objective_aggregation="normalize_then_sum"``; the formula is in
    :func:`rlvr_plugins.advantages.normalize_then_sum_advantages`. It reads the raw rewards
    of each function and their weights, not the summed outcome.
    """

    name = "normalize-then-sum"
    description = "per-reward group z-score, weighted sum, batch z-score (TRL multi_objective_aggregation)"

    @dataclass
    class Options:
        eps: float = 1e-4

    @hookimpl
    def rlvr_compute_advantages(self, rewards_per_func, reward_weights, num_generations, valid):
        from .. import advantages  # torch: imported when the hook runs, not to list or check plugins

        return advantages.normalize_then_sum_advantages(
            rewards_per_func, reward_weights, valid, num_generations, eps=self.options.eps
        )


#: TRL's ``scale_rewards`` value -> the built-in estimator that computes TRL's advantages for it.
TRL_SCALE_ESTIMATORS: dict[str, str] = {
    cls.trl_scale_rewards: cls.name
    for cls in (GRPOEstimator, BatchStdEstimator, MeanBaselineEstimator)
    if cls.trl_scale_rewards is not None
}
