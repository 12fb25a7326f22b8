"""Built-in advantage estimators: ``grpo`` (the default), ``rloo``, ``batch-std``, ``mean-baseline``,
``normalize-then-sum`` (alias ``gdpo``), and the peers' estimators ``reinforce++``,
``reinforce++-baseline``, ``opo``, ``gpg``, ``pass-at-k``.

TRL's switches map onto them (``RLVRTrainer`` does this when no estimator is enabled):
``scale_rewards="group"`` → ``grpo``, ``"batch"`` → ``batch-std``, ``"none"`` →
``mean-baseline``, ``multi_objective_aggregation="normalize_then_sum"`` → ``normalize-then-sum``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import hookimpl
from ..errors import ConfigError
from ..plugin import Plugin


@dataclass
class EpsOptions(Plugin.Options):
    """The options of an estimator that divides by a standard deviation: ``eps`` in its denominator."""

    eps: float = 1e-4

    def __post_init__(self):
        if not (math.isfinite(self.eps) and self.eps >= 0):
            raise ValueError(f"option 'eps' must be a finite number >= 0, got {self.eps!r}")


class GRPOEstimator(Plugin):
    """``A_i = (r_i - mean(r)) / (std(r) + eps)`` within each prompt group. Biased (std division)."""

    name = "grpo"
    trl_scale_rewards = "group"
    description = "GRPO group z-score advantage (r - mean) / (std + eps); the default estimator"

    Options = EpsOptions

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
    """``A_i = (r_i - mean_group(r)) / (std_batch(r) + eps)``: one scale per batch.

    Not ``reinforce++-baseline``: that divides by the batch std of the group-centred rewards
    ``r_i - mean_group(r)``, this by the batch std of the raw rewards (see
    :func:`rlvr_plugins.advantages.reinforce_pp_baseline_advantages`).
    """

    name = "batch-std"
    trl_scale_rewards = "batch"
    description = "group mean baseline, scaled by the batch standard deviation"

    Options = EpsOptions

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
    of each function and their weights, not the summed outcome. ``gdpo`` is an alias of it
    (GDPO is this formula).
    """

    name = "normalize-then-sum"
    description = "per-reward group z-score, weighted sum, batch z-score (TRL multi_objective_aggregation)"

    Options = EpsOptions

    @hookimpl
    def rlvr_compute_advantages(self, rewards_per_func, reward_weights, num_generations, valid):
        from .. import advantages  # torch: imported when the hook runs, not to list or check plugins

        return advantages.normalize_then_sum_advantages(
            rewards_per_func, reward_weights, valid, num_generations, eps=self.options.eps
        )


class GDPOEstimator(NormalizeThenSumEstimator):
    """GDPO (Liu et al. 2026, "Group reward-Decoupled normalization Policy Optimization"): an alias of
    ``normalize-then-sum``, the same formula.

    GDPO normalises each reward within its group, sums the weighted normalised rewards and
    normalises the sum over the batch; TRL implements it as
    ``multi_objective_aggregation="normalize_then_sum"``, which ``normalize-then-sum`` equals.
    """

    name = "gdpo"
    alias_of = "normalize-then-sum"  # TRL's normalize_then_sum accepts it as it accepts normalize-then-sum
    description = "GDPO: alias of normalize-then-sum (per-reward group z-score, weighted sum, batch z-score)"


class ReinforcePPEstimator(Plugin):
    """REINFORCE++ (Hu et al. 2025): ``A_i = (r_i - mean_batch(r)) / (std_batch(r) + eps)``.

    The outcome reward normalised over the whole batch, no per-prompt baseline; formula and
    caveats in :func:`rlvr_plugins.advantages.reinforce_pp_advantages`.
    """

    name = "reinforce++"
    description = "REINFORCE++: reward z-scored over the whole batch, no per-prompt baseline"

    Options = EpsOptions

    @hookimpl
    def rlvr_compute_advantages(self, rewards, valid):
        from .. import advantages  # torch: imported when the hook runs, not to list or check plugins

        return advantages.reinforce_pp_advantages(rewards, valid, eps=self.options.eps)


