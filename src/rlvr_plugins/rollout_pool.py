"""The rollout pool: groups that span generation rounds and steps, from which a step takes its batch.

A *group* is the ``G`` completions of one prompt, generated together in one round. The pool
keeps each group's rows (token ids, masks, per-token log-probs, trimmed of padding) with its
rewards, until a pool policy (the one-winner hook ``rlvr_select_groups``) says which groups a
step trains on, which wait for a later step, and whether to generate another round first.
Every process holds the same pool (rows are gathered after each round), so every process makes
the same choice; each then takes its slice of the chosen rows.

Nothing here imports TRL or a model: rows are plain tensors, the state is JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .errors import PluginContractError


@dataclass(frozen=True)
class GroupSummary:
    """What a pool policy sees of one ready group (every member finished or cut at ``max_completion_length``).

    :param id: unique within the run, increasing in generation order.
    :param index: the prompt's dataset index (``rlvr_index``).
    :param age: optimizer steps since the group was generated (0: generated for this step).
    :param informative: its valid total rewards are not all equal (its advantages are not all 0).
    :param rewards: the ``G`` total rewards (NaN where a completion has no score).
    """

    id: int
    index: int
    age: int
    informative: bool
    rewards: tuple[float, ...]


@dataclass(frozen=True)
class GroupSelection:
    """A pool policy's answer for one round.

    :param more: generate another round before choosing (``train`` and ``keep`` are then ignored).
    :param train: when ``more`` is False, the ids of exactly ``needed`` distinct groups, the batch, in order.
    :param keep: ids of groups (not in ``train``) that wait for a later step; every other group is dropped.
    """

    more: bool = False
    train: tuple[int, ...] = ()
    keep: tuple[int, ...] = ()


@dataclass
class PooledGroup:
    """One group's rows and scores: ``rows[key]`` holds ``G`` 1-D tensors (padding trimmed), ``scores`` the
    gathered per-row tensors of the group (``rewards_per_func (G, K)``, ``failed (G, K)``, ``lengths (G,)``)."""

    id: int
    index: int
    born: int
    informative: bool
    total: tuple[float, ...]
    rows: dict[str, list[torch.Tensor]]
    scores: dict[str, torch.Tensor]

    def summary(self, step: int) -> GroupSummary:
        return GroupSummary(self.id, self.index, step - self.born, self.informative, self.total)


@dataclass
class StepCounts:
    """The ``pool/*`` metrics of one step."""

    rounds: int = 0
    groups_generated: int = 0
    informative_generated: int = 0
    groups_kept: int = 0
    informative_kept: int = 0
    carried: int = 0
    dropped_old: int = 0
    discarded: int = 0
    skipped_prompts: int = 0

    def metrics(self, needed: int) -> dict[str, float]:
        return {
            "pool/rounds": float(self.rounds),
            "pool/groups_generated": float(self.groups_generated),
            "pool/groups_kept": float(self.groups_kept),
            "pool/frac_informative": self.informative_generated / max(self.groups_generated, 1),
            "pool/carried": float(self.carried),
            "pool/dropped_old": float(self.dropped_old),
            "pool/discarded": float(self.discarded),
            "pool/short_batch": float(self.informative_kept < needed),
            "pool/skipped_prompts": float(self.skipped_prompts),
        }


@dataclass
class RolloutPool:
    """The groups waiting to be trained on, and the run's totals (for the conservation check).

    Invariant: ``generated == trained + dropped + len(groups)``: no group is trained twice, and
    none leaves the pool without being counted.
    """

    num_generations: int
    groups: dict[int, PooledGroup] = field(default_factory=dict)
    next_id: int = 0
    generated: int = 0
    trained: int = 0
    dropped: int = 0

    def add(
        self,
        rows: Mapping[str, Sequence[torch.Tensor]],
        scores: Mapping[str, torch.Tensor],
        indices: Sequence[int],
        total: torch.Tensor,
        informative: Sequence[bool],
        step: int,
    ) -> list[int]:
        """Add one round's gathered rows (``N = groups * G``, groups contiguous); return the new group ids."""
        g = self.num_generations
        ids = []
        for k, useful in enumerate(informative):
            part = slice(k * g, (k + 1) * g)
            group = PooledGroup(
                id=self.next_id,
                index=int(indices[k * g]),
                born=step,
                informative=bool(useful),
                total=tuple(float(x) for x in total[part].tolist()),
                rows={key: list(values[part]) for key, values in rows.items()},
                scores={key: value[part] for key, value in scores.items()},
            )
            self.groups[group.id] = group
            ids.append(group.id)
            self.next_id += 1
        self.generated += len(ids)
        return ids

    def summaries(self, step: int) -> list[GroupSummary]:
        return [group.summary(step) for group in self.groups.values()]

    def settle(
        self, selection: GroupSelection, needed: int, step: int, policy: str
    ) -> tuple[list[PooledGroup], StepCounts]:
        """Apply a final selection: remove and return the ``train`` groups in order, keep ``keep``, drop the rest.

        :raises PluginContractError: naming ``policy`` when ``train`` is not ``needed`` distinct ids of the pool,
            or ``keep`` names a group that is not in the pool or is also trained.
        """
        train, keep = list(selection.train), set(selection.keep)
        unknown = [i for i in [*train, *keep] if i not in self.groups]
        problem = (
            f"names groups not in the pool: {sorted(set(unknown))[:5]}"
            if unknown
            else f"trains {len(train)} groups, the batch needs {needed}"
            if len(train) != needed
            else "trains a group twice"
            if len(set(train)) != len(train)
            else "both trains and keeps a group"
            if keep & set(train)
            else None
        )
        if problem:
            raise PluginContractError(f"plugin {policy!r}: rlvr_select_groups {problem}")
        counts = StepCounts()
        chosen = [self.groups.pop(i) for i in train]
        counts.groups_kept = len(chosen)
        counts.informative_kept = sum(g.informative for g in chosen)
        counts.carried = sum(g.born < step for g in chosen)
        for i in [i for i in self.groups if i not in keep]:
            old = self.groups.pop(i).born < step
            counts.dropped_old += old
            counts.discarded += not old
        self.trained += len(chosen)
        self.dropped += counts.dropped_old + counts.discarded
        return chosen, counts

    # -- checkpoints ------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """JSON: the totals and every waiting group (tensors as nested lists with their dtype)."""
        return {
            "num_generations": self.num_generations,
            "next_id": self.next_id,
            "generated": self.generated,
            "trained": self.trained,
            "dropped": self.dropped,
            "groups": [
                {
                    "id": g.id,
                    "index": g.index,
                    "born": g.born,
                    "informative": g.informative,
                    "total": list(g.total),
                    "rows": {k: [_encode(t) for t in v] for k, v in g.rows.items()},
                    "scores": {k: _encode(t) for k, t in g.scores.items()},
                }
                for g in self.groups.values()
            ],
        }

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> RolloutPool:
        pool = cls(
            num_generations=int(state["num_generations"]),
            next_id=int(state["next_id"]),
            generated=int(state["generated"]),
            trained=int(state["trained"]),
            dropped=int(state["dropped"]),
        )
        for g in state["groups"]:
            pool.groups[int(g["id"])] = PooledGroup(
                id=int(g["id"]),
                index=int(g["index"]),
                born=int(g["born"]),
                informative=bool(g["informative"]),
                total=tuple(float(x) for x in g["total"]),
                rows={k: [_decode(t) for t in v] for k, v in g["rows"].items()},
                scores={k: _decode(t) for k, t in g["scores"].items()},
            )
        return pool


@dataclass
class PromptRecord:
    """Per prompt (``rlvr_index``): its last valid total reward and the *streak*, how many valid completions in a
    row (over every round, step and resume) scored exactly that. A streak of ``n`` means the prompt's last ``n``
    samples were all alike: all right or all wrong, for a 0/1 reward.

    >>> r = PromptRecord()
    >>> r.observe([4, 4, 4, 9], torch.tensor([1.0, 1.0, float("nan"), 0.5]))
    >>> r.streaks
    {4: [1.0, 2], 9: [0.5, 1]}
    >>> r.observe([4, 4], torch.tensor([0.0, 0.0])); r.streaks[4]
    [0.0, 2]
    """

    streaks: dict[int, list] = field(default_factory=dict)

    def observe(self, indices: Sequence[int], totals: torch.Tensor) -> None:
        for index, total in zip(indices, totals.tolist(), strict=True):
            if total != total:  # NaN: no score
                continue
            entry = self.streaks.get(int(index))
            if entry is not None and entry[0] == total:
                entry[1] += 1
            else:
                self.streaks[int(index)] = [total, 1]

    def state_dict(self) -> dict[str, Any]:
        return {str(k): v for k, v in self.streaks.items()}

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> PromptRecord:
        return cls({int(k): [float(v[0]), int(v[1])] for k, v in state.items()})


def replace_prompts(prompts: Sequence[int], candidates: Sequence[int], skip: set[int]) -> tuple[list[int], int]:
    """The round's ``prompts`` without those in ``skip``, filled up from ``candidates`` (in order, not skipped, not
    already there); a skipped prompt stays when the candidates run out. Returns ``(prompts, how many replaced)``.

    >>> replace_prompts([1, 2, 3], [2, 5, 6, 7], {2, 6})
    ([1, 3, 5], 1)
    >>> replace_prompts([1, 2], [1], {2})
    ([1, 2], 0)
    """
    kept = [p for p in prompts if p not in skip]
    taken = set(prompts)
    fill = [c for c in candidates if c not in skip and c not in taken][: len(prompts) - len(kept)]
    if len(kept) + len(fill) < len(prompts):
        return list(prompts), 0
    return kept + fill, len(fill)


def _encode(t: torch.Tensor) -> dict[str, Any]:
    return {"dtype": str(t.dtype).removeprefix("torch."), "values": t.detach().cpu().tolist()}


def _decode(d: Mapping[str, Any]) -> torch.Tensor:
    return torch.tensor(d["values"], dtype=getattr(torch, d["dtype"]))


def extra_prompts(seed: int, step: int, round: int, num_prompts: int, count: int) -> list[int]:
    """``count`` distinct dataset positions in a uniform order fixed by ``(seed, step, round)``: the default
    sampler's ``rlvr_pool_prompts`` (an extra round generates for the first ones), the same on every process
    and after a resume; a prefix of a longer draw is the shorter draw.

    >>> extra_prompts(0, 3, 1, 10, 4) == extra_prompts(0, 3, 1, 10, 4) != extra_prompts(0, 3, 2, 10, 4)
    True
    >>> len(set(extra_prompts(0, 0, 1, 5, 5)))
    5
    >>> extra_prompts(0, 3, 1, 10, 10)[:4] == extra_prompts(0, 3, 1, 10, 4)
    True
    """
    generator = torch.Generator().manual_seed((seed * 1_000_003 + step) * 1_009 + round)
    return torch.randperm(num_prompts, generator=generator)[:count].tolist()


def trim_rows(values: torch.Tensor, lengths: Iterable[int], left: bool = False) -> list[torch.Tensor]:
    """``(B, L)`` padded rows → ``B`` 1-D rows of ``lengths`` (kept from the right end when ``left``, as for
    left-padded prompts).

    >>> trim_rows(torch.tensor([[0, 7, 8], [5, 6, 9]]), [2, 3], left=True)
    [tensor([7, 8]), tensor([5, 6, 9])]
    """
    return [row[row.numel() - n :] if left else row[:n] for row, n in zip(values, lengths, strict=True)]
