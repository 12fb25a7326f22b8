"""``kimi_length_reward`` and ``is_correct`` against values computed by hand (Kimi k1.5, §2.3.3)."""

from __future__ import annotations

import pytest
import torch

from rlvr_kimi import is_correct, kimi_length_reward


def reward(lengths, correct, G):
    return kimi_length_reward(torch.tensor(lengths), torch.tensor(correct), G).tolist()


def test_hand_computed_group():
    # min 10, max 50, span 40: lambda = 0.5 - [0, 10, 20, 40] / 40 = [0.5, 0.25, 0, -0.5]
    assert reward([10, 20, 30, 50], [True, True, True, True], 4) == pytest.approx([0.5, 0.25, 0.0, -0.5])


def test_wrong_answers_get_min_zero_lambda():
    assert reward([10, 20, 30, 50], [True, False, True, False], 4) == pytest.approx([0.5, 0.0, 0.0, -0.5])
    assert reward([10, 20, 30, 50], [False] * 4, 4) == pytest.approx([0.0, 0.0, 0.0, -0.5])


def test_non_round_values():
    # span 3: lambda = 0.5 - [0, 3, 1] / 3
    assert reward([1, 4, 2], [True, True, False], 3) == pytest.approx([0.5, -0.5, 0.0])
    assert reward([1, 4, 2], [True, True, True], 3) == pytest.approx([0.5, -0.5, 0.5 - 1 / 3])


def test_all_equal_lengths_give_zero_whatever_the_correctness():
    assert reward([7, 7, 7, 7], [True, False, True, False], 4) == [0.0] * 4
    assert reward([7, 7, 7, 7], [True] * 4, 4) == [0.0] * 4


def test_min_and_max_are_per_group_not_per_batch():
    # as one batch-wide range (3 … 100) the first group would get about 0.5 and 0.44
    out = reward([3, 9, 40, 100], [True, True, True, True], 2)
    assert out == pytest.approx([0.5, -0.5, 0.5, -0.5])


def test_output_is_float32_of_shape_n():
    out = kimi_length_reward(torch.tensor([1, 2, 3, 4]), torch.tensor([True] * 4), 2)
    assert out.dtype == torch.float32 and out.shape == (4,)


def test_bad_shapes_are_errors():
    with pytest.raises(ValueError, match="num_generations=4"):
        reward([1, 2, 3], [True] * 3, 4)
    with pytest.raises(ValueError, match="must both be"):
        kimi_length_reward(torch.tensor([1, 2]), torch.tensor([True]), 1)


def random_batch(num_groups, G, seed):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 30, (num_groups * G,), generator=g)
    lengths[:G] = 5  # one all-equal group
    correct = torch.rand(num_groups * G, generator=g) < 0.5
    return lengths, correct


def test_splitting_at_a_group_boundary_changes_nothing():
    lengths, correct = random_batch(6, 4, seed=0)
    whole = kimi_length_reward(lengths, correct, 4)
    halves = torch.cat(
        [kimi_length_reward(lengths[:12], correct[:12], 4), kimi_length_reward(lengths[12:], correct[12:], 4)]
    )
    assert torch.equal(whole, halves)


def test_permuting_whole_groups_permutes_the_output():
    lengths, correct = random_batch(5, 3, seed=1)
    perm = torch.tensor([3, 0, 4, 2, 1])
    rows = (perm.unsqueeze(1) * 3 + torch.arange(3)).reshape(-1)
    assert torch.equal(
        kimi_length_reward(lengths[rows], correct[rows], 3), kimi_length_reward(lengths, correct, 3)[rows]
    )


def test_matches_an_independent_loop():
    lengths, correct = random_batch(8, 4, seed=2)
    expected = []
    for g in range(0, 32, 4):
        lo, hi = int(lengths[g : g + 4].min()), int(lengths[g : g + 4].max())
        for i in range(g, g + 4):
            lam = 0.0 if hi == lo else 0.5 - (int(lengths[i]) - lo) / (hi - lo)
            expected.append(lam if correct[i] else min(0.0, lam))
    assert kimi_length_reward(lengths, correct, 4).tolist() == pytest.approx(expected, abs=1e-7)


def test_is_correct_treats_nan_as_not_correct():
    values = torch.tensor([1.0, 0.999, float("nan"), 1.5, 0.0])
    assert is_correct(values, 1.0).tolist() == [True, False, False, True, False]
    assert is_correct(values, 0.0).tolist() == [True, True, False, True, True]
