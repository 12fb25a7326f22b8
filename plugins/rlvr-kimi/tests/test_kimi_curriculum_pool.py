"""``kimi-curriculum`` under the rollout pool without a trainer: the extra rounds' order, their counting, the checks."""

from __future__ import annotations

import pytest
from test_kimi_curriculum_sampler import G, feed, make_sampler, plugin

from rlvr_plugins.errors import PluginContractError


def heavy(p, favourite=5, n=12):
    """A state in which prompt ``favourite`` was never solved in 100 tries and every other prompt always was:
    weights 1 against floor 1e-4, so ``favourite`` is drawn first with probability 1 / (1 + 11e-4) ≈ 0.999."""
    sampler = make_sampler(p)
    sampler.state.successes = [0 if i == favourite else 100 for i in range(n)]
    sampler.state.attempts = [100] * n
    return sampler


def test_extra_rounds_draw_the_prompt_the_curriculum_weights_to_one():
    p = plugin(schedule="none", floor=1e-4, prior_strength=0.0)
    sampler = heavy(p)
    orders = [p.rlvr_pool_prompts(step=step, round=r) for step in range(10) for r in (1, 2)]
    assert all(sorted(order) == list(range(12)) for order in orders)  # every admitted prompt, once
    assert [order[0] for order in orders] == [5] * 20
    assert len({tuple(order[1:]) for order in orders}) > 1  # the rest varies with (step, round)
    uniform = plugin(schedule="none", floor=1.0)
    make_sampler(uniform)  # all weights equal: 5 comes first about once in 12
    assert sum(uniform.rlvr_pool_prompts(step=s, round=1)[0] == 5 for s in range(60)) < 20
    assert sampler.offered[2] == set(range(12))


def test_two_ranks_with_the_same_state_offer_the_same_order_and_a_resume_too():
    ranks = [plugin(schedule="none", skip_zero_variance_steps=2) for _ in range(2)]
    for p in ranks:
        sampler = make_sampler(p)
        it = iter(sampler)
        chunk0 = [next(it) for _ in range(3 * G * 2)][: 3 * G : G]
        feed(p, chunk0, lambda i, j: (i + j) % 3 == 0)
    a, b = (p.rlvr_pool_prompts(step=0, round=1) for p in ranks)
    assert a == b
    resumed = plugin(schedule="none", skip_zero_variance_steps=2)
    resumed.rlvr_load_state_dict(ranks[0].rlvr_state_dict())
    make_sampler(resumed)
    assert resumed.rlvr_pool_prompts(step=0, round=1) == a
    assert ranks[0].rlvr_pool_prompts(step=0, round=2) != a


def pooled(p, ids, correct_of, round=0, drawn=None):
    """The pool's protocol for one round whose groups all finish in it: started (round 0: from the batch
    ``drawn``, by default ``ids``), then scored."""
    p.rlvr_pool_started(prompts=ids, drawn=(ids if drawn is None else drawn) if round == 0 else [], round=round)
    return feed(p, ids, correct_of, round=round)


def test_every_generated_group_is_counted_by_hand():
    """Round 0 (the chunk, one prompt replaced from the offer) and round 1 (offered prompts) both count."""
    p = plugin(schedule="none")
    sampler = make_sampler(p)
    it = iter(sampler)
    chunk0 = [next(it) for _ in range(3 * G * 2)][: 3 * G : G]
    order = p.rlvr_pool_prompts(step=0, round=0)
    stand_in = next(i for i in order if i not in chunk0)
    round0 = [*chunk0[:2], stand_in]  # the third prompt was skipped before generating and replaced
    metrics = pooled(p, round0, lambda i, j: j == 0, drawn=chunk0)  # 1 of G = 2 right
    assert sampler.state.observed == 1 and "curriculum/prompts_seen" in metrics
    round1 = p.rlvr_pool_prompts(step=0, round=1)[:3]
    assert pooled(p, round1, lambda i, j: True, round=1) == {}  # counted, nothing logged, no chunk consumed
    assert sampler.state.observed == 1
    expected_attempts = [0] * 12
    expected_successes = [0] * 12
    for i in round0:
        expected_attempts[i] += G
        expected_successes[i] += 1
    for i in round1:
        expected_attempts[i] += G
        expected_successes[i] += G
    assert sampler.state.attempts == expected_attempts
    assert sampler.state.successes == expected_successes
    assert sum(expected_attempts) == G * (len(round0) + len(round1))
    assert sampler.state.in_flight == []


