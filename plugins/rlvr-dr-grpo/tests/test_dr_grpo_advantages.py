"""Dr. GRPO's advantage ``A_i = r_i - mean(r)`` per group, against values computed by hand."""

from __future__ import annotations

import pytest
import torch

from rlvr_dr_grpo import DrGRPO


def advantages(rewards, valid, num_generations):
    return DrGRPO().rlvr_compute_advantages(
        rewards=torch.tensor(rewards), num_generations=num_generations, valid=torch.tensor(valid)
    )


def test_group_mean_is_subtracted_without_std_division():
    # group 1: mean 0.25; group 2: mean 2.0
    adv = advantages([1.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 2.0], [True] * 8, 4)
    assert adv.tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25, -1.0, 0.0, 1.0, 0.0])


def test_unscored_completions_are_left_out_of_the_mean_and_get_zero():
    # valid rewards of group 1 are 1, 0, 2 -> mean 1; the NaN one gets 0
    adv = advantages([1.0, float("nan"), 0.0, 2.0], [True, False, True, True], 4)
    assert adv.tolist() == pytest.approx([0.0, 0.0, -1.0, 1.0])


def test_equal_rewards_give_zero_and_scale_is_kept():
    # GRPO would give +-0.707 for the last group; Dr. GRPO keeps the reward scale
    adv = advantages([0.5, 0.5, 0.0, 0.0, 10.0, 0.0], [True] * 6, 2)
    assert adv.tolist() == pytest.approx([0.0, 0.0, 0.0, 0.0, 5.0, -5.0])


def test_groups_of_size_one_get_zero():
    assert advantages([3.0, -1.0], [True, True], 1).tolist() == [0.0, 0.0]


def test_batch_not_made_of_whole_groups_is_an_error():
    with pytest.raises(ValueError, match="num_generations=4"):
        advantages([1.0, 2.0, 3.0], [True] * 3, 4)
