"""``kimi-partial-rollouts``: Kimi k1.5's partial rollouts (§2.6.2) on the framework's rollout pool."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from rlvr_plugins import Plugin, hookimpl
from rlvr_plugins.fields import Rule, at_least


class KimiPartialRollouts(Plugin):
    """Generate each trajectory in segments of at most ``segment_tokens`` new tokens per round.

    A trajectory that has not finished waits in the pool with its tokens and is continued by the
    next generation round from the current policy; new prompts fill the rest of the round, so a
    long trajectory no longer holds a whole batch back (Kimi k1.5 §2.6.2). A group trains once all
    its members finished. Tokens written at an earlier step than the trajectory's last segment are
    *stale*: ``stale_segments: mask`` leaves them out of the loss (Kimi: segments of earlier
    iterations can be excluded from the loss), ``truncated-is`` weights their policy-gradient term
    by ``min(π_old / π_behaviour, is_cap)`` against the log-probs recorded when they were written.
    ``repeat_ngram: n > 0`` cuts an unfinished trajectory once ``repeat_share`` of its token ``n``-grams repeat
    (Kimi's repeat detection; counted in ``pool/repeat_stopped``); the cut trajectory has no EOS, so it is
    penalised by whatever reward needs a finished answer, and by the ``repetition`` reward when enabled.
    """

    name = "kimi-partial-rollouts"
    description = (
        "Kimi k1.5 partial rollouts: at most segment_tokens new tokens per trajectory and round; unfinished "
        "trajectories wait in the pool and continue from the current policy (stale segments masked or IS-weighted)"
    )

    @dataclass
    class Options:
        segment_tokens: Annotated[int, at_least(1)] = 64
        stale_segments: Literal["mask", "truncated-is"] = "mask"
        is_cap: Annotated[float, Rule(lambda v: v >= 1.0 and v < float("inf"), "a finite number >= 1")] = 3.0
        repeat_ngram: Annotated[int, at_least(0)] = 0
        repeat_share: Annotated[float, Rule(lambda v: 0.0 < v <= 1.0, "a number in (0, 1]")] = 0.5

    @hookimpl
    def rlvr_rollout_segments(self):
        from rlvr_plugins.segment_plan import SegmentPlan, StaleLoss

        o = self.options
        return SegmentPlan(
            tokens=o.segment_tokens,
            stale=StaleLoss(o.stale_segments),
            is_cap=o.is_cap,
            repeat_ngram=o.repeat_ngram,
            repeat_share=o.repeat_share,
        )