def test_a_round_with_prompts_the_sampler_did_not_offer_is_a_contract_error():
    p = plugin(schedule="none")
    sampler = make_sampler(p)
    it = iter(sampler)
    chunk0 = [next(it) for _ in range(3 * G * 2)][: 3 * G : G]
    others = [i for i in range(12) if i not in chunk0]
    with pytest.raises(PluginContractError, match="the rollout pool starts prompts .* neither in the batch"):
        p.rlvr_pool_started(prompts=[*chunk0[:2], others[0]], drawn=chunk0, round=0)  # a replacement nobody offered
    with pytest.raises(PluginContractError, match="the rollout pool's batch holds prompts"):
        p.rlvr_pool_started(prompts=others[:3], drawn=others[:3], round=0)  # not the chunk this sampler drew
    pooled(p, chunk0, lambda i, j: True)
    with pytest.raises(PluginContractError, match="round 1 starts prompts .* did not offer"):
        p.rlvr_pool_started(prompts=others[:3], drawn=[], round=1)
    with pytest.raises(PluginContractError, match="which the rollout pool did not start"):
        feed(p, chunk0[:1], lambda i, j: True, round=1)  # scored twice: no longer in flight
    assert sampler.state.observed == 1


def first_chunks(seed: int) -> tuple[list[int], list[int]]:
    """Chunks 0 and 1 a fresh sampler draws at ``seed``."""
    sampler = make_sampler(plugin(schedule="none"), seed=seed)
    return sampler.chunk(0), sampler.chunk(1)


def test_groups_that_finish_rounds_and_steps_later_are_counted_once_and_survive_a_resume():
    """Partial rollouts: step 0 starts chunk 0 and finishes one group; step 1 continues the other two in the
    first places, so it starts only one prompt of chunk 1 (chunk 1 is consumed all the same); a checkpoint
    between the steps keeps the groups in flight, and the resumed sampler counts them as the uninterrupted one."""

    def step_one(p, chunk1):
        p.rlvr_pool_started(prompts=chunk1[:1], drawn=chunk1, round=0)  # two places taken by continued groups
        return feed(p, [chunk0[2], chunk1[0], chunk0[1]], lambda i, j: j == 0)  # finishing, in any order

    p = plugin(schedule="none", skip_zero_variance_steps=3)
    seed = next(s for s in range(50) if not set(first_chunks(s)[0]) & set(first_chunks(s)[1]))
    sampler = make_sampler(p, seed=seed)
    it = iter(sampler)
    drawn = [next(it) for _ in range(3 * G * 2 * 2)]  # what the dataloader yields: chunks 0 and 1
    chunk0, chunk1 = sampler.state.pending[0], sampler.state.pending[1]
    assert drawn[: 3 * G : G] == chunk0 and chunk1[0] not in chunk0
    p.rlvr_pool_started(prompts=chunk0, drawn=chunk0, round=0)
    assert sampler.state.observed == 1 and sorted(sampler.state.in_flight) == sorted(chunk0)
    metrics = feed(p, chunk0[:1], lambda i, j: True)  # one group finished at round 0: zero variance
    assert metrics["curriculum/zero_variance_share"] == 1.0 and metrics["curriculum/prompts_seen"] == 1
    assert sampler.state.blocked_until[chunk0[0]] == sampler.state.drawn + 3
    saved = p.rlvr_state_dict()
    assert sorted(saved["in_flight"]) == sorted(chunk0[1:]) and saved["metrics_due"] is None

    resumed = plugin(schedule="none", skip_zero_variance_steps=3)
    resumed.rlvr_load_state_dict(saved)
    make_sampler(resumed, seed=seed)
    for q in (p, resumed):
        logged = step_one(q, chunk1)
        assert logged["curriculum/prompts_seen"] == 4  # chunk 1's metrics, logged with its first counted groups
        assert logged["curriculum/zero_variance_share"] == 0.0
        assert q.sampler.state.in_flight == [] and q.sampler.state.observed == 2
    assert p.rlvr_state_dict() == resumed.rlvr_state_dict()
    attempts = p.sampler.state.attempts
    assert sum(attempts) == 4 * G and all(attempts[i] == G for i in [*chunk0, chunk1[0]])
    assert [p.sampler.state.successes[i] for i in chunk0] == [G, 1, 1]
    assert all(attempts[i] == 0 for i in chunk1[1:])  # drawn, never started: not counted


