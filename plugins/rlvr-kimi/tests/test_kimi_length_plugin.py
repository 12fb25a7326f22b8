"""The ``kimi-length`` plugin: options, warm-up, correctness from a named reward, the missing-reward error."""

from __future__ import annotations

import pytest
import torch

from rlvr_kimi.plugins import KimiLengthPenalty
from rlvr_plugins.errors import PluginContractError, PluginOptionError
from rlvr_plugins.manager import build_plugin_set

NAMES = ["r1-format", "r1-accuracy"]
LENGTHS = torch.tensor([10, 20, 30, 50, 7, 7, 7, 7])
# column 0 is the format reward (ignored), column 1 the accuracy
PER_FUNC = torch.tensor(
    [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, float("nan")], [1.0, 1.0]]
)


def penalty(step=0, names=NAMES, per_func=PER_FUNC, **options):
    plugin = KimiLengthPenalty(KimiLengthPenalty.parse_options(options))
    return plugin.rlvr_length_penalty(
        completion_lengths=LENGTHS, num_generations=4, rewards_per_func=per_func, reward_names=names, step=step
    )


def test_default_options_read_r1_accuracy():
    # correct = [T, F, T, F | T, F, nan -> F, T]; lambda = [0.5, 0.25, 0, -0.5 | 0, 0, 0, 0]
    assert penalty().tolist() == pytest.approx([0.5, 0.0, 0.0, -0.5, 0.0, 0.0, 0.0, 0.0])


def test_weight_scales_the_reward():
    assert penalty(weight=0.2).tolist() == pytest.approx([0.1, 0.0, 0.0, -0.1, 0.0, 0.0, 0.0, 0.0])


def test_threshold_and_correctness_reward_choose_what_is_correct():
    # format as the correctness reward: correct = [T, F, T, T | ...]
    assert penalty(correctness_reward="r1-format").tolist()[:4] == pytest.approx([0.5, 0.0, 0.0, -0.5])
    # threshold 0: every scored accuracy counts as correct, the NaN one does not
    per_func = PER_FUNC.clone()
    per_func[:, 1] = torch.tensor([0.0, 0.0, float("nan"), 0.0, 0, 0, 0, 0])
    assert penalty(per_func=per_func, threshold=0.0).tolist()[:4] == pytest.approx([0.5, 0.25, 0.0, -0.5])


@pytest.mark.parametrize(
    "warmup, step, active", [(0, 0, True), (3, 0, False), (3, 2, False), (3, 3, True), (3, 10, True)]
)
def test_warmup_returns_none_before_then_constant_weight(warmup, step, active):
    out = penalty(step=step, warmup_steps=warmup, weight=0.5)
    if active:
        assert out.tolist() == pytest.approx([0.25, 0.0, 0.0, -0.25, 0.0, 0.0, 0.0, 0.0])
    else:
        assert out is None


def test_missing_correctness_reward_names_plugin_option_and_available_rewards():
    with pytest.raises(PluginContractError) as info:
        penalty(names=["r1-format", "digits"], correctness_reward="accuracy")
    message = str(info.value)
    assert message.startswith("plugin 'kimi-length': option correctness_reward='accuracy' is not a reward")
    assert "Available rewards: ['r1-format', 'digits']" in message


def test_missing_correctness_reward_stops_the_run_at_start_up():
    from rlvr_plugins.errors import ConfigError
    from rlvr_plugins.train.run import prepare

    config = {
        "plugins": {"r1-format": {}, "kimi-length": {"correctness_reward": "accuracy"}},
        "trainer": {"report_to": "none"},
        "output_dir": "/tmp/kimi-start-up",
    }
    with pytest.raises(ConfigError, match="kimi-length.*correctness_reward='accuracy'.*\\['r1-format'\\]"):
        prepare(config)


def test_missing_correctness_reward_is_not_checked_during_warmup():
    assert penalty(names=["r1-format", "digits"], warmup_steps=5, step=0) is None


@pytest.mark.parametrize(
    "options, problem",
    [
        ({"warmup_steps": -1}, "option 'warmup_steps' must be >= 0, got -1"),
        ({"warmup_steps": 1.5}, "option 'warmup_steps' must be int, got 1.5"),
        ({"weight": "big"}, "option 'weight' must be float, got 'big'"),
        ({"weight": float("inf")}, "option 'weight' must be float (finite), got inf"),
        ({"threshold": float("nan")}, "option 'threshold' must be float (finite), got nan"),
        ({"correctness_reward": ""}, "option 'correctness_reward' must name a reward"),
        ({"correctness_reward": 3}, "option 'correctness_reward' must be str, got 3"),
        ({"warmup": 10}, "unknown option 'warmup' (did you mean 'warmup_steps'?)"),
    ],
)
def test_option_validation_names_plugin_and_option(options, problem):
    with pytest.raises(PluginOptionError) as info:
        build_plugin_set({"kimi-length": options})
    assert str(info.value).startswith("plugin 'kimi-length': ")
    assert problem in str(info.value)


def test_installed_entry_point_and_defaults():
    ps = build_plugin_set({"kimi-length": {}})
    (described,) = [p for p in ps.describe() if p["name"] == "kimi-length"]
    assert described["distribution"] == "rlvr-kimi"
    assert described["hooks"] == ["rlvr_claims", "rlvr_length_penalty", "rlvr_validate_run"]
    assert described["options"] == {
        "weight": 1.0,
        "warmup_steps": 0,
        "correctness_reward": "r1-accuracy",
        "threshold": 1.0,
    }


def test_a_weight_schedule_on_kimi_length_scales_it_and_warmup_steps_is_its_step_case():
    from rlvr_plugins.advantages import batch_advantages

    def totals(options, step):
        plugin_set = build_plugin_set({"r1-accuracy": {}, "r1-format": {}, "kimi-length": options})
        plugin_set.reward_functions()
        return batch_advantages(
            plugin_set,
            rewards_per_func=PER_FUNC,
            weights=torch.ones(2),
            failed=torch.zeros(8, 2, dtype=torch.bool),
            lengths=LENGTHS,
            num_generations=4,
            step=step,
            names=NAMES,
        ).total

    outcome = torch.nansum(PER_FUNC, dim=1)
    lam = torch.tensor([0.5, 0.0, 0.0, -0.5, 0.0, 0.0, 0.0, 0.0])
    linear = {"weight": {"schedule": "linear", "from": 0.0, "to": 0.4, "steps": 4}}
    # weight 0.4 * t / 4: 0.1 at step 1, 0.4 from step 4
    assert totals(linear, 1).tolist() == pytest.approx((outcome + 0.1 * lam).tolist())
    assert totals(linear, 9).tolist() == pytest.approx((outcome + 0.4 * lam).tolist())
    # warmup_steps: 3 with weight 0.5 gives what the schedule step [[0, 0], [3, 0.5]] gives
    schedule = {"weight": {"schedule": "step", "points": [[0, 0.0], [3, 0.5]]}}
    for step in (0, 2, 3, 7):
        assert totals({"warmup_steps": 3, "weight": 0.5}, step).tolist() == pytest.approx(
            totals(schedule, step).tolist()
        )
