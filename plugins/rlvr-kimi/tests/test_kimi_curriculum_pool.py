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


def test_every_generated_group_is_counted_by_hand():
    """Round 0 (the chunk, one prompt replaced from the offer) and round 1 (offered prompts) both count."""
    p = plugin(schedule="none")
    sampler = make_sampler(p)
    it = iter(sampler)
    chunk0 = [next(it) for _ in range(3 * G * 2)][: 3 * G : G]
    order = p.rlvr_pool_prompts(step=0, round=0)
    stand_in = next(i for i in order if i not in chunk0)
    round0 = [*chunk0[:2], stand_in]  # the third prompt was skipped before generating and replaced
    metrics = feed(p, round0, lambda i, j: j == 0)  # 1 of G = 2 right
    assert sampler.state.observed == 1 and "curriculum/prompts_seen" in metrics
    round1 = p.rlvr_pool_prompts(step=0, round=1)[:3]
    assert feed(p, round1, lambda i, j: True, round=1) == {}  # counted, nothing logged, no chunk consumed
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


def test_a_round_with_prompts_the_sampler_did_not_offer_is_a_contract_error():
    p = plugin(schedule="none")
    sampler = make_sampler(p)
    it = iter(sampler)
    chunk0 = [next(it) for _ in range(3 * G * 2)][: 3 * G : G]
    others = [i for i in range(12) if i not in chunk0]
    with pytest.raises(PluginContractError, match="the scored batch holds prompts"):
        feed(p, [*chunk0[:2], others[0]], lambda i, j: True)  # a replacement nobody offered
    feed(p, chunk0, lambda i, j: True)
    with pytest.raises(PluginContractError, match="pool round 1 holds prompts .* did not offer"):
        feed(p, others[:3], lambda i, j: True, round=1)
    assert sampler.state.observed == 1
