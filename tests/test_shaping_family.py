"""Length shaping and repetition (issue 22): ``cosine-length`` and ``repetition`` against hand computations."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from rlvr_plugins.advantages import batch_advantages, cosine_length_reward
from rlvr_plugins.errors import ConfigError, PluginError
from rlvr_plugins.manager import build_plugin_set, temporary_plugin
from rlvr_plugins.testing import reward_plugin_class

T, F = True, False


def validate(plugin_set):
    """``rlvr_validate_run`` of a run with one reward, ``acc``, and ``max_completion_length=64``."""
    plugin_set.call(
        "rlvr_validate_run",
        reward_names=["acc"],
        grpo_args=SimpleNamespace(max_completion_length=64),
        engine_timeout_s=None,
    )


def test_cosine_length_by_hand():
    # L_max = 100; half = (1 + cos(pi p)) / 2: 1 at 0, (1 + sqrt(.5)) / 2 at 25, 0.5 at 50, 0 at 100 and beyond
    lengths = torch.tensor([0, 25, 50, 100, 150, 0, 50, 100, 150])
    correct = torch.tensor([T, T, T, T, T, F, F, F, F])
    h25 = (1 + math.sqrt(0.5)) / 2
    expected = [1.0, 0.5 + 0.5 * h25, 0.75, 0.5, 0.5, -1.0, -0.75, -0.5, -0.5]
    assert cosine_length_reward(lengths, correct, 100).tolist() == pytest.approx(expected)
    # open-r1's defaults for wrong answers (0.0 ... -0.5): long wrong answers lose more
    got = cosine_length_reward(torch.tensor([0, 100]), torch.tensor([F, F]), 100, wrong_range=(0.0, -0.5))
    assert got.tolist() == pytest.approx([0.0, -0.5])


def length_penalty(plugin_set, lengths, per_func, names=("acc",)):
    ((_, penalty),) = plugin_set.call(
        "rlvr_length_penalty",
        completion_lengths=lengths,
        num_generations=len(lengths),
        rewards_per_func=per_func,
        reward_names=list(names),
        step=0,
    )
    return penalty


def test_cosine_length_plugin_reads_correctness_from_the_named_reward():
    plugin_set = build_plugin_set({"cosine-length": {"correctness_reward": "acc", "max_length": 100, "weight": 2.0}})
    per_func = torch.tensor([[1.0], [0.0], [float("nan")], [0.4]])  # NaN and below threshold: wrong
    got = length_penalty(plugin_set, torch.tensor([50, 50, 0, 100]), per_func)
    assert got.tolist() == pytest.approx([2 * 0.75, 2 * -0.75, 2 * -1.0, 2 * -0.5])
    plugin_set = build_plugin_set({"cosine-length": {"correctness_reward": "acc", "max_length": 100, "threshold": 0.4}})
    assert length_penalty(plugin_set, torch.tensor([100]), torch.tensor([[0.4]])).tolist() == [0.5]


def wrong(*, prompt, completion, example):
    return 0.0


def test_cosine_length_is_group_centred_shaping_never_std_scaled():
    # an all-wrong group that differs only in length: GRPO's outcome advantage is 0, the shaping stays small
    with temporary_plugin(reward_plugin_class("acc", wrong)):
        plugin_set = build_plugin_set({"acc": {}, "cosine-length": {"correctness_reward": "acc", "max_length": 100}})
        plugin_set.reward_functions()
        result = batch_advantages(
            plugin_set,
            rewards_per_func=torch.tensor([[0.0], [0.0]]),
            weights=torch.ones(1),
            failed=torch.zeros(2, 1, dtype=torch.bool),
            lengths=torch.tensor([50, 100]),
            num_generations=2,
            step=0,
            names=["acc"],
        )
    # penalties -0.75 and -0.5: centred, +-0.125 (GRPO on the sum would give about +-0.71)
    assert result.advantages.tolist() == pytest.approx([-0.125, 0.125])


def test_cosine_length_refuses_a_missing_reward_and_unknown_max_length():
    plugin_set = build_plugin_set({"cosine-length": {"correctness_reward": "nope"}})
    with pytest.raises(ConfigError, match=r"plugin 'cosine-length': option correctness_reward='nope' is not a reward"):
        validate(plugin_set)
    with pytest.raises(PluginError, match=r"plugin 'cosine-length': option 'correctness_reward' is required"):
        build_plugin_set({"cosine-length": {}})
    # L_max defaults to the run's max_completion_length
    plugin_set = build_plugin_set({"cosine-length": {"correctness_reward": "acc"}})
    validate(plugin_set)
    assert length_penalty(plugin_set, torch.tensor([32]), torch.tensor([[1.0]])).tolist() == [0.75]


# -- repetition ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, n, share",
    [
        ("", 3, 0.0),  # no words
        ("one two", 3, 0.0),  # fewer words than n
        ("one two three four", 3, 0.0),  # 2 trigrams, both unique
        ("a b c a b c", 3, 0.25),  # abc bca cab abc: 3 unique of 4
        ("go go go go go", 1, 0.8),  # 5 unigrams, 1 unique
        ("Go go GO go", 2, 2 / 3),  # lower-cased: 3 bigrams, all "go go"
    ],
)
def test_repeated_ngram_share_by_hand(text, n, share):
    from rlvr_plugins.builtin.repetition import repeated_ngram_share

    assert repeated_ngram_share(text, n) == pytest.approx(share)


def test_repetition_reward_plugin_scores_max_penalty_times_the_share():
    plugin_set = build_plugin_set({"repetition": {"ngram_size": 1, "max_penalty": -0.5, "weight": 2.0}})
    [(owner, reward)] = plugin_set.reward_functions()
    assert (owner, reward.name, reward.weight) == ("repetition", "repetition", 2.0)
    assert reward.fn(prompt="", completion="go go go go go", example={}) == pytest.approx(-0.5 * 0.8)
    assert reward.fn(prompt="", completion="no repeats at all", example={}) == 0.0


@pytest.mark.parametrize(
    "options, message",
    [
        ({"ngram_size": 0}, "option 'ngram_size' must be >= 1, got 0"),
        ({"max_penalty": 0.5}, "option 'max_penalty' must be a finite number <= 0, got 0.5"),
    ],
)
def test_repetition_refuses_bad_options(options, message):
    with pytest.raises(PluginError, match=f"plugin 'repetition': {message}"):
        build_plugin_set({"repetition": options})


def test_cosine_length_refuses_max_length_beyond_the_runs():
    plugin_set = build_plugin_set({"cosine-length": {"correctness_reward": "acc", "max_length": 100}})
    with pytest.raises(ConfigError, match=r"'cosine-length': option max_length=100 exceeds .*max_completion_length=64"):
        validate(plugin_set)


# -- prime-length (prime-rl's pass-rate-scaled group length penalty) ----------------------------------------------

NAN = float("nan")


def test_group_length_penalty_by_hand():
    from rlvr_plugins.advantages import group_length_penalty

    lengths = torch.tensor([10, 20, 40, 40, 5, 10, 10, 20, 8, 16, 4, 16, 0, 0, 0, 0, 3, 6, 1, 2])
    scores = torch.tensor([1, 0, 1, 1, 0, 0, 0, 0, 1, NAN, 0, NAN, 1, 1, 1, 1, NAN, NAN, NAN, NAN])
    expected = [
        *[-0.75 * x for x in (0.25, 0.5, 1.0, 1.0)],  # pass rate 3/4, longest 40
        *[0.0] * 4,  # never passes: no length pressure
        *[-0.5 * x for x in (0.5, 1.0, 0.25, 1.0)],  # NaN not scored: pass rate 1/2 of the two scored
        *[0.0] * 4,  # empty completions: |o| / max(1, 0) = 0
        *[0.0] * 4,  # no scored completion: 0
    ]
    got = group_length_penalty(lengths, scores, 4)
    assert got.tolist() == pytest.approx(expected)
    assert not torch.isnan(got).any()


def prime_rl_advantages(rewards, lengths, weight, group_size):
    """prime-rl's rule written out per group in plain Python: ``r - w p |o| / max|o|``, minus its group mean."""
    out = []
    for g in range(0, len(rewards), group_size):
        r, n = rewards[g : g + group_size], lengths[g : g + group_size]
        p, longest = sum(r) / len(r), max(max(n), 1)
        shaped = [ri - weight * p * ni / longest for ri, ni in zip(r, n)]
        out += [s - sum(shaped) / len(shaped) for s in shaped]
    return out


