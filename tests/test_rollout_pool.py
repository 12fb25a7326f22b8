"""The rollout pool (rlvr_select_groups) and DAPO's dynamic sampling: invariants, the policy, training runs."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_plugins.builtin.dynamic_sampling import dapo_selection
from rlvr_plugins.errors import PluginContractError
from rlvr_plugins.rollout_pool import GroupSelection, GroupSummary, RolloutPool, extra_prompts, trim_rows

G = 2


def add_round(pool: RolloutPool, informative: list[bool], step: int) -> list[int]:
    n = len(informative) * G
    rows = {"completion_ids": [torch.arange(1 + i % 3) for i in range(n)], "prompt_ids": [torch.tensor([5])] * n}
    scores = {"lengths": torch.tensor([1 + i % 3 for i in range(n)]), "rewards_per_func": torch.zeros(n, 1)}
    total = torch.tensor([float(j) if flag else 0.0 for flag in informative for j in range(G)])
    return pool.add(rows, scores, list(range(n)), total, informative, step)


# one step = rounds of (number of groups, share informative); the policy is DAPO's with these options
steps_strategy = st.lists(
    st.lists(st.lists(st.booleans(), min_size=1, max_size=4), min_size=1, max_size=4), min_size=1, max_size=6
)


@settings(max_examples=60, deadline=None)
@given(
    steps=steps_strategy,
    needed=st.integers(1, 3),
    keep=st.booleans(),
    max_age=st.integers(0, 2),
)
def test_no_group_trained_twice_and_none_lost_uncounted(steps, needed, keep, max_age):
    pool, trained_ids = RolloutPool(G), []
    for step, rounds in enumerate(steps):
        generated_before = pool.generated
        for r, flags in enumerate(rounds):
            add_round(pool, flags + [False] * max(0, needed - len(flags)), step)  # a round fills a batch
            selection = dapo_selection(
                pool.summaries(step), needed, r, max_rounds=len(rounds), keep_leftovers=keep, max_group_age=max_age
            )
            if not selection.more:
                break
        assert not selection.more  # max_rounds bounds the rounds
        waiting = set(pool.groups)
        chosen, counts = pool.settle(selection, needed, step, "dapo-dynamic-sampling")
        ids = [g.id for g in chosen]
        assert len(ids) == needed and not set(ids) & set(trained_ids)  # never trained twice
        trained_ids += ids
        assert all(step - g.born <= max_age for g in chosen)
        assert all(step - g.born < max_age for g in pool.groups.values())  # what waits is young enough
        # every group that was waiting is trained, still waits, or counted as dropped
        assert counts.groups_kept + counts.dropped_old + counts.discarded + len(pool.groups) == len(waiting)
        assert counts.groups_generated == 0 and pool.generated - generated_before <= len(waiting)
        assert pool.generated == pool.trained + pool.dropped + len(pool.groups)  # conservation
        assert keep or not pool.groups
    # a checkpoint round-trips the pool exactly
    again = RolloutPool.from_state_dict(pool.state_dict())
    assert again.state_dict() == pool.state_dict()


@settings(max_examples=40, deadline=None)
@given(flags=st.lists(st.booleans(), min_size=1, max_size=8), needed=st.integers(1, 4), r=st.integers(0, 3))
def test_every_process_makes_the_same_choice_from_the_same_gathered_state(flags, needed, r):
    """Two pools built from the same gathered rounds (two processes, or a resumed run) choose the same groups."""
    a, b = RolloutPool(G), RolloutPool(G)
    add_round(a, flags, 0)
    b = RolloutPool.from_state_dict(a.state_dict())
    options = dict(max_rounds=2, keep_leftovers=True, max_group_age=1)
    sel_a, sel_b = dapo_selection(a.summaries(1), needed, r, **options), dapo_selection(b.summaries(1), needed, r, **options)
    assert sel_a == sel_b


def test_dapo_selection_by_hand():
    groups = [
        GroupSummary(0, 10, 1, True, ()),  # carried from the last step
        GroupSummary(1, 11, 2, True, ()),  # too old
        GroupSummary(2, 12, 0, False, ()),
        GroupSummary(3, 13, 0, True, ()),
        GroupSummary(4, 14, 0, True, ()),
        GroupSummary(5, 15, 0, False, ()),
    ]
    sel = dapo_selection(groups, 2, 0, max_rounds=3, keep_leftovers=True, max_group_age=1)
    assert sel == GroupSelection(more=False, train=(0, 3), keep=(4,))  # oldest usable first; 1 is past its age
    assert dapo_selection(groups, 2, 0, max_rounds=3, keep_leftovers=False, max_group_age=1).keep == ()
    assert dapo_selection(groups, 4, 0, max_rounds=3, keep_leftovers=True, max_group_age=1).more
    short = dapo_selection(groups, 4, 2, max_rounds=3, keep_leftovers=True, max_group_age=1)
    assert short == GroupSelection(more=False, train=(0, 3, 4, 5), keep=())  # filled with the newest uninformative


def test_settle_refuses_a_bad_selection_naming_the_plugin():
    pool = RolloutPool(G)
    add_round(pool, [True, False], 0)
    for bad, words in (
        (GroupSelection(train=(0,)), "trains 1 groups, the batch needs 2"),
        (GroupSelection(train=(0, 0)), "trains a group twice"),
        (GroupSelection(train=(0, 7)), "not in the pool"),
        (GroupSelection(train=(0, 1), keep=(1,)), "both trains and keeps"),
    ):
        with pytest.raises(PluginContractError, match=f"plugin 'p': rlvr_select_groups .*{words}"):
            pool.settle(bad, 2, 0, "p")


def test_settle_counts_by_hand():
    pool = RolloutPool(G)
    add_round(pool, [True, True, False], 0)  # ids 0, 1, 2
    _, counts = pool.settle(GroupSelection(train=(0,), keep=(1,)), 1, 0, "p")
    assert (counts.groups_kept, counts.discarded, counts.dropped_old) == (1, 1, 0)
    add_round(pool, [False, False], 1)  # ids 3, 4
    chosen, counts = pool.settle(GroupSelection(train=(1,)), 1, 1, "p")
    assert [g.id for g in chosen] == [1] and (counts.carried, counts.discarded, counts.dropped_old) == (1, 2, 0)
    add_round(pool, [True], 2)
    pool.groups[5].born = 0  # pretend it waited two steps
    _, counts = pool.settle(GroupSelection(train=()), 0, 2, "p")
    assert counts.dropped_old == 1
    assert (pool.generated, pool.trained, pool.dropped) == (6, 2, 4)
    assert counts.metrics(0)["pool/dropped_old"] == 1.0


def test_trim_rows_and_extra_prompts():
    assert [t.tolist() for t in trim_rows(torch.tensor([[1, 2, 0], [3, 0, 0]]), [2, 1])] == [[1, 2], [3]]
    draw = extra_prompts(7, 2, 1, 20, 6)
    assert len(set(draw)) == 6 and all(0 <= i < 20 for i in draw)
    assert draw != extra_prompts(7, 3, 1, 20, 6)
