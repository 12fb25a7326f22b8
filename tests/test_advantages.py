"""Advantage estimators against hand-computed values and independent formulas."""

import math
import statistics

import pytest
import torch

from rlvr_plugins import advantages as A


def t(xs):
    return torch.tensor(xs, dtype=torch.float32)


def all_valid(n):
    return torch.ones(n, dtype=torch.bool)


def test_grpo_matches_hand_computed_zscore():
    # group 1: [1, 0, 0, 1] mean 0.5, sample std sqrt(1/3) = 0.57735
    # group 2: [1, 1, 1, 0] mean 0.75, sample std 0.5
    r = t([1, 0, 0, 1, 1, 1, 1, 0])
    adv = A.grpo_advantages(r, all_valid(8), 4)
    s1 = math.sqrt(1 / 3)
    expected = [0.5 / (s1 + 1e-4), -0.5 / (s1 + 1e-4)] * 1
    expected = [
        expected[0],
        expected[1],
        expected[1],
        expected[0],
        0.25 / 0.5001,
        0.25 / 0.5001,
        0.25 / 0.5001,
        -0.75 / 0.5001,
    ]
    assert adv.tolist() == pytest.approx(expected, rel=1e-5)


def test_grpo_equals_trl_scale_rewards_group_formula():
    torch.manual_seed(0)
    r = torch.rand(6 * 8)
    g = r.view(6, 8)
    mean = g.mean(dim=1, keepdim=True)
    std = g.std(dim=1, keepdim=True)  # torch's unbiased std, an independent implementation
    expected = ((g - mean) / (std + 1e-4)).reshape(-1)
    assert torch.allclose(A.grpo_advantages(r, all_valid(48), 8), expected, atol=1e-6)


def test_all_valid_shortcut_gives_the_masked_path_values_bit_for_bit():
    # a ninth group with one unscored completion sends the whole batch down the masked path;
    # groups are independent, so the first eight must come out identical to the shortcut's
    torch.manual_seed(1)
    r = torch.rand(8 * 8)
    r[8:16] = 0.35  # one zero-variance group
    extra = torch.rand(8)
    masked_valid = torch.cat([all_valid(64), torch.tensor([False] + [True] * 7)])
    masked = A.grpo_advantages(torch.cat([r, extra]), masked_valid, 8)
    assert torch.equal(A.grpo_advantages(r, all_valid(64), 8), masked[:64])
    zero_masked = A.zero_variance_groups(torch.cat([r, extra]), masked_valid, 8)
    assert torch.equal(A.zero_variance_groups(r, all_valid(64), 8), zero_masked[:8])
    assert A.zero_variance_groups(r, all_valid(64), 8).tolist() == [False, True] + [False] * 6


def test_mean_baseline_is_reward_minus_group_mean():
    r = t([3, 1, 2, 0, 0, 4])
    assert A.mean_baseline_advantages(r, all_valid(6), 3).tolist() == pytest.approx([1, -1, 0, -4 / 3, -4 / 3, 8 / 3])


def test_rloo_is_reward_minus_mean_of_others():
    r = t([1, 0, 0, 1, 0.5, 0.25])
    adv = A.rloo_advantages(r, all_valid(6), 3)
    expected = []
    for group in ([1, 0, 0], [1, 0.5, 0.25]):
        for i, ri in enumerate(group):
            others = [x for j, x in enumerate(group) if j != i]
            expected.append(ri - statistics.mean(others))
    assert adv.tolist() == pytest.approx(expected)


def test_rloo_equals_scaled_mean_baseline():
    # A_rloo = G/(G-1) * (r_i - mean): an identity, checked on random data
    torch.manual_seed(1)
    r = torch.rand(40)
    G = 5
    assert torch.allclose(
        A.rloo_advantages(r, all_valid(40), G), A.mean_baseline_advantages(r, all_valid(40), G) * G / (G - 1), atol=1e-6
    )


def test_batch_std_uses_one_scale_for_the_batch():
    r = t([1, 0, 1, 1])
    std = statistics.stdev([1, 0, 1, 1])
    expected = [0.5 / (std + 1e-4), -0.5 / (std + 1e-4), 0, 0]
    assert A.batch_std_advantages(r, all_valid(4), 2).tolist() == pytest.approx(expected, rel=1e-5)


def test_invalid_completions_are_left_out_of_the_baseline_and_get_zero():
    r = t([1, 0, 1000, 0])
    valid = torch.tensor([True, True, False, True])
    adv = A.mean_baseline_advantages(r, valid, 4)
    assert adv.tolist() == pytest.approx([2 / 3, -1 / 3, 0, -1 / 3])
    rloo = A.rloo_advantages(r, valid, 4)
    assert rloo.tolist() == pytest.approx([1 - 0, 0 - 0.5, 0, 0 - 0.5])


def test_zero_variance_groups_exact_even_with_float_residue():
    r = torch.full((16,), 0.35, dtype=torch.float32)
    assert A.nan_std(r).item() > 0  # float32 leaves a residue in the computed std
    adv, zero_var = A.finalize_advantages(A.grpo_advantages(r, all_valid(16), 16), r, all_valid(16), 16)
    assert zero_var.tolist() == [True]
    assert torch.equal(adv, torch.zeros(16))


def test_finalize_counts_zero_variance_groups_and_keeps_others():
    r = t([0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 1, 0])
    adv, zero_var = A.finalize_advantages(A.grpo_advantages(r, all_valid(12), 4), r, all_valid(12), 4)
    assert zero_var.tolist() == [True, True, False]
    assert adv[:8].abs().sum().item() == 0
    assert adv[8:].tolist() == pytest.approx(
        [0.5 / (1 / math.sqrt(3) + 1e-4)] * 1
        + [-0.5 / (1 / math.sqrt(3) + 1e-4)]
        + [0.5 / (1 / math.sqrt(3) + 1e-4), -0.5 / (1 / math.sqrt(3) + 1e-4)],
        rel=1e-5,
    )


def test_group_with_all_invalid_gets_zero_without_nan():
    r = t([float("nan")] * 4)
    valid = torch.zeros(4, dtype=torch.bool)
    adv, zero_var = A.finalize_advantages(A.grpo_advantages(r, valid, 4), r, valid, 4)
    assert adv.tolist() == [0, 0, 0, 0]
    assert zero_var.tolist() == [True]


def test_grouped_rejects_partial_groups():
    with pytest.raises(ValueError, match="num_generations=4"):
        A.grouped(torch.zeros(6), 4)


def test_a_group_with_one_valid_completion_gets_advantage_0_from_every_estimator():
    from rlvr_plugins.advantages import batch_std_advantages, grpo_advantages, mean_baseline_advantages, rloo_advantages

    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    valid = torch.tensor([True, False, False, False, True, True, True, True])
    for estimator in (grpo_advantages, rloo_advantages, mean_baseline_advantages, batch_std_advantages):
        adv = estimator(rewards, valid, 4)
        assert torch.isfinite(adv).all(), estimator.__name__
        assert adv[:4].tolist() == [0.0, 0.0, 0.0, 0.0], estimator.__name__