def prime_batch(plugin_set, per_func, lengths, group_size, failed=None):
    return batch_advantages(
        plugin_set,
        rewards_per_func=per_func,
        weights=torch.ones(per_func.shape[1]),
        failed=torch.zeros(per_func.shape, dtype=torch.bool) if failed is None else failed,
        lengths=lengths,
        num_generations=group_size,
        step=0,
        names=["acc"],
    )


def right_if_short(*, prompt, completion, example):
    return 1.0


def test_prime_length_on_a_mean_baseline_is_prime_rls_advantage():
    # prime-rl subtracts the penalty from the reward before its mean baseline; here it is shaping after
    # the estimator. With dr-grpo's estimator (r - mean) the two are the same numbers.
    pytest.importorskip("rlvr_dr_grpo")
    rewards = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    lengths = [12, 30, 7, 19, 25, 25, 3, 9, 10, 20, 30, 40]
    with temporary_plugin(reward_plugin_class("acc", right_if_short)):
        plugin_set = build_plugin_set(
            {"acc": {}, "dr-grpo": {}, "prime-length": {"correctness_reward": "acc", "weight": 0.4}}
        )
        plugin_set.reward_functions()
        result = prime_batch(plugin_set, torch.tensor(rewards).unsqueeze(1), torch.tensor(lengths), 4)
    assert result.advantages.tolist() == pytest.approx(prime_rl_advantages(rewards, lengths, 0.4, 4), abs=1e-6)


