"""The peers' estimators (issue 22): reinforce++, reinforce++-baseline, opo, gpg, pass-at-k, gdpo.

Every formula against a computation by hand (or, for pass@k, by enumerating every subset of
k completions), including a group of one, all-equal rewards and ``valid == False`` rows.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rlvr_plugins.advantages import (
    batch_std_advantages,
    gpg_advantages,
    normalize_then_sum_advantages,
    opo_advantages,
    overlong_penalty,
    pass_at_k_advantages,
    reinforce_pp_advantages,
    reinforce_pp_baseline_advantages,
)
from rlvr_plugins.errors import ConfigError, PluginError, PluginOptionError
from rlvr_plugins.manager import build_plugin_set, discover
from rlvr_plugins.testing import grpo_args
from rlvr_plugins.trainer import with_trl_estimator

T, F = True, False
NEW = ("reinforce++", "reinforce++-baseline", "opo", "gpg", "pass-at-k", "gdpo")


def t(values):
    return torch.tensor(values, dtype=torch.float32)


def b(values):
    return torch.tensor(values, dtype=torch.bool)


def advantages_of(name, rewards, valid, num_generations, lengths=None, **options):
    """The estimator called through its plugin hook, as the trainer calls it."""
    plugin_set = build_plugin_set({name: options})
    return plugin_set.one(
        "rlvr_compute_advantages",
        rewards=rewards,
        num_generations=num_generations,
        valid=valid,
        rewards_per_func=rewards[:, None],
        reward_names=["r"],
        reward_weights=torch.ones(1),
        completion_lengths=torch.full(rewards.shape, 10) if lengths is None else lengths,
    )


def test_every_new_estimator_is_a_registered_plugin():
    entries = discover()
    assert set(NEW) <= set(entries)


# -- reinforce++ ----------------------------------------------------------------------------------------------


def test_reinforce_pp_is_the_reward_z_scored_over_the_batch():
    # mean 2/3; deviations 1/3 (x4) and -2/3 (x2); sample variance (4/9 + 8/9) / 5 = 4/15
    got = reinforce_pp_advantages(t([1, 0, 0, 1, 1, 1]), b([T] * 6), eps=0.0)
    s = math.sqrt(4 / 15)
    assert got.tolist() == pytest.approx([1 / 3 / s, -2 / 3 / s, -2 / 3 / s, 1 / 3 / s, 1 / 3 / s, 1 / 3 / s])
    # the groups play no part: an all-equal group still gets a non-zero raw advantage (the framework zeroes it)
    assert advantages_of("reinforce++", t([1, 1, 0, 0]), b([T] * 4), 2).tolist() == pytest.approx(
        [0.5 / (math.sqrt(1 / 3) + 1e-4)] * 2 + [-0.5 / (math.sqrt(1 / 3) + 1e-4)] * 2, rel=1e-6
    )


def test_reinforce_pp_masked_rows_and_a_single_valid_row():
    # row 3 has no score: it takes no part (reward 5 would change mean and std) and gets 0
    got = reinforce_pp_advantages(t([1, 0, 5]), b([T, T, F]), eps=0.0)
    assert got.tolist() == pytest.approx([math.sqrt(0.5), -math.sqrt(0.5), 0.0])
    assert reinforce_pp_advantages(t([1, 0]), b([T, F])).tolist() == [0.0, 0.0]
    assert reinforce_pp_advantages(t([1.0]), b([T])).tolist() == [0.0]  # a group (and batch) of one
    assert reinforce_pp_advantages(t([0.3, 0.3, 0.3]), b([T, T, T])).tolist() == [0.0, 0.0, 0.0]


def test_reinforce_pp_baseline_is_not_batch_std():
    r, valid = t([1, 0, 1, 1]), b([T] * 4)
    # centred: [0.5, -0.5, 0, 0], mean 0, sample std sqrt(0.5 / 3)
    s = math.sqrt(0.5 / 3)
    got = reinforce_pp_baseline_advantages(r, valid, 2, eps=0.0)
    assert got.tolist() == pytest.approx([0.5 / s, -0.5 / s, 0.0, 0.0])
    # batch-std divides the same centred rewards by the std of the raw rewards, 0.5: a different scale
    assert batch_std_advantages(r, valid, 2, eps=0.0).tolist() == pytest.approx([1.0, -1.0, 0.0, 0.0])
    # equal when every group has the same mean (then the raw and the centred rewards have the same spread)
    same = t([1, 0, 0, 1])
    assert reinforce_pp_baseline_advantages(same, valid, 2).tolist() == pytest.approx(
        batch_std_advantages(same, valid, 2).tolist()
    )


def test_reinforce_pp_baseline_masked_and_group_of_one():
    # group 1: valid [1, 0] -> centred [0.5, -0.5]; group 2: one valid row -> centred 0; row 4 left out
    # centred values [0.5, -0.5, 0], mean 0, sample std sqrt(0.5 / 2) = 0.5
    got = reinforce_pp_baseline_advantages(t([1, 0, 1, 7]), b([T, T, T, F]), 2, eps=0.0)
    assert got.tolist() == pytest.approx([1.0, -1.0, 0.0, 0.0])
    assert reinforce_pp_baseline_advantages(t([1, 0, 1]), b([T] * 3), 1).tolist() == [0.0, 0.0, 0.0]  # G = 1


# -- opo -------------------------------------------------------------------------------------------------------


def test_opo_baseline_is_the_length_weighted_group_mean():
    r = t([1, 0, 0, 1, 1, 0])
    lengths = torch.tensor([10, 30, 60, 10, 20, 30])
    # group 1: b = 10 / 100 = 0.1; group 2 (row 5 not valid): b = 10 / (10 + 30) = 0.25
    got = opo_advantages(r, b([T, T, T, T, F, T]), lengths, 3)
    assert got.tolist() == pytest.approx([0.9, -0.1, -0.1, 0.75, 0.0, -0.25])
    assert advantages_of("opo", r, b([T, T, T, T, F, T]), 3, lengths).tolist() == pytest.approx(got.tolist())


def test_opo_with_equal_lengths_is_the_group_mean_and_degenerate_groups_get_zero():
    r = t([1, 0, 0, 0])
    assert opo_advantages(r, b([T] * 4), torch.full((4,), 7), 4).tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25])
    assert opo_advantages(t([0.4, 0.4]), b([T, T]), torch.tensor([5, 50]), 2).tolist() == [0.0, 0.0]
    assert opo_advantages(t([1.0, 0.0]), b([T, T]), torch.tensor([5, 50]), 1).tolist() == [0.0, 0.0]  # G = 1
    # an empty completion (length 0) still weighs 1; an all-invalid group gets 0 without NaN
    assert opo_advantages(t([1, 0]), b([T, T]), torch.tensor([0, 3]), 2).tolist() == pytest.approx([0.75, -0.25])
    assert opo_advantages(t([1, 0]), b([F, F]), torch.tensor([2, 3]), 2).tolist() == [0.0, 0.0]


# -- gpg -------------------------------------------------------------------------------------------------------


def test_gpg_rescales_by_the_share_of_completions_that_carry_a_gradient():
    # B = 8 completions, M = 4 in the all-equal groups 2 and 3: alpha = 8 / 4 = 2
    got = gpg_advantages(t([1, 0, 1, 1, 0, 0, 1, 0]), b([T] * 8), 2)
    assert got.tolist() == pytest.approx([1, -1, 0, 0, 0, 0, 1, -1])
    assert advantages_of("gpg", t([1, 0, 1, 1, 0, 0, 1, 0]), b([T] * 8), 2).tolist() == pytest.approx(got.tolist())


def test_gpg_masked_rows_group_of_one_and_all_equal():
    # group 2 has one valid row (zero variance): B = 3 valid, M = 1, alpha = 1.5
    assert gpg_advantages(t([1, 0, 1, 5]), b([T, T, T, F]), 2).tolist() == pytest.approx([0.75, -0.75, 0.0, 0.0])
    assert gpg_advantages(t([1, 1, 0, 0]), b([T] * 4), 2).tolist() == [0.0] * 4  # every group all-equal
    assert gpg_advantages(t([1, 0]), b([T, T]), 1).tolist() == [0.0, 0.0]  # G = 1: every group of one


# -- pass@k ----------------------------------------------------------------------------------------------------


def pass_at_k_by_enumeration(rewards, valid, k, threshold=1.0):
    """The paper's construction, brute force: every k-subset of a group's valid completions scores
    max(pass); its advantage is (score - mean) / std over all subsets (population std); a
    completion's advantage is the mean over the subsets that contain it."""
    idx = [i for i, v in enumerate(valid) if v]
    out = [0.0] * len(rewards)
    if len(idx) < k:
        return out
    subsets = list(itertools.combinations(idx, k))
    score = {s: float(any(rewards[i] >= threshold for i in s)) for s in subsets}
    mean = sum(score.values()) / len(subsets)
    std = math.sqrt(sum((x - mean) ** 2 for x in score.values()) / len(subsets))
    if std == 0:
        return out
    for i in idx:
        mine = [(score[s] - mean) / std for s in subsets if i in s]
        out[i] = sum(mine) / len(mine)
    return out


