"""The pure functions of ``rlvr_kimi.curriculum`` against values computed by hand."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_kimi.curriculum import (
    admitted,
    admitted_difficulty,
    admitted_fraction,
    difficulties_from_column,
    group_outcomes,
    sampling_weights,
    success_histogram,
    success_rates,
)


@pytest.mark.parametrize("step, expected", [(0, 0.25), (10, 0.4375), (20, 0.625), (40, 1.0), (100, 1.0), (-3, 0.25)])
def test_linear_schedule(step, expected):
    # q(t) = 0.25 + 0.75 * min(1, t / 40)
    assert admitted_fraction(step, schedule="linear", start_quantile=0.25, full_at_step=40) == pytest.approx(expected)


@pytest.mark.parametrize(
    "step, expected", [(0, 0.2), (9, 0.2), (10, 0.4), (19, 0.4), (20, 0.6), (35, 0.8), (40, 1.0), (400, 1.0)]
)
def test_step_schedule_jumps_every_full_at_step_over_num_stages(step, expected):
    # q(t) = 0.2 + 0.8 * floor(4 * min(1, t / 40)) / 4
    got = admitted_fraction(step, schedule="step", start_quantile=0.2, full_at_step=40, num_stages=4)
    assert got == pytest.approx(expected)


def test_none_schedule_and_zero_full_at_step_admit_everything():
    assert admitted_fraction(0, schedule="none", start_quantile=0.1, full_at_step=40) == 1.0
    assert admitted_fraction(0, schedule="linear", start_quantile=0.1, full_at_step=0) == 1.0
    with pytest.raises(ValueError, match=r"Unsupported schedule: 'cosine'. Supported: \['linear', 'step', 'none'\]"):
        admitted_fraction(0, schedule="cosine")


DIFF = torch.tensor([4.0, 1.0, 3.0, 2.0, 2.0, 5.0, 1.0, 3.0, 4.0, 5.0])  # sorted: 1 1 2 2 3 3 4 4 5 5


@pytest.mark.parametrize(
    "step, d_max, ids",
    [
        (0, 2.0, [1, 3, 4, 6]),  # q = 0.3 -> k = 3 -> d_(3) = 2; both 2s admitted (ties)
        (10, 4.0, [0, 1, 2, 3, 4, 6, 7, 8]),  # q = 0.3 + 0.7 * 10/20 = 0.65 -> k = ceil(6.5) = 7 -> d_(7) = 4
        (20, 5.0, list(range(10))),  # q = 1 -> k = 10 -> d_(10) = 5
    ],
)
def test_admitted_difficulty_is_the_k_th_smallest_and_ties_are_admitted(step, d_max, ids):
    schedule = {"schedule": "linear", "start_quantile": 0.3, "full_at_step": 20}
    assert admitted_difficulty(DIFF, step, **schedule) == d_max
    assert admitted(DIFF, step, **schedule).tolist() == ids


def test_min_count_keeps_a_batch_worth_of_prompts_admitted():
    # q = 0.1 -> k = 1 -> d_max = 1 (2 prompts); min_count = 5 -> k = 5 -> d_(5) = 3
    schedule = {"schedule": "linear", "start_quantile": 0.1, "full_at_step": 100}
    assert admitted(DIFF, 0, **schedule).tolist() == [1, 6]
    assert admitted_difficulty(DIFF, 0, min_count=5, **schedule) == 3.0
    assert admitted(DIFF, 0, min_count=5, **schedule).tolist() == [1, 2, 3, 4, 6, 7]
    assert admitted(DIFF, 0, min_count=50, **schedule).tolist() == list(range(10))


def test_success_rates_with_beta_prior():
    successes, attempts = torch.tensor([0, 3, 8, 0]), torch.tensor([0, 4, 8, 8])
    # (s + m p0) / (a + m) with p0 = 0.25, m = 4
    assert success_rates(successes, attempts, prior_success=0.25, prior_strength=4).tolist() == pytest.approx(
        [0.25, 4 / 8, 9 / 12, 1 / 12]
    )
    # m = 0: plain frequencies, the prior only for the unseen prompt
    assert success_rates(successes, attempts, prior_success=0.25, prior_strength=0).tolist() == pytest.approx(
        [0.25, 0.75, 1.0, 0.0]
    )


def test_sampling_weights_are_one_minus_success_with_a_floor():
    successes, attempts = torch.tensor([0, 3, 8, 0]), torch.tensor([0, 4, 8, 8])
    got = sampling_weights(successes, attempts, floor=0.1, prior_success=0.25, prior_strength=0)
    assert got.tolist() == pytest.approx([0.75, 0.25, 0.1, 1.0])
    got = sampling_weights(successes, attempts, floor=0.1, prior_success=0.5, prior_strength=2)
    # s = [0.5, 4/6, 9/10, 1/10]
    assert got.tolist() == pytest.approx([0.5, 1 / 3, 0.1, 0.9])


def test_group_outcomes_count_only_scored_completions():
    correct = torch.tensor([1, 1, 0, 0, 1, 0, 1, 1, 0], dtype=torch.bool)
    counted = torch.tensor([1, 0, 1, 1, 1, 1, 0, 0, 0], dtype=torch.bool)
    successes, attempts = group_outcomes(correct, counted, 3)
    assert successes.tolist() == [1, 1, 0] and attempts.tolist() == [2, 3, 0]
    with pytest.raises(ValueError, match="num_generations=2"):
        group_outcomes(correct, counted, 2)


def test_success_histogram_bins():
    hist = success_histogram(torch.tensor([0.0, 0.19, 0.2, 0.45, 0.99, 1.0, 0.61, 0.8]))
    assert hist == {"0.0-0.2": 2 / 8, "0.2-0.4": 1 / 8, "0.4-0.6": 1 / 8, "0.6-0.8": 1 / 8, "0.8-1.0": 3 / 8}
    assert set(success_histogram(torch.tensor([])).values()) == {0.0}


def test_difficulties_from_numbers_labels_and_pass_rates():
    assert difficulties_from_column([1, 2.5, 0]) == [1.0, 2.5, 0.0]
    labels = {"easy": 0.0, "medium": 1.0, "hard": 2.0}
    assert difficulties_from_column(["hard", "easy", "medium"], labels=labels) == [2.0, 0.0, 1.0]
    assert difficulties_from_column([1.0, 0.25, 0.0], from_pass_rate=True) == [0.0, 0.75, 1.0]


@pytest.mark.parametrize(
    "values, kwargs, message",
    [
        (["easy"], {}, "column 'level', row 0: label 'easy' is not a number; set difficulty_labels"),
        ([1, "extreme"], {"labels": {"easy": 0}}, "row 1: unknown label 'extreme'; difficulty_labels has ['easy']"),
        ([None], {}, "row 0: difficulty must be a finite number or a label, got None"),
        ([math.nan], {}, "got nan"),
        ([True], {}, "got True"),
        ([0.5, 1.5], {"from_pass_rate": True}, "row 1: a pass rate must lie in [0, 1], got 1.5"),
        (["0.5"], {"from_pass_rate": True}, "difficulty must be a finite number, got '0.5'"),
    ],
)
def test_difficulty_errors_name_column_row_and_value(values, kwargs, message):
    with pytest.raises(ValueError) as info:
        difficulties_from_column(values, column="level", **kwargs)
    assert message in str(info.value)
