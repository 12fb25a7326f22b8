"""Advantage estimators as pure functions on gathered rewards.

Every function takes ``rewards`` of shape ``(N,)`` with ``N = num_groups * G``, the ``G``
completions of one prompt contiguous, and ``valid`` of shape ``(N,)`` (bool, False where
the completion has no score; those are left out of every statistic), and returns a
``(N,)`` float tensor. Invalid completions get advantage 0.

Bias, in the sense of the lecture's "RL detour": subtracting a baseline ``b`` that does
not depend on the completion it is applied to keeps the policy gradient unbiased.
The group mean includes ``r_i`` itself, so it is unbiased only up to the factor
``(G - 1) / G``; leave-one-out removes that. Dividing by the group's standard deviation
re-weights prompts by ``1 / std`` (easy and very hard prompts count more), which is not
a baseline and biases the gradient of expected reward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from .errors import PluginContractError

if TYPE_CHECKING:
    from .manager import PluginSet


def grouped(x: torch.Tensor, num_generations: int) -> torch.Tensor:
    """``(N,)`` → ``(N / G, G)``; raises if ``N`` is not a multiple of ``G``."""
    if x.numel() % num_generations:
        raise ValueError(f"{x.numel()} values cannot be split into groups of num_generations={num_generations}")
    return x.view(-1, num_generations)


def _masked(rewards: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    return torch.where(valid, rewards, torch.full_like(rewards, float("nan")))


def group_mean(rewards: torch.Tensor, valid: torch.Tensor, num_generations: int) -> torch.Tensor:
    """Mean of the valid rewards of each group, repeated to ``(N,)``: ``mean_j r_j``."""
    g = grouped(_masked(rewards, valid), num_generations)
    return torch.nanmean(g, dim=1).repeat_interleave(num_generations)


def nan_std(x: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Sample standard deviation with Bessel's correction, ignoring NaN; NaN with fewer than 2 values."""
    mean = torch.nanmean(x, dim=dim, keepdim=True)
    count = (~torch.isnan(x)).sum(dim=dim, keepdim=True)
    var = torch.nanmean((x - mean) ** 2, dim=dim, keepdim=True) * (count / (count - 1))
    var = torch.where(count > 1, var, torch.full_like(var, float("nan")))
    return var.sqrt() if dim is None else var.sqrt().squeeze(dim)


def group_std(rewards: torch.Tensor, valid: torch.Tensor, num_generations: int) -> torch.Tensor:
    """Sample standard deviation (Bessel) of each group's valid rewards, repeated to ``(N,)``."""
    g = grouped(_masked(rewards, valid), num_generations)
    return nan_std(g, dim=1).repeat_interleave(num_generations)


def grpo_advantages(
    rewards: torch.Tensor, valid: torch.Tensor, num_generations: int, eps: float = 1e-4
) -> torch.Tensor:
    """GRPO (Shao et al. 2024, DeepSeekMath): ``A_i = (r_i - mean(r)) / (std(r) + eps)`` per group.

    Biased: the division by the group std is not a baseline (see the module docstring).
    Equal to TRL's ``scale_rewards="group"``. A group with fewer than two valid rewards has
    no std: its advantages are 0.
    """
    if num_generations > 1 and bool(valid.all()):  # the common case: the same arithmetic without the masks
        g = grouped(rewards, num_generations)
        mean = torch.nanmean(g, dim=1, keepdim=True)
        return ((g - mean) / (nan_std(g, dim=1).unsqueeze(1) + eps)).view(-1)
    std = group_std(rewards, valid, num_generations)
    adv = (rewards - group_mean(rewards, valid, num_generations)) / (std + eps)
    return _zero_invalid(torch.where(torch.isnan(std), torch.zeros_like(adv), adv), valid)