def test_pass_at_k_by_hand():
    # N = 4, one pass, k = 2: R = 1 - C(3,2)/C(4,2) = 1/2, sigma = 1/2; A_pos = 1;
    # A_neg = (1 - 1/2 - C(2,1)/C(3,1)) / (1/2) = -1/3
    got = pass_at_k_advantages(t([1, 0, 0, 0]), b([T] * 4), 4, k=2)
    assert got.tolist() == pytest.approx([1.0, -1 / 3, -1 / 3, -1 / 3])


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_pass_at_k_equals_the_enumeration_over_subsets(k):
    gen = torch.Generator().manual_seed(k)
    g = 6
    rewards = (torch.rand(8 * g, generator=gen) < 0.4).float()
    valid = torch.rand(8 * g, generator=gen) < 0.85
    got = pass_at_k_advantages(rewards, valid, g, k=k)
    expected = []
    for start in range(0, 8 * g, g):
        expected += pass_at_k_by_enumeration(rewards[start : start + g].tolist(), valid[start : start + g].tolist(), k)
    assert got.tolist() == pytest.approx(expected, abs=1e-6)


def test_pass_at_1_is_grpo_with_the_population_std():
    r = t([1, 0, 0, 1, 1, 0, 1, 1])
    got = pass_at_k_advantages(r, b([T] * 8), 8, k=1)
    p = 5 / 8
    s = math.sqrt(p * (1 - p))
    assert got.tolist() == pytest.approx([(x - p) / s for x in r.tolist()])