class ReinforcePPBaselineEstimator(Plugin):
    """REINFORCE++-baseline (Hu et al. 2025): ``c_i = r_i - mean_group(r)``,
    ``A_i = (c_i - mean_batch(c)) / (std_batch(c) + eps)``.

    Not ``batch-std``, which divides ``c_i`` by the batch std of the raw rewards ``r``; see
    :func:`rlvr_plugins.advantages.reinforce_pp_baseline_advantages`.
    """

    name = "reinforce++-baseline"
    description = "REINFORCE++-baseline: r - group mean, then z-scored over the batch"

    Options = EpsOptions

    @hookimpl
    def rlvr_compute_advantages(self, rewards, num_generations, valid):
        from .. import advantages  # torch: imported when the hook runs, not to list or check plugins

        return advantages.reinforce_pp_baseline_advantages(rewards, valid, num_generations, eps=self.options.eps)


class OPOEstimator(Plugin):
    """OPO (Hao et al. 2025): ``A_i = r_i - b``, ``b = sum_j |o_j| r_j / sum_j |o_j|`` per group.

    The length-weighted baseline; it reads ``completion_lengths``. Formula in
    :func:`rlvr_plugins.advantages.opo_advantages`.
    """

    name = "opo"
    description = "OPO: r - length-weighted group mean sum|o|r / sum|o| (reads completion_lengths)"

    @hookimpl
    def rlvr_compute_advantages(self, rewards, num_generations, valid, completion_lengths):
        from .. import advantages  # torch: imported when the hook runs, not to list or check plugins

        return advantages.opo_advantages(rewards, valid, completion_lengths, num_generations)


class GPGEstimator(Plugin):
    """GPG (Chu et al. 2025): ``A_i = alpha (r_i - mean_group(r))``, ``alpha = B / (B - M)``.

    ``M`` of the batch's ``B`` completions lie in groups whose rewards all agree; formula in
    :func:`rlvr_plugins.advantages.gpg_advantages`.
    """

    name = "gpg"
    description = "GPG: r - group mean, rescaled by B / (B - M), M = completions in zero-variance groups"

    @hookimpl
    def rlvr_compute_advantages(self, rewards, num_generations, valid):
        from .. import advantages  # torch: imported when the hook runs, not to list or check plugins

        return advantages.gpg_advantages(rewards, valid, num_generations)


class PassAtKEstimator(Plugin):
    """Pass@k training (Chen et al. 2025): the paper's analytic per-group advantage for pass@k.

    With ``R = 1 - C(N_neg, k) / C(N, k)`` and ``sigma = sqrt(R (1 - R))``:
    ``A_pos = (1 - R) / sigma``, ``A_neg = (1 - R - C(N_neg - 1, k - 1) / C(N - 1, k - 1)) / sigma``.
    verl's ``grpo_passk`` differs (only the group's best completion gets ``r_max - r_second_max``);
    see :func:`rlvr_plugins.advantages.pass_at_k_advantages`. ``k`` must not exceed
    ``num_generations`` (checked at start-up).
    """

    name = "pass-at-k"
    description = "Pass@k training (Chen et al. 2025): analytic group advantage for the pass@k objective"

    @dataclass
    class Options:
        k: int = 4
        threshold: float = 1.0

        def __post_init__(self):
            if self.k < 1:
                raise ValueError(f"option 'k' must be >= 1, got {self.k!r}")
            if not math.isfinite(self.threshold):
                raise ValueError(f"option 'threshold' must be finite, got {self.threshold!r}")

    @hookimpl
    def rlvr_validate_run(self, grpo_args):
        generations = getattr(grpo_args, "num_generations", None)
        if isinstance(generations, int) and self.options.k > generations:
            raise ConfigError(
                f"plugin {self.name!r}: option k={self.options.k} exceeds num_generations={generations} "
                f"(no subset of k completions in a group); set k <= {generations}",
                source="plugins",
            )

    @hookimpl
    def rlvr_compute_advantages(self, rewards, num_generations, valid):
        from .. import advantages  # torch: imported when the hook runs, not to list or check plugins

        return advantages.pass_at_k_advantages(
            rewards, valid, num_generations, k=self.options.k, threshold=self.options.threshold
        )


#: TRL's ``scale_rewards`` value -> the built-in estimator that computes TRL's advantages for it.
TRL_SCALE_ESTIMATORS: dict[str, str] = {
    cls.trl_scale_rewards: cls.name
    for cls in (GRPOEstimator, BatchStdEstimator, MeanBaselineEstimator)
    if cls.trl_scale_rewards is not None
}