def mean_baseline_advantages(rewards: torch.Tensor, valid: torch.Tensor, num_generations: int) -> torch.Tensor:
    """Dr. GRPO (Liu et al. 2025): ``A_i = r_i - mean(r)`` per group, no std division.

    Unbiased up to the constant factor ``(G - 1) / G`` (the mean contains ``r_i``).
    """
    return _zero_invalid(rewards - group_mean(rewards, valid, num_generations), valid)


def rloo_advantages(rewards: torch.Tensor, valid: torch.Tensor, num_generations: int) -> torch.Tensor:
    """RLOO (Kool et al. 2019; Ahmadian et al. 2024): ``A_i = r_i - (sum_j r_j - r_i) / (G - 1)``.

    The baseline of each completion is the mean of the *other* valid completions of its
    group, so it does not depend on ``r_i``: unbiased. ``G`` counts valid completions; a
    group with fewer than two valid completions gets 0.
    """
    g = grouped(torch.where(valid, rewards, torch.zeros_like(rewards)), num_generations)
    n = grouped(valid.to(rewards.dtype), num_generations).sum(dim=1, keepdim=True)
    others = (g.sum(dim=1, keepdim=True) - g) / (n - 1).clamp(min=1)
    adv = torch.where(n > 1, g - others, torch.zeros_like(g)).reshape(-1)
    return _zero_invalid(adv, valid)


def batch_std_advantages(
    rewards: torch.Tensor, valid: torch.Tensor, num_generations: int, eps: float = 1e-4
) -> torch.Tensor:
    """``A_i = (r_i - mean_group(r)) / (std_batch(r) + eps)`` (TRL's ``scale_rewards="batch"``).

    One scale for the whole batch, so prompts are not re-weighted against each other:
    unbiased up to a positive constant per batch (the group mean contains ``r_i``).
    """
    std = nan_std(_masked(rewards, valid))
    adv = (rewards - group_mean(rewards, valid, num_generations)) / (std + eps)
    return _zero_invalid(adv, valid)


def _batch_zscore(x: torch.Tensor, valid: torch.Tensor, eps: float) -> torch.Tensor:
    """``(x - mean_batch(x)) / (std_batch(x) + eps)`` over the valid entries (Bessel); 0 with fewer than 2."""
    masked = _masked(x, valid)
    std = nan_std(masked)
    adv = (x - torch.nanmean(masked)) / (std + eps)
    return _zero_invalid(torch.where(torch.isnan(std), torch.zeros_like(adv), adv), valid)