def test_pass_at_k_degenerate_groups_get_zero():
    valid = b([T] * 4)
    assert pass_at_k_advantages(t([1, 1, 1, 1]), valid, 4, k=2).tolist() == [0.0] * 4  # all pass
    assert pass_at_k_advantages(t([0, 0, 0, 0]), valid, 4, k=2).tolist() == [0.0] * 4  # all fail
    # two valid rows, k = 3: no subset of 3, so 0 (and no NaN); the invalid rows get 0
    assert pass_at_k_advantages(t([1, 0, 1, 0]), b([T, T, F, F]), 4, k=3).tolist() == [0.0] * 4
    assert pass_at_k_advantages(t([1.0]), b([T]), 1, k=1).tolist() == [0.0]  # a group of one
    # with k = 2 and 3 passes of 4, any 2-subset holds a pass: R = 1, sigma = 0
    assert pass_at_k_advantages(t([1, 1, 1, 0]), valid, 4, k=2).tolist() == [0.0] * 4


def test_pass_at_k_threshold_decides_what_passes():
    got = pass_at_k_advantages(t([0.6, 0.2, 0.2, 0.2]), b([T] * 4), 4, k=2, threshold=0.5)
    assert got.tolist() == pytest.approx([1.0, -1 / 3, -1 / 3, -1 / 3])
    via_hook = advantages_of("pass-at-k", t([0.6, 0.2, 0.2, 0.2]), b([T] * 4), 4, k=2, threshold=0.5)
    assert via_hook.tolist() == pytest.approx(got.tolist())


def test_pass_at_k_refuses_k_above_num_generations_and_k_below_one(tmp_path):
    plugin_set = build_plugin_set({"pass-at-k": {"k": 9}})
    with pytest.raises(ConfigError, match=r"'pass-at-k': option k=9 exceeds num_generations=8"):
        plugin_set.call(
            "rlvr_validate_run", reward_names=["r"], grpo_args=SimpleNamespace(num_generations=8), engine_timeout_s=None
        )
    with pytest.raises(PluginError, match=r"option 'k' must be >= 1, got 0"):
        build_plugin_set({"pass-at-k": {"k": 0}})


# -- gdpo ------------------------------------------------------------------------------------------------------


