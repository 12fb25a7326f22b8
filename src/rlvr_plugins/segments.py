"""Partial rollouts (Kimi k1.5 §2.6.2): trajectories generated in segments of a token budget, across rounds and steps.

Each generation round of the rollout pool gives every trajectory at most ``tokens`` new tokens. A group
whose members have not all finished (EOS, or ``max_completion_length``) waits here, its members' tokens
so far with the step and, when asked for, the behaviour log-prob of every token; a later round continues
each unfinished member from the policy of that round, its prompt and tokens so far as the context. When
every member has finished, the group becomes a ready group of the pool (:mod:`rlvr_plugins.rollout_pool`).

A token is *stale* when it was generated at an earlier optimizer step than its trajectory's last segment:
the policy that trains on the finished trajectory (or, for a group that waits, the one that recorded its
``old_per_token_logps``) is not the one that wrote it. :func:`stale_weights` says what the loss does with it.

Nothing here imports TRL or a model: rows are plain tensors, the state is JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .rollout_pool import GroupSelection, _decode, _encode
from .segment_plan import SegmentPlan as SegmentPlan
from .segment_plan import StaleLoss as StaleLoss

#: Per-token rows a continued trajectory carries into its ready group (beside TRL's fields).
TOKEN_STEP = "rlvr_token_step"
BEHAVIOUR = "rlvr_behaviour_logps"


def stale_tokens(token_steps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` bool: the tokens written at an earlier step than their row's last token.

    ``token_steps (B, T)`` is the step each token was generated at, ``mask (B, T)`` the completion mask.

    >>> stale_tokens(torch.tensor([[3, 3, 5, 5], [5, 5, 0, 0]]), torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]]))
    tensor([[ True,  True, False, False],
            [False, False, False, False]])
    """
    last = torch.where(mask.bool(), token_steps, torch.iinfo(token_steps.dtype).min).amax(dim=1, keepdim=True)
    return mask.bool() & (token_steps < last)


def stale_weights(
    old_logps: torch.Tensor, behaviour_logps: torch.Tensor, stale: torch.Tensor, mode: StaleLoss, cap: float
) -> torch.Tensor:
    """``(B, T)`` per-token weight of the policy-gradient term: 1 on fresh tokens, and on stale ones

    * ``MASK``: ``w_t = 0`` (Kimi k1.5 §2.6.2: segments rolled out in earlier iterations can be excluded
      from the loss);
    * ``TRUNCATED_IS``: ``w_t = min(π_old(y_t) / π_behaviour(y_t), C) = min(exp(old_t − behaviour_t), C)``,
      the truncated importance weight of TRL's vLLM correction (``vllm_importance_sampling_cap``), against
      the log-probs recorded when the segment was generated.

    >>> old, beh = torch.tensor([[0.0, -1.0, -1.0]]), torch.tensor([[-1.0, -0.5, -3.0]])
    >>> stale = torch.tensor([[True, True, False]])
    >>> stale_weights(old, beh, stale, StaleLoss.TRUNCATED_IS, 2.0)
    tensor([[2.0000, 0.6065, 1.0000]])
    >>> stale_weights(old, beh, stale, StaleLoss.MASK, 2.0)
    tensor([[0., 0., 1.]])
    """
    if mode is StaleLoss.MASK:
        return (~stale).to(old_logps.dtype)
    ratio = torch.exp(old_logps - behaviour_logps).clamp(max=cap)
    return torch.where(stale, ratio, torch.ones_like(ratio))


def finished(completion: Sequence[int], prefix_length: int, budget: int, max_length: int, eos: set[int]) -> bool:
    """A trajectory is finished when it ends in EOS, reached ``max_length`` tokens, or wrote fewer new
    tokens than its round's ``budget`` (the generator stopped it, e.g. a stop string).

    >>> finished([5, 6, 2], 1, 4, 10, {2}), finished([5, 6, 7], 1, 2, 10, {2}), finished([5] * 10, 8, 4, 10, set())
    (True, False, True)
    """
    if not completion:
        return True
    new = len(completion) - prefix_length
    return completion[-1] in eos or len(completion) >= max_length or new < min(budget, max_length - prefix_length)


#: One row of a segment round, as the generation seam gets it: the completion so far, whether it finished, and (vLLM)
#: the sampling log-prob of each of its tokens (``None``: no log-prob, as vLLM marks a token it could not score).
Member = tuple[list[int], bool, list[float | None] | None]


def join_segments(
    members: Sequence[Member], written: Mapping[int, tuple[Sequence[int], Sequence[float | None] | None]], limit: int
) -> tuple[list[list[int]], list[list[float | None]] | None]:
    """Each row's completion after one segment round, as TRL's ``_generate_single_turn`` returns them: the row's tokens
    so far followed by what it wrote this round (``written[i] = (ids, logprobs)``; a row absent there, finished, is
    returned as is), cut at ``limit`` tokens; and, when the members carry sampling log-probs (vLLM), theirs joined the
    same way (else ``None``, as TRL's transformers path).

    >>> join_segments([([5, 6], False, [-0.1, None]), ([7], True, [-0.3])], {0: ([8, 9], [-0.5, -0.6])}, 3)
    ([[5, 6, 8], [7]], [[-0.1, None, -0.5], [-0.3]])
    >>> join_segments([([5], False, None)], {0: ([8], None)}, 4)
    ([[5, 8]], None)
    """
    completions: list[list[int]] = []
    logprobs: list[list[float | None]] = []
    for i, (prefix, _, prefix_logps) in enumerate(members):
        ids, logps = written.get(i, ((), ()))
        completions.append((prefix + list(ids))[:limit])
        if prefix_logps is not None:
            logprobs.append((prefix_logps + list(logps or ()))[:limit])
    return completions, (logprobs if len(logprobs) == len(members) else None)