def test_prime_length_degenerate_groups_and_masked_items():
    with temporary_plugin(reward_plugin_class("acc", right_if_short)):
        plugin_set = build_plugin_set({"acc": {}, "prime-length": {"correctness_reward": "acc", "weight": 1.0}})
        plugin_set.reward_functions()
        # a group of one: its penalty is -p (|o| = max|o|), centred to 0
        one = prime_batch(plugin_set, torch.tensor([[1.0], [0.0], [1.0]]), torch.tensor([10, 20, 5]), 1)
        assert one.advantages.tolist() == [0.0, 0.0, 0.0]
        # all-equal lengths and all-correct: equal penalties, equal rewards, advantage exactly 0
        equal = prime_batch(plugin_set, torch.ones(4, 1), torch.tensor([9, 9, 9, 9]), 4)
        assert equal.advantages.tolist() == [0.0] * 4
        # all correct, lengths differ: the shaping alone moves them, at its own scale (never std-scaled):
        # penalties -[1/4, 1/2, 3/4, 1], mean -5/8
        spread = prime_batch(plugin_set, torch.ones(4, 1), torch.tensor([10, 20, 30, 40]), 4)
        assert spread.advantages.tolist() == pytest.approx([0.375, 0.125, -0.125, -0.375])
        # a masked item (its reward failed): advantage 0, left out of the pass rate and of the centring
        failed = torch.tensor([[False], [False], [True], [False]])
        per_func = torch.tensor([[1.0], [0.0], [NAN], [1.0]])
        masked = prime_batch(plugin_set, per_func, torch.tensor([10, 20, 40, 30]), 4, failed)
    # pass rate 2/3 over the scored items; penalties -2/3 * [1/4, 1/2, -, 3/4] (longest 40, the masked one's);
    # GRPO z-scores [1, 0, -, 1]: mean 2/3, std sqrt(1/3)
    penalties = [-2 / 3 * x for x in (0.25, 0.5, 0.75)]
    centred = [p - sum(penalties) / 3 for p in penalties]
    z = [(r - 2 / 3) / (math.sqrt(1 / 3) + 1e-4) for r in (1.0, 0.0, 1.0)]
    expected = [z[0] + centred[0], z[1] + centred[1], 0.0, z[2] + centred[2]]
    assert masked.advantages.tolist() == pytest.approx(expected, abs=1e-5)


def test_prime_length_refuses_a_missing_reward_and_a_negative_weight():
    plugin_set = build_plugin_set({"prime-length": {"correctness_reward": "nope"}})
    with pytest.raises(ConfigError, match=r"plugin 'prime-length': option correctness_reward='nope' is not a reward"):
        validate(plugin_set)
    with pytest.raises(PluginError, match=r"plugin 'prime-length': option 'weight' must be a finite number >= 0"):
        build_plugin_set({"prime-length": {"correctness_reward": "acc", "weight": -1.0}})