def test_a_chunk_started_again_after_a_resume_inside_it_is_not_counted_twice():
    p = plugin(schedule="none")
    sampler = make_sampler(p)
    it = iter(sampler)
    chunk0 = [next(it) for _ in range(3 * G * 2)][: 3 * G : G]
    pooled(p, chunk0, lambda i, j: True)
    before = list(sampler.state.attempts)
    p.rlvr_pool_started(prompts=chunk0, drawn=chunk0, round=0)  # the regenerated batch of a resume inside chunk 0
    assert feed(p, chunk0, lambda i, j: False) == {}
    assert sampler.repeated == 3 and sampler.state.attempts == before and sampler.state.observed == 1


def test_a_regenerated_batch_is_told_from_the_next_chunk_by_the_whole_batch_not_the_groups_started():
    """Partial rollouts after a resume inside a generation batch: the batch of chunk 0 comes again, but two
    continued groups take the first places, so only its first prompt starts; that prompt is also in the prefetched
    chunk 1. The whole batch (``drawn``) says it is chunk 0 again: nothing is consumed, and the group is not
    counted a second time (a check on the started prompts alone took it for chunk 1 and counted it twice)."""
    seed = next(s for s in range(200) if first_chunks(s)[0][0] in first_chunks(s)[1])
    p = plugin(schedule="none")
    sampler = make_sampler(p, seed=seed)
    it = iter(sampler)
    [next(it) for _ in range(3 * G * 2 * 2)]  # the dataloader yields chunks 0 and 1
    chunk0, chunk1 = sampler.state.pending[0], sampler.state.pending[1]
    assert chunk0[0] in chunk1
    p.rlvr_pool_started(prompts=chunk0, drawn=chunk0, round=0)
    feed(p, chunk0[:1], lambda i, j: True)  # one group finishes; the other two are in flight at the checkpoint
    resumed = plugin(schedule="none")
    resumed.rlvr_load_state_dict(p.rlvr_state_dict())
    make_sampler(resumed, seed=seed)
    resumed.rlvr_pool_started(prompts=chunk0[:1], drawn=chunk0, round=0)  # chunk 0's batch again, cut to one
    saved = resumed.rlvr_state_dict()  # and a checkpoint with all three in flight: the repeated one uncounted
    resumed = plugin(schedule="none")
    resumed.rlvr_load_state_dict(saved)
    make_sampler(resumed, seed=seed)
    state = resumed.sampler.state
    assert state.observed == 1 and state.uncounted == chunk0[:1]
    attempts = list(state.attempts)
    feed(resumed, [chunk0[1], chunk0[0], chunk0[2]], lambda i, j: j == 0)  # the regenerated group and the two
    assert resumed.sampler.repeated == 1 and state.attempts[chunk0[0]] == attempts[chunk0[0]] == G
    assert state.attempts[chunk0[1]] == state.attempts[chunk0[2]] == G and state.in_flight == []
    resumed.rlvr_pool_started(prompts=chunk1, drawn=chunk1, round=0)  # the next step: chunk 1, consumed
    assert state.observed == 2 and sorted(state.in_flight) == sorted(chunk1)
