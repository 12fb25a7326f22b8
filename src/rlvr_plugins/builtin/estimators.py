"""Built-in advantage estimators: ``grpo`` (the default), ``rloo`` and ``batch-std``."""

from __future__ import annotations

from dataclasses import dataclass

from .. import advantages, hookimpl
from ..plugin import Plugin


class GRPOEstimator(Plugin):
    """``A_i = (r_i - mean(r)) / (std(r) + eps)`` within each prompt group. Biased (std division)."""

    name = "grpo"
    description = "GRPO group z-score advantage (r - mean) / (std + eps); the default estimator"

    @dataclass
    class Options:
        eps: float = 1e-4

    @hookimpl
    def rlvr_compute_advantages(self, rewards, num_generations, valid):
        return advantages.grpo_advantages(rewards, valid, num_generations, eps=self.options.eps)


class RLOOEstimator(Plugin):
    """``A_i = r_i - (sum_j r_j - r_i) / (G - 1)``: leave-one-out baseline. Unbiased."""

    name = "rloo"
    description = "RLOO leave-one-out baseline r_i - mean of the others; unbiased"

    @hookimpl
    def rlvr_compute_advantages(self, rewards, num_generations, valid):
        return advantages.rloo_advantages(rewards, valid, num_generations)


class BatchStdEstimator(Plugin):
    """``A_i = (r_i - mean_group(r)) / (std_batch(r) + eps)``: one scale per batch."""

    name = "batch-std"
    description = "group mean baseline, scaled by the batch standard deviation"

    @dataclass
    class Options:
        eps: float = 1e-4

    @hookimpl
    def rlvr_compute_advantages(self, rewards, num_generations, valid):
        return advantages.batch_std_advantages(rewards, valid, num_generations, eps=self.options.eps)
