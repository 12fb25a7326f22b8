"""What a partial-rollouts plugin asks for (:class:`SegmentPlan`), and what it cannot run beside.

No torch and no TRL here, so that ``rlvr train --check`` (and every run, before a model loads) refuses a
plan beside settings it cannot work with, in one line, as the trainer would later. The mechanics are in
:mod:`rlvr_plugins.segments`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class StaleLoss(Enum):
    """What the loss does with a stale token (:func:`rlvr_plugins.segments.stale_weights`)."""

    MASK = "mask"
    TRUNCATED_IS = "truncated-is"


@dataclass(frozen=True)
class SegmentPlan:
    """A plugin's answer to ``rlvr_rollout_segments``.

    :param tokens: the per-round budget of new tokens per trajectory (≥ 1).
    :param stale: :class:`StaleLoss` for the tokens of earlier segments.
    :param is_cap: ``C`` of the truncated importance weight ``min(π_old / π_behaviour, C)``.
    :param repeat_ngram: ``n > 0``: an unfinished trajectory whose token ``n``-grams repeat is
        cut there, as finished (Kimi §2.6.2's repeat detection: the ``repetition`` reward's
        ``repeated_ngram_share`` on its token ids); 0: off.
    :param repeat_share: the share of repeated ``n``-grams that cuts it.
    """

    tokens: int
    stale: StaleLoss = StaleLoss.MASK
    is_cap: float = 2.0
    repeat_ngram: int = 0
    repeat_share: float = 0.5

    @property
    def needs_behaviour(self) -> bool:
        return self.stale is StaleLoss.TRUNCATED_IS


def vllm_is_conflict(plan: SegmentPlan, correction: bool, mode: str, clip_max: float | None) -> str | None:
    """Under vLLM with TRL's importance-sampling correction on, ``truncated-is`` *is* that correction: the stale
    tokens' sampling log-probs are the behaviour log-probs recorded when they were written, so TRL's per-token
    ``min(exp(old - sampling), clip_max)`` is the plan's weight (the trainer does not weigh them a second time).
    The reason it cannot be, for any other mode or cap; ``None`` when it is (or does not apply).

    >>> plan = SegmentPlan(8, StaleLoss.TRUNCATED_IS, is_cap=3.0)
    >>> vllm_is_conflict(plan, True, "token_truncate", 3.0) is None, vllm_is_conflict(plan, False, "sequence_mask", 3.0)
    (True, None)
    """
    if not (plan.needs_behaviour and correction) or (mode == "token_truncate" and clip_max == plan.is_cap):
        return None
    return (
        f"vLLM's importance-sampling correction as configured (vllm_importance_sampling_mode {mode!r}, "
        f"vllm_importance_sampling_clip_max {clip_max}): under vLLM, stale segments 'truncated-is' is TRL's correction "
        f"on the behaviour log-probs vLLM recorded; set vllm_importance_sampling_mode: token_truncate and "
        f"vllm_importance_sampling_clip_max: {plan.is_cap} (the plugin's is_cap), or "
        "vllm_importance_sampling_correction: false (the plugin then weighs the stale tokens itself), or use "
        "stale_segments: mask"
    )


def segment_conflict(
    plan: SegmentPlan,
    *,
    learner: str | None,
    multi_turn: bool,
    rollout_func: bool,
    paged: bool,
    loss_type: str,
    use_vllm: bool,
    is_correction: bool,
    is_mode: str,
    is_clip_max: float | None,
) -> str | None:
    """What a plan cannot run with, as the end of "cannot run with …", or ``None``: continuing a trajectory from its
    tokens is reachable only through TRL's ``_generate_single_turn``, and a continued group finishes later than the
    step and round that drew it.

    :param learner: the train sampler's plugin when it learns from the rewards of the groups it drew and does not
        keep them in flight (:meth:`rlvr_plugins.manager.PluginSet.learning_sampler`).
    :param multi_turn: tools or an environment (TRL's tool loop).

    >>> segment_conflict(SegmentPlan(8), learner=None, multi_turn=True, rollout_func=False, paged=False,
    ...     loss_type="dapo", use_vllm=False, is_correction=True, is_mode="sequence_mask", is_clip_max=3.0)
    "tools or an environment (a continued segment would re-enter TRL's tool loop)"
    """
    if learner:
        return (
            f"the train sampler {learner!r}, which learns from the rewards of the groups it drew but does not "
            "implement rlvr_pool_started (a continued group finishes at a later step or round than the one that "
            "drew it; that hook names the groups each round starts)"
        )
    if multi_turn:
        return "tools or an environment (a continued segment would re-enter TRL's tool loop)"
    if rollout_func:
        return "a rollout_func (it generates whole trajectories itself)"
    if paged:
        return "TRL's continuous batching (use_transformers_paged)"
    if loss_type == "vespo" and plan.needs_behaviour:
        return "loss_type 'vespo' with stale segments 'truncated-is' (its weights read TRL's own IS ratio)"
    return vllm_is_conflict(plan, is_correction, is_mode, is_clip_max) if use_vllm else None
