"""The training alarm of reward gaming (issue 21): train reward rising while held-out accuracy falls."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from rlvr_plugins.train.integrity import IntegrityWatch, integrity_alarm, integrity_row, slope


def test_slope_by_hand():
    # x = 0, 1, 2, 3 (mean 1.5); y = 1, 3, 2, 6 (mean 3): Σ(x-1.5)(y-3) = (-1.5)(-2) + (-0.5)(0) + (0.5)(-1)
    # + (1.5)(3) = 3 + 0 - 0.5 + 4.5 = 7; Σ(x-1.5)² = 5; slope 7/5
    assert slope([1.0, 3.0, 2.0, 6.0]) == pytest.approx(1.4)
    assert slope([2.0, 2.0, 2.0]) == 0.0


@pytest.mark.parametrize(
    ("rewards", "heldout", "window", "alarm"),
    [
        ([0.1, 0.2, 0.3], [0.5, 0.4, 0.3], 3, True),  # the signature of a gamed reward
        ([0.1, 0.2, 0.3], [0.3, 0.4, 0.5], 3, False),  # both rise: learning
        ([0.3, 0.2, 0.1], [0.5, 0.4, 0.3], 3, False),  # both fall
        ([0.1, 0.2, 0.3], [0.5, 0.5, 0.5], 3, False),  # held-out flat
        ([0.1, 0.2], [0.5, 0.4], 3, False),  # fewer evaluations than the window
        ([0.9, 0.1, 0.2, 0.3], [0.1, 0.5, 0.4, 0.3], 3, True),  # only the last 3 count
        ([0.1, 0.2, 0.3], [0.5, 0.4, 0.3], 0, False),  # off
        ([0.1, math.nan, 0.3], [0.5, 0.4, 0.3], 3, False),  # a window without a train reward
        # held-out 0.5, 0.6, 0.3, 0.4: not monotone, but slope (-1.5·0.05 - 0.5·0.15 - 0.5·0.15 - 1.5·0.05) / 5
        # = -0.06 < 0 and last < first: alarm
        ([0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.3, 0.4], 4, True),
        # held-out 0.5, 0.2, 0.6, 0.4: last < first but slope (-0.1125 + 0.1125 + 0.0875 - 0.0375) / 5 = +0.01
        ([0.1, 0.2, 0.3, 0.4], [0.5, 0.2, 0.6, 0.4], 4, False),
        # train 0.1, 0.5, 0.6, 0.09: slope +0.007 but last below first: no alarm
        ([0.1, 0.5, 0.6, 0.09], [0.5, 0.4, 0.3, 0.2], 4, False),
    ],
)
def test_integrity_alarm_on_hand_made_sequences(rewards, heldout, window, alarm):
    assert integrity_alarm(rewards, heldout, window) is alarm


def test_the_watch_averages_the_train_rewards_between_evaluations(capsys):
    watch = IntegrityWatch(window=2)
    for value in (0.1, 0.3, math.nan):
        watch.train_reward(value)
    assert integrity_row(watch, {"eval/accuracy": 0.6}) == {}
    for value in (0.4, 0.6):
        watch.train_reward(value)
    assert watch.rewards == [pytest.approx(0.2)] and watch.pending == [0.4, 0.6]
    assert integrity_row(watch, {"eval/accuracy": 0.5}) == {"integrity/alarm": 1.0}
    assert watch.rewards == [pytest.approx(0.2), pytest.approx(0.5)]
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [
        "integrity alarm: over the last 2 evaluations the train reward rose (0.200 -> 0.500) while held-out "
        "accuracy fell (0.600 -> 0.500); the reward may be gamed: read the latest completions and run "
        "`rlvr audit rewards CONFIG`"
    ]


def test_the_callbacks_log_the_alarm_in_the_evaluation_row():
    """The wiring of ``rlvr train``: TRL's logged ``reward`` through ``TrainRewardTap``, each periodic
    evaluation's row through ``integrity_row`` into ``metrics.jsonl``."""
    from rlvr_plugins.train.runlog import PeriodicEval, TrainRewardTap

    watch, written = IntegrityWatch(window=3), []
    accuracy = iter([0.5, 0.4, 0.3])
    tap = TrainRewardTap(watch.train_reward)
    periodic = PeriodicEval(
        1,
        lambda step, model: {"accuracy": next(accuracy), "rewards": {}, "no_score": 0.0},
        lambda step, row: written.append((step, {**row, **integrity_row(watch, row)})),
    )
    control = SimpleNamespace(should_training_stop=False)
    for step, reward in enumerate([0.1, 0.2, 0.3], start=1):
        state = SimpleNamespace(global_step=step, max_steps=10, is_world_process_zero=True)
        tap.on_log(None, state, control, logs={"reward": reward, "loss": 0.0})
        periodic.on_step_end(None, state, control)
    assert [row.get("integrity/alarm") for _, row in written] == [None, None, 1.0]
    assert [step for step, _ in written] == [1, 2, 3]


def test_a_window_of_one_is_refused_at_load(tmp_path):
    from rlvr_plugins.errors import ConfigError
    from rlvr_plugins.train.validate import run_config

    with pytest.raises(ConfigError, match="integrity_window"):
        run_config(
            {
                "model": {"tiny": {}},
                "data": {"train": {"source": "synthetic", "task": "arithmetic", "size": 4}},
                "plugins": {"r1-accuracy": {}},
                "eval": {"integrity_window": 1},
            }
        )