def prefix_logprobs(logps: torch.Tensor, token_steps: torch.Tensor, step: int, hide_stale: bool) -> list[float | None]:
    """The sampling log-probs of a continued trajectory's tokens so far, handed back to TRL with its tokens (vLLM):
    ``None`` where none was recorded (NaN), and, when ``hide_stale``, where the token was written at an earlier step
    than ``step``. TRL gives a ``None`` token an importance ratio of exactly 1 and leaves it out of its vLLM mismatch
    metrics: under ``stale_segments: mask`` a stale token is out of the loss, and must not sway TRL's sequence-level
    ratio (``vllm_importance_sampling_mode: sequence_*``) either; under ``truncated-is`` its behaviour log-prob is
    what TRL's correction weighs.

    >>> prefix_logprobs(torch.tensor([-0.5, float("nan"), -0.25]), torch.tensor([1, 2, 2]), 2, hide_stale=True)
    [None, None, -0.25]
    >>> prefix_logprobs(torch.tensor([-0.5, -0.25]), torch.tensor([1, 2]), 2, hide_stale=False)
    [-0.5, -0.25]
    """
    hidden = torch.isnan(logps)
    if hide_stale:
        hidden |= token_steps < step
    return [None if h else float(v) for v, h in zip(logps.tolist(), hidden.tolist(), strict=True)]


@dataclass
class PendingGroup:
    """A group with members still unfinished: each member's latest TRL rows (``rows[key][i]``, padding trimmed),
    the step of each of its tokens, its behaviour log-probs (when recorded) and its number of segments."""

    index: int
    born: int
    done: list[bool]
    rows: dict[str, list[torch.Tensor]]
    token_steps: list[torch.Tensor]
    behaviour: list[torch.Tensor]
    segments: list[int]

    def prefix(self, i: int) -> list[int]:
        return self.rows["completion_ids"][i].tolist()


@dataclass
class Continuations:
    """The pending groups, in the order they started, and the run's trajectory totals.

    Invariant: ``started == finished + G · len(pending)`` counts trajectories: a trajectory leaves
    here only finished, inside a ready group of the pool.
    """

    num_generations: int
    pending: list[PendingGroup] = field(default_factory=list)
    started: int = 0
    completed: int = 0
    segments_completed: int = 0
    repeat_stopped: int = 0

    def carried(self) -> int:
        """Unfinished trajectories waiting (``pool/partial_carried``)."""
        return sum(not d for group in self.pending for d in group.done)

    def state_dict(self) -> dict[str, Any]:
        return {
            "started": self.started,
            "completed": self.completed,
            "segments_completed": self.segments_completed,
            "repeat_stopped": self.repeat_stopped,
            "pending": [
                {
                    "index": g.index,
                    "born": g.born,
                    "done": g.done,
                    "segments": g.segments,
                    "rows": {k: [_encode(t) for t in v] for k, v in g.rows.items()},
                    "token_steps": [_encode(t) for t in g.token_steps],
                    "behaviour": [_encode(t) for t in g.behaviour],
                }
                for g in self.pending
            ],
        }

    @classmethod
    def from_state_dict(cls, num_generations: int, state: Mapping[str, Any]) -> Continuations:
        return cls(
            num_generations,
            [
                PendingGroup(
                    index=int(g["index"]),
                    born=int(g["born"]),
                    done=[bool(d) for d in g["done"]],
                    rows={k: [_decode(t) for t in v] for k, v in g["rows"].items()},
                    token_steps=[_decode(t) for t in g["token_steps"]],
                    behaviour=[_decode(t) for t in g["behaviour"]],
                    segments=[int(s) for s in g["segments"]],
                )
                for g in state["pending"]
            ],
            started=int(state["started"]),
            completed=int(state["completed"]),
            segments_completed=int(state["segments_completed"]),
            repeat_stopped=int(state.get("repeat_stopped", 0)),
        )


def extend_steps(previous: torch.Tensor | None, length: int, step: int) -> torch.Tensor:
    """The per-token steps of a trajectory of ``length`` tokens whose first ``len(previous)`` are ``previous``.

    >>> extend_steps(torch.tensor([0, 0]), 5, 3)
    tensor([0, 0, 3, 3, 3])
    """
    old = previous if previous is not None else torch.zeros(0, dtype=torch.long)
    return torch.cat([old, torch.full((length - old.numel(),), step, dtype=torch.long)])


def ready_first_selection(groups: Sequence[Any], needed: int) -> Any:
    """The pool's choice when partial rollouts run without a pool policy (which is asked only once ``needed``
    groups are ready): the ``needed`` oldest ready groups, in generation order; the others wait.

    >>> from rlvr_plugins.rollout_pool import GroupSummary
    >>> ready_first_selection([GroupSummary(i, i, 0, True, ()) for i in range(3)], 2)
    GroupSelection(more=False, train=(0, 1), keep=(2,))
    """
    ids = [g.id for g in groups]
    return GroupSelection(more=False, train=tuple(ids[:needed]), keep=tuple(ids[needed:]))