def reinforce_pp_advantages(rewards: torch.Tensor, valid: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """REINFORCE++ (Hu et al. 2025), outcome reward, no KL term: the return normalised over the global batch::

        A_i = (r_i - mean_batch(r)) / (std_batch(r) + eps)

    No per-prompt baseline at all: the batch mean is the baseline, shared by every group.
    The groups play no part (``num_generations`` is not needed). Statistics over the valid
    completions of the batch, sample std (Bessel); fewer than two valid completions give 0.
    The paper whitens token-level returns, i.e. the batch statistics weight each completion
    by its token count; this is the per-completion form (equal to it when all lengths agree).
    """
    return _batch_zscore(rewards, valid, eps)


def reinforce_pp_baseline_advantages(
    rewards: torch.Tensor, valid: torch.Tensor, num_generations: int, eps: float = 1e-4
) -> torch.Tensor:
    """REINFORCE++-baseline (Hu et al. 2025): group mean subtracted, then normalised over the batch::

        c_i = r_i - mean_group(r)
        A_i = (c_i - mean_batch(c)) / (std_batch(c) + eps)

    Not the same as ``batch-std`` (TRL's ``scale_rewards="batch"``,
    :func:`batch_std_advantages`): that divides ``c_i`` by the batch std of the *raw*
    rewards ``r``, which includes the spread between prompts' means; this divides by the
    batch std of the *centred* rewards ``c`` (smaller, or equal when every group has the
    same mean) and subtracts ``mean_batch(c)`` (0 when every completion is valid). The two
    differ by a positive factor per batch, so neither re-weights prompts against each other.
    """
    return _batch_zscore(mean_baseline_advantages(rewards, valid, num_generations), valid, eps)


def opo_advantages(
    rewards: torch.Tensor, valid: torch.Tensor, lengths: torch.Tensor, num_generations: int
) -> torch.Tensor:
    """OPO (Hao et al. 2025, "On-Policy RL with Optimal reward baseline"), the length-weighted baseline::

        b = sum_j |o_j| r_j / sum_j |o_j|       (per group, over its valid completions)
        A_i = r_i - b

    The paper's optimal baseline under its assumption that the squared norm of a
    completion's score gradient grows with its token count ``|o_j|``. ``lengths`` ``(N,)``
    (the hook's ``completion_lengths``); a length below 1 counts as 1, so an empty
    completion still has weight. Like the group mean, ``b`` contains ``r_i``, here weighted
    by ``|o_i|``: a long completion moves its own baseline more. ``rlvr audit`` measures that
    this does not remove the length bias of per-response normalisation (``docs/audit.md``).
    """
    w = torch.where(valid, lengths.to(rewards.dtype).clamp(min=1), torch.zeros_like(rewards))
    num = grouped(w * torch.where(valid, rewards, torch.zeros_like(rewards)), num_generations).sum(dim=1)
    den = grouped(w, num_generations).sum(dim=1)
    baseline = (num / den.clamp(min=1)).repeat_interleave(num_generations)
    return _zero_invalid(rewards - baseline, valid)


def gpg_scale(rewards: torch.Tensor, valid: torch.Tensor, num_generations: int) -> torch.Tensor:
    """GPG's correction ``alpha = B / (B - M)`` (a 0-d tensor): ``B`` valid completions in the batch, ``M`` of
    them in groups whose valid rewards are all equal (no gradient); 1 when every group is such."""
    zero_var = zero_variance_groups(rewards, valid, num_generations).repeat_interleave(num_generations)
    b = valid.sum().to(rewards.dtype)
    m = (valid & zero_var).sum().to(rewards.dtype)
    return torch.where(b > m, b / (b - m).clamp(min=1), torch.ones_like(b))


def gpg_advantages(rewards: torch.Tensor, valid: torch.Tensor, num_generations: int) -> torch.Tensor:
    """GPG (Chu et al. 2025, "GPG: A Simple and Strong Reinforcement Learning Baseline")::

        A_i = alpha * (r_i - mean_group(r)),       alpha = B / (B - M)

    (the paper's ``F_norm = 1``; ``B`` completions in the batch, ``M`` of them "invalid":
    in a group whose rewards are all equal, so their advantage is 0). ``alpha`` rescales the
    batch's gradient as if it had been averaged over the ``B - M`` completions that carry
    one. Here ``B`` counts valid (scored) completions only; see :func:`gpg_scale`. The
    paper's loss also averages over every token of the batch (``1 / sum_i |o_i|``), which is
    the loss's business here (``policy-loss`` ``length_normalization: token-mean``), not the
    estimator's. ``alpha`` depends on the other prompts' groups, which biases the gradient
    slightly (``docs/audit.md``).
    """
    return gpg_scale(rewards, valid, num_generations) * mean_baseline_advantages(rewards, valid, num_generations)


def _ratio_of_binomials(top: torch.Tensor, bottom: torch.Tensor, k: int) -> torch.Tensor:
    """``C(top, k) / C(bottom, k)`` for integer-valued tensors with ``bottom >= k``, as ``prod_j (top-j)/(bottom-j)``.

    With ``0 <= top < k`` a factor is 0 and so is the result (``C(top, k) = 0``).
    """
    out = torch.ones_like(top)
    for j in range(k):
        out = out * (top - j).clamp(min=0) / (bottom - j).clamp(min=1)
    return out


def pass_at_k_advantages(
    rewards: torch.Tensor, valid: torch.Tensor, num_generations: int, k: int, threshold: float = 1.0
) -> torch.Tensor:
    """Pass@k training (Chen et al. 2025, "Pass@k Training for Adaptively Balancing Exploration and
    Exploitation of LRMs"), the paper's analytic advantage.

    A completion passes when its reward is at least ``threshold``. In a group of ``N`` valid
    completions of which ``N_neg`` fail, every subset of ``k`` scores 1 if it holds a pass;
    the mean and std of that score over all ``C(N, k)`` subsets, and the mean of the
    subsets' normalised advantage over the subsets that contain completion ``i``, are::

        R = 1 - C(N_neg, k) / C(N, k),        sigma = sqrt(R (1 - R))
        A_pos = (1 - R) / sigma
        A_neg = (1 - R - C(N_neg - 1, k - 1) / C(N - 1, k - 1)) / sigma

    ``k = 1`` is GRPO with the population std. A group whose completions all pass or all
    fail (``sigma = 0``), or with fewer than ``k`` valid completions (no subset of ``k``),
    gets 0.

    verl's ``grpo_passk`` is a different rule (Thrampoulidis et al. 2025, arXiv 2503.19595):
    only the best completion of a group gets a non-zero advantage, ``r_max - r_second_max``
    (optionally divided by the group std), and it has no ``k``. Here every completion gets
    an advantage and ``k`` sets how much a failure is blamed: the more passes in the group,
    the smaller both advantages, and 0 once fewer than ``k`` completions fail (every subset of
    ``k`` then holds a pass: the group's pass@k is safe).
    """
    if k < 1:
        raise ValueError(f"pass@k needs k >= 1, got k={k}")
    passed = grouped((valid & (rewards >= threshold)).to(rewards.dtype), num_generations)
    n = grouped(valid.to(rewards.dtype), num_generations).sum(dim=1, keepdim=True)
    n_neg = n - passed.sum(dim=1, keepdim=True)
    mean = 1 - _ratio_of_binomials(n_neg, n, k)
    sigma = (mean * (1 - mean)).clamp(min=0).sqrt()
    blame = _ratio_of_binomials(n_neg - 1, n - 1, k - 1)
    raw = torch.where(passed > 0, 1 - mean, 1 - mean - blame)
    ok = (n >= k) & (sigma > 0)
    adv = torch.where(ok, raw / torch.where(ok, sigma, torch.ones_like(sigma)), torch.zeros_like(raw))
    return _zero_invalid(adv.reshape(-1), valid)


def normalize_then_sum_advantages(
    rewards_per_func: torch.Tensor,
    weights: torch.Tensor,
    valid: torch.Tensor,
    num_generations: int,
    eps: float = 1e-4,
) -> torch.Tensor:
    """GDPO-style "normalize then sum" (TRL's ``multi_objective_aggregation="normalize_then_sum"``).

    Shapes: ``rewards_per_func`` ``(N, K)`` (NaN where a reward did not apply), ``weights``
    ``(K,)``, ``valid`` ``(N,)``. Each reward is z-scored within its group first, the
    weighted z-scores are summed, and the sum is z-scored over the batch::

        z_ik = (r_ik - mean_group(r_k)) / (std_group(r_k) + eps)     (NaN-skipping, per reward k)
        s_i  = sum_k w_k z_ik                                          (a NaN z counts 0)
        A_i  = (s_i - mean_batch(s)) / (std_batch(s) + eps)

    (sample standard deviations, Bessel-corrected). Rows that are not ``valid`` take part in
    no statistic and get 0. Rewards on different scales then count by their weights, not by
    their spread; biased like GRPO (std divisions).
    """
    per_func = torch.where(valid.unsqueeze(1), rewards_per_func, torch.full_like(rewards_per_func, float("nan")))
    grouped_k = per_func.view(-1, num_generations, per_func.shape[1])
    mean_k = torch.nanmean(grouped_k, dim=1, keepdim=True)
    std_k = nan_std(grouped_k, dim=1).unsqueeze(1)
    z = ((grouped_k - mean_k) / (std_k + eps)).view_as(per_func)
    summed = (z * weights.to(z.device, z.dtype).unsqueeze(0)).nansum(dim=1)
    summed = _masked(summed, valid)
    adv = (summed - torch.nanmean(summed)) / (nan_std(summed) + eps)
    return _zero_invalid(torch.nan_to_num(adv, nan=0.0), valid)


def overlong_penalty(lengths: torch.Tensor, max_length: int, cache: int) -> torch.Tensor:
    """DAPO's soft overlong punishment (Yu et al. 2025, §3.4, Eq. 13), ``(N,)`` lengths → ``(N,)`` float::

        R(|y|) = 0                                   |y| <= L_max - L_cache
               = ((L_max - L_cache) - |y|) / L_cache  L_max - L_cache < |y| <= L_max
               = -1                                  L_max < |y|

    with ``L_max = max_length`` and ``L_cache = cache`` (``0 < cache <= max_length``).
    """
    over = (lengths.to(torch.float32) - (max_length - cache)) / cache
    return -over.clamp(min=0.0, max=1.0)


def cosine_length_reward(
    lengths: torch.Tensor,
    correct: torch.Tensor,
    max_length: int,
    correct_range: tuple[float, float] = (0.5, 1.0),
    wrong_range: tuple[float, float] = (-1.0, -0.5),
) -> torch.Tensor:
    """The cosine length reward of Yeo et al. 2025 ("Demystifying Long Chain-of-Thought Reasoning in
    LLMs", its cosine length-scaling reward), ``(N,)`` lengths and ``(N,)`` bool correctness → ``(N,)`` float::

        p    = min(1, |y| / L_max)
        C(v0, vL) = vL + (v0 - vL) * (1 + cos(pi * p)) / 2      (v0 at |y| = 0, vL at L_max)
        R    = C(max_c, min_c)   if correct                     (short correct answers earn more)
             = C(min_w, max_w)   if wrong                       (long wrong answers lose less)

    with ``correct_range = (min_c, max_c)`` and ``wrong_range = (min_w, max_w)``. A length past
    ``L_max`` is held at ``L_max`` (the cosine does not turn back up).
    """
    p = (lengths.to(torch.float32) / max_length).clamp(min=0.0, max=1.0)
    half = (1.0 + torch.cos(torch.pi * p)) / 2.0
    min_c, max_c = correct_range
    min_w, max_w = wrong_range
    return torch.where(correct.to(torch.bool), min_c + (max_c - min_c) * half, max_w + (min_w - max_w) * half)


def group_length_penalty(lengths: torch.Tensor, scores: torch.Tensor, num_generations: int) -> torch.Tensor:
    """prime-rl's linear length penalty (its GRPO ``length_penalty``, the output-token term),
    ``(N,)`` lengths and ``(N,)`` float scores → ``(N,)`` float in ``[-1, 0]``::

        p_g = mean_{j in g} s_j                        (the group's pass rate: its mean correctness score)
        P_i = -p_g * |o_i| / max(1, max_{j in g} |o_j|)

    ``s_j`` is the correctness reward's raw value (NaN: not scored, left out of ``p_g``; a
    group with no scored completion gets 0). The longest completion of a group loses the whole
    pass rate, an empty one nothing; a group that never passes is not shaped at all, so length
    is only traded once the prompt is solved, and the more often it is solved the harder.
    Every completion of the group is penalised by its length, wrong ones too; ``max |o_j|`` runs
    over every completion of the group (a masked one's length is known too).
    """
    g_len = grouped(lengths.to(torch.float32), num_generations)
    g_scores = grouped(scores.to(torch.float32), num_generations)
    scored = ~torch.isnan(g_scores)
    count = scored.sum(dim=1, keepdim=True)
    pass_rate = torch.where(scored, g_scores, torch.zeros_like(g_scores)).sum(dim=1, keepdim=True) / count.clamp(min=1)
    longest = g_len.max(dim=1, keepdim=True).values.clamp(min=1.0)
    return (-pass_rate * g_len / longest).reshape(-1)


def shaping_advantages(shaping: torch.Tensor, valid: torch.Tensor, num_generations: int) -> torch.Tensor:
    """The advantage of a shaping term (length penalty): ``s_i - mean_j s_j`` per group, never std-scaled.

    Rule (fault suite item 14): the estimator sees the outcome rewards only; shaping is
    added after it as its own group-centred term. Dividing shaping by a group's std
    would blow an all-wrong group that differs only in length up to advantages of about
    ±1, as large as the difference between a right and a wrong answer. A mean baseline
    keeps the shaping gradient unbiased and at the scale the plugin chose. For a
    mean-baseline estimator (``dr-grpo``) the result equals the estimator applied to
    reward + shaping.
    """
    return _zero_invalid(shaping - group_mean(shaping, valid, num_generations), valid)


def zero_variance_groups(rewards: torch.Tensor, valid: torch.Tensor, num_generations: int) -> torch.Tensor:
    """``(N / G,)`` bool: True where a group's valid rewards are all equal (or it has none).

    Decided by ``max - min``, not by a computed std: 16 copies of 0.35 in float32 have a
    nonzero computed std, but their max and min are identical.
    """
    g = grouped(rewards, num_generations)
    if bool(valid.all()):
        return ~(g.amax(dim=1) > g.amin(dim=1))
    v = grouped(valid, num_generations)
    hi = torch.where(v, g, torch.full_like(g, -torch.inf)).max(dim=1).values
    lo = torch.where(v, g, torch.full_like(g, torch.inf)).min(dim=1).values
    return ~(hi > lo)


def finalize_advantages(
    advantages: torch.Tensor, rewards: torch.Tensor, valid: torch.Tensor, num_generations: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Apply the rules every estimator obeys: no score → 0; zero-variance group → exactly 0.

    Returns ``(advantages (N,), zero_variance (N / G,) bool)``.
    """
    zero_var = zero_variance_groups(rewards, valid, num_generations)
    keep = valid & ~zero_var.repeat_interleave(num_generations)
    return torch.where(keep, torch.nan_to_num(advantages, nan=0.0), torch.zeros_like(advantages)), zero_var


def _zero_invalid(adv: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    return torch.where(valid, adv, torch.zeros_like(adv))


# -- the framework's batch rules (training and rlvr score) ------------------------------------------
@dataclass
class BatchAdvantages:
    """What the framework computes from one gathered batch (all ``(N,)``, ``zero_variance`` ``(N / G,)``)."""

    valid: torch.Tensor
    total: torch.Tensor
    penalties: list[tuple[str, torch.Tensor]]
    advantages: torch.Tensor
    zero_variance: torch.Tensor


def batch_advantages(
    plugin_set: PluginSet,
    rewards_per_func: torch.Tensor,
    weights: torch.Tensor,
    failed: torch.Tensor,
    lengths: torch.Tensor,
    num_generations: int,
    step: int,
    names: list[str],
) -> BatchAdvantages:
    """Penalties, estimator and the framework's rules on a gathered batch (training and ``rlvr score``).

    ``valid`` = no reward failed and not every reward ``None``; outcome = ``Σ_k w_k(t) r_k``
    (a ``None`` counts 0), with ``w_k(t)`` = ``weights[k]`` times the value at ``step`` of its
    plugin's weight schedule (:mod:`rlvr_plugins.schedules`; 1 without one), and each length
    penalty likewise times its plugin's schedule: the one place a schedule is applied. The
    estimator turns the outcome into advantages; the summed length penalties are added as
    group-centred shaping (``shaping_advantages``); then
    ``finalize_advantages`` (no score → 0, equal totals in a group → exactly 0).
    ``total`` = outcome + penalties, NaN where not valid.
    """
    valid = ~failed.any(dim=1) & ~torch.isnan(rewards_per_func).all(dim=1)
    weights = weights.to(rewards_per_func.device) * torch.tensor(
        plugin_set.reward_weight_factors(names, step), dtype=weights.dtype, device=rewards_per_func.device
    )
    outcome = (rewards_per_func * weights.to(rewards_per_func.device).unsqueeze(0)).nansum(dim=1)
    shaping = torch.zeros_like(outcome)
    penalties = []
    for plugin, penalty in plugin_set.call(
        "rlvr_length_penalty",
        completion_lengths=lengths,
        num_generations=num_generations,
        rewards_per_func=rewards_per_func,
        reward_names=names,
        step=step,
    ):
        if penalty is None:
            continue
        penalty = check_vector(plugin, "rlvr_length_penalty", penalty, outcome) * plugin_set.weight_factor(plugin, step)
        shaping = shaping + penalty
        penalties.append((plugin, penalty))
    nan = torch.full_like(outcome, float("nan"))
    outcome = torch.where(valid, outcome, nan)
    total = torch.where(valid, outcome + shaping, nan) if penalties else outcome
    raw = plugin_set.one(
        "rlvr_compute_advantages",
        rewards=outcome,
        num_generations=num_generations,
        valid=valid,
        rewards_per_func=rewards_per_func,
        reward_names=names,
        reward_weights=weights,
        completion_lengths=lengths,
    )
    raw = check_vector(
        plugin_set.winner("rlvr_compute_advantages"), "rlvr_compute_advantages", raw, outcome, valid=valid
    )
    if penalties:
        raw = raw + shaping_advantages(shaping, valid, num_generations)
    advantages, zero_var = finalize_advantages(raw, total, valid, num_generations)
    return BatchAdvantages(valid, total, penalties, advantages, zero_var)


def check_vector(plugin: str, hook: str, value: Any, like: torch.Tensor, valid: torch.Tensor | None = None):
    """A hook's ``(N,)`` result as a float tensor on ``like``'s device, or a clear error naming the plugin."""
    if not isinstance(value, torch.Tensor):
        raise PluginContractError(f"plugin {plugin!r}: {hook} returned {type(value).__name__}; expected a tensor")
    if value.shape != like.shape:
        raise PluginContractError(
            f"plugin {plugin!r}: {hook} returned shape {tuple(value.shape)}; expected {tuple(like.shape)}"
        )
    value = value.to(device=like.device, dtype=like.dtype)
    check = value if valid is None else value[valid]
    if not torch.isfinite(check).all():
        raise PluginContractError(f"plugin {plugin!r}: {hook} returned NaN or infinite values: {check.tolist()[:8]}")
    return value


def ratio_statistics(logps: torch.Tensor, old_logps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token-level importance ratios ``rho_t = exp(log pi(o_t) - log pi_old(o_t))`` over ``mask``.

    Shapes: ``(B, T)`` each. Returns ``(5,)``: ``[sum rho, sum |log rho|, token count,
    max rho, min rho]`` (max ``-inf`` and min ``+inf`` when no token is masked in), so that
    the statistics of every process are combined with one gather: sum the first three,
    max the fourth, min the fifth.
    """
    log_ratio = (logps - old_logps).float()[mask.bool()]
    if log_ratio.numel() == 0:
        return torch.tensor([0.0, 0.0, 0.0, -torch.inf, torch.inf], device=logps.device)
    ratio = torch.exp(log_ratio)
    count = torch.tensor(float(log_ratio.numel()), device=logps.device)
    return torch.stack([ratio.sum(), log_ratio.abs().sum(), count, ratio.max(), ratio.min()])