def test_gdpo_is_normalize_then_sum_and_trl_normalize_then_sum_accepts_it(tmp_path):
    per_func = t([[1, 0], [3, 0], [2, 1], [2, 3]])
    weights = t([1, 2])
    valid = b([T, T, T, F])
    plugin_set = build_plugin_set({"gdpo": {}})
    got = plugin_set.one(
        "rlvr_compute_advantages",
        rewards=per_func.sum(1),
        num_generations=2,
        valid=valid,
        rewards_per_func=per_func,
        reward_names=["a", "b"],
        reward_weights=weights,
        completion_lengths=torch.ones(4, dtype=torch.long),
    )
    assert got.tolist() == normalize_then_sum_advantages(per_func, weights, valid, 2).tolist()
    args = grpo_args(tmp_path, multi_objective_aggregation="normalize_then_sum")
    assert with_trl_estimator(plugin_set, args).winner("rlvr_compute_advantages") == "gdpo"
    # another estimator is still refused with TRL's normalize_then_sum
    with pytest.raises(
        PluginError, match=r"ask for the 'normalize-then-sum' estimator, but the estimator plugin 'gpg'"
    ):
        with_trl_estimator(build_plugin_set({"gpg": {}}), args)


# -- dapo-overlong ---------------------------------------------------------------------------------------------


def test_dapo_overlong_by_hand():
    # L_max = 100, L_cache = 20: 0 up to 80 tokens, (80 - |y|) / 20 in (80, 100], -1 beyond
    lengths = torch.tensor([0, 80, 81, 90, 100, 101, 500])
    got = overlong_penalty(lengths, 100, 20)
    assert got.tolist() == pytest.approx([0, 0, -1 / 20, -0.5, -1, -1, -1])
    plugin_set = build_plugin_set({"dapo-overlong": {"max_length": 100, "cache": 20, "weight": 0.5}})
    ((_, penalty),) = plugin_set.call(
        "rlvr_length_penalty",
        completion_lengths=lengths,
        num_generations=7,
        rewards_per_func=torch.zeros(7, 1),
        reward_names=["r"],
        step=0,
    )
    assert penalty.tolist() == pytest.approx([0, 0, -1 / 40, -0.25, -0.5, -0.5, -0.5])


def test_dapo_overlong_defaults_to_the_runs_max_completion_length_and_a_fifth_of_it_as_cache():
    plugin_set = build_plugin_set({"dapo-overlong": {}})
    plugin_set.call(
        "rlvr_validate_run",
        reward_names=["r"],
        grpo_args=SimpleNamespace(max_completion_length=50),
        engine_timeout_s=None,
    )
    # L_max = 50, L_cache = 10: 0 up to 40 tokens
    ((_, penalty),) = plugin_set.call(
        "rlvr_length_penalty",
        completion_lengths=torch.tensor([40, 45, 50]),
        num_generations=3,
        rewards_per_func=torch.zeros(3, 1),
        reward_names=["r"],
        step=0,
    )
    assert penalty.tolist() == pytest.approx([0.0, -0.5, -1.0])


def test_dapo_overlong_refuses_bad_limits_naming_the_option():
    with pytest.raises(PluginError, match=r"option 'cache' \(30\) must not exceed 'max_length' \(20\)"):
        build_plugin_set({"dapo-overlong": {"max_length": 20, "cache": 30}})
    plugin_set = build_plugin_set({"dapo-overlong": {"max_length": 600}})
    with pytest.raises(
        ConfigError, match=r"'dapo-overlong': option max_length=600 exceeds .*max_completion_length=512"
    ):
        plugin_set.call(
            "rlvr_validate_run",
            reward_names=["r"],
            grpo_args=SimpleNamespace(max_completion_length=512),
            engine_timeout_s=None,
        )


@pytest.mark.parametrize(
    "plugin, message",
    [
        ("pass-at-k={k: 99}", "plugin 'pass-at-k': option k=99 exceeds num_generations=8"),
        ("dapo-overlong={max_length: 100000}", "plugin 'dapo-overlong': option max_length=100000 exceeds"),
    ],
)
def test_check_refuses_limits_the_run_cannot_meet(tmp_path, capsys, plugin, message):
    from rlvr_plugins.cli import main

    code = main(
        [
            "train",
            str(Path(__file__).resolve().parents[1] / "configs" / "demo.yaml"),
            "--check",
            "--set",
            f"output_dir={tmp_path}",
            "--set",
            f"plugins.{plugin}",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "name", ["grpo", "batch-std", "normalize-then-sum", "gdpo", "reinforce++", "reinforce++-baseline"]
)
def test_every_estimator_with_an_eps_refuses_a_negative_or_infinite_one(name):
    prefix = rf"plugin '{re.escape(name)}': option 'eps' must be "
    with pytest.raises(PluginOptionError, match=prefix + r"a finite number >= 0, got -1"):
        build_plugin_set({name: {"eps": -1.0}})
    with pytest.raises(PluginOptionError, match=prefix):
        build_plugin_set({name: {"eps": float("inf")}})
    assert build_plugin_set({name: {"eps": 0.0}}).get(name).options.eps == 0.0
