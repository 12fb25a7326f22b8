"""The training alarm of reward gaming (issue 21): train reward rising while held-out accuracy falls."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from rlvr_plugins.train.integrity import IntegrityWatch, integrity_alarm, slope


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


def test_the_watch_averages_the_train_rewards_up_to_each_evaluation_step():
    watch = IntegrityWatch(window=2)
    assert watch.train_reward(1, 0.1) is None
    watch.evaluation(2, 0.6)  # at step 2's on_step_end: step 2's reward is not logged yet
    assert watch.rewards == [] and watch.pending == (2, 0.6)
    assert watch.train_reward(2, 0.3) is None  # completes the evaluation: mean(0.1, 0.3)
    assert watch.rewards == [pytest.approx(0.2)] and watch.heldout == [0.6] and watch.pending is None
    for step, value in ((3, 0.4), (4, math.nan)):
        assert watch.train_reward(step, value) is None
    watch.evaluation(4, 0.5)
    message = watch.train_reward(5, 0.6)  # a log past the step completes it too: mean(0.4, 0.6), NaN left out
    assert watch.rewards == [pytest.approx(0.2), pytest.approx(0.5)] and watch.heldout == [0.6, 0.5]
    assert message == (
        "integrity alarm at step 5: over the last 2 evaluations the train reward rose (0.200 -> 0.500) while "
        "held-out accuracy fell (0.600 -> 0.500); the reward may be gamed: read the latest completions and run "
        "`rlvr audit rewards CONFIG`"
    )


def test_the_callbacks_log_the_alarm_after_the_evaluation_step_is_logged(capsys):
    """The wiring of ``rlvr train``: ``PeriodicEval`` at ``on_step_end`` hands the accuracy to the watch, TRL's
    log of the same step (after ``on_step_end``) completes it, ``IntegrityAlarm`` writes the alarm row."""
    from rlvr_plugins.train.runlog import IntegrityAlarm, PeriodicEval

    watch, written = IntegrityWatch(window=3), []
    accuracy = iter([0.5, 0.4, 0.3])
    periodic = PeriodicEval(
        1,
        lambda step, model: {"accuracy": next(accuracy), "rewards": {}, "no_score": 0.0},
        lambda step, row: (written.append((step, row)), watch.evaluation(step, row["eval/accuracy"])),
    )
    alarm = IntegrityAlarm(watch, lambda step, row: written.append((step, row)))
    control = SimpleNamespace(should_training_stop=False)
    for step, reward in enumerate([0.1, 0.2, 0.3], start=1):
        state = SimpleNamespace(global_step=step, max_steps=10, is_world_process_zero=True)
        periodic.on_step_end(None, state, control)
        alarm.on_log(None, state, control, logs={"reward": reward, "loss": 0.0})
    assert [(step, "integrity/alarm" in row) for step, row in written] == [
        (1, False),
        (2, False),
        (3, False),
        (3, True),
    ]
    assert watch.rewards == [0.1, 0.2, 0.3]
    assert capsys.readouterr().out.startswith("integrity alarm at step 3: over the last 3 evaluations")


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


@pytest.mark.slow
def test_rlvr_train_logs_the_alarm_at_a_periodic_evaluation(tmp_path, capsys, monkeypatch):
    """The wiring in ``rlvr train`` (run.py): with the detection forced on, every periodic evaluation after the
    first ``window`` carries ``integrity/alarm`` in ``metrics.jsonl`` and prints the line; the train rewards
    reach the watch from TRL's logs."""
    import json
    from pathlib import Path

    from rlvr_plugins import cli
    from rlvr_plugins.train import integrity

    seen = []

    def forced(train_rewards, heldout, window):
        seen.append((list(train_rewards), list(heldout), window))
        return len(heldout) >= window

    monkeypatch.setattr(integrity, "integrity_alarm", forced)
    smoke = Path(__file__).parent / "configs" / "smoke.yaml"
    out = tmp_path / "run"
    overrides = [f"output_dir={out}", "sft=", "eval.every_steps=1", "eval.integrity_window=2", "trainer.max_steps=3"]
    assert cli.main(["train", str(smoke), *[a for o in overrides for a in ("--set", o)]]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = {r["step"] for r in rows if "eval/accuracy" in r}
    alarms = [r for r in rows if "integrity/alarm" in r]
    # steps 0 and 3: the evaluations before and after GRPO; 1 and 2: the periodic ones, which the watch sees
    assert evals == {0, 1, 2, 3}
    assert [(r["step"], r["integrity/alarm"]) for r in alarms] == [(2, 1.0)]
    assert capsys.readouterr().out.count("integrity alarm at step 2: over the last 2 evaluations") == 1
    assert [window for *_, window in seen] == [2, 2]
    rewards, heldout, _ = seen[-1]
    assert len(rewards) == len(heldout) == 2 and all(math.isfinite(v) for v in rewards)
