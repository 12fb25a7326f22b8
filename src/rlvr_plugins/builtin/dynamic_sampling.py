"""DAPO's dynamic sampling (Yu et al. 2025, §3.2) as a pool policy: train only on informative groups."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from .. import hookimpl
from ..fields import Rule, at_least
from ..plugin import Plugin

if TYPE_CHECKING:  # listing the plugins imports no torch
    from ..rollout_pool import GroupSelection, GroupSummary


def dapo_selection(
    groups: Sequence[GroupSummary],
    needed: int,
    round: int,
    *,
    max_rounds: int,
    keep_leftovers: bool,
    max_group_age: int,
) -> GroupSelection:
    """DAPO's rule: the batch holds only groups with ``0 < |{o_i : o_i correct}| < G``, i.e. whose rewards differ.

    Over-sample until ``needed`` informative groups are ready, oldest first (a carried group of age
    ``a ≤ max_group_age`` before the groups of this step); after ``max_rounds`` rounds, train on the
    informative groups there are, filled up with the newest uninformative ones (their advantages are 0).
    Leftover informative groups wait for the next step when ``keep_leftovers`` and they will still be at
    most ``max_group_age`` steps old there; every other group is dropped.

    >>> from rlvr_plugins.rollout_pool import GroupSummary
    >>> g = [GroupSummary(i, i, 0, i % 2 == 1, ()) for i in range(4)]
    >>> dapo_selection(g, 2, 0, max_rounds=3, keep_leftovers=False, max_group_age=1)
    GroupSelection(more=False, train=(1, 3), keep=())
    >>> dapo_selection(g, 3, 0, max_rounds=3, keep_leftovers=False, max_group_age=1).more
    True
    >>> dapo_selection(g, 3, 2, max_rounds=3, keep_leftovers=False, max_group_age=1).train
    (1, 3, 2)
    """
    from ..rollout_pool import GroupSelection

    usable = [g for g in groups if g.age <= max_group_age]
    informative = sorted((g for g in usable if g.informative), key=lambda g: (-g.age, g.id))
    if len(informative) < needed and round + 1 < max_rounds:
        return GroupSelection(more=True)
    train = [g.id for g in informative[:needed]]
    if len(train) < needed:
        filler = sorted((g for g in usable if not g.informative), key=lambda g: (g.age, -g.id))
        train += [g.id for g in filler[: needed - len(train)]]
    keep = [g.id for g in informative[needed:] if g.age < max_group_age] if keep_leftovers else []
    return GroupSelection(more=False, train=tuple(train), keep=tuple(keep))


def saturated_prompts(
    prompts: Sequence[int],
    history: Mapping[int, Sequence[float]],
    step: int,
    round: int,
    *,
    streak: int,
    recheck: float,
) -> list[int]:
    """The prompts to skip before generating: those whose last ``streak`` valid completions all scored alike
    (``history[p] = (reward, streak)``), except each with probability ``recheck`` (a draw fixed by the step,
    the round and the prompt's place), so that a prompt the policy has since learned, or unlearned, comes back.

    >>> saturated_prompts([1, 2, 3], {1: (1.0, 8), 2: (0.0, 3), 3: (0.0, 16)}, 0, 0, streak=8, recheck=0.0)
    [1, 3]
    >>> saturated_prompts([1, 2, 3], {1: (1.0, 8)}, 0, 0, streak=8, recheck=1.0)
    []
    """
    import torch

    draws = torch.rand(len(prompts), generator=torch.Generator().manual_seed(step * 1_000_003 + round)).tolist()
    return [p for p, u in zip(prompts, draws) if history.get(p, (0.0, 0))[1] >= streak and u >= recheck]


class DAPODynamicSampling(Plugin):
    """Keep generating rounds until the batch holds only groups whose rewards differ (DAPO §3.2).

    With ``skip_streak > 0`` it also skips, before generating, every prompt whose last ``skip_streak``
    completions all scored alike (all right or all wrong), re-checking each with ``recheck_probability``.
    ``max_rounds`` is at most 100: a run whose rewards never differ would otherwise not end its step.
    """

    name = "dapo-dynamic-sampling"
    description = (
        "DAPO dynamic sampling: generate rounds until the batch holds B informative groups (rewards not all "
        "equal) or max_rounds; leftovers may wait max_group_age steps"
    )

    @dataclass
    class Options:
        max_rounds: Annotated[int, Rule(lambda v: 1 <= v <= 100, "an integer from 1 to 100")] = 3
        keep_leftovers: bool = False
        max_group_age: Annotated[int, at_least(0)] = 1
        skip_streak: Annotated[int, at_least(0)] = 0
        recheck_probability: Annotated[float, Rule(lambda v: 0.0 <= v <= 1.0, "a number in [0, 1]")] = 0.1

    @hookimpl
    def rlvr_select_groups(self, groups, needed, round):
        o = self.options
        return dapo_selection(
            groups,
            needed,
            round,
            max_rounds=o.max_rounds,
            keep_leftovers=o.keep_leftovers,
            max_group_age=o.max_group_age,
        )

    @hookimpl
    def rlvr_skip_prompts(self, prompts, history, step, round):
        o = self.options
        if not o.skip_streak:
            return None
        return saturated_prompts(prompts, history, step, round, streak=o.skip_streak, recheck=o.recheck_probability)
