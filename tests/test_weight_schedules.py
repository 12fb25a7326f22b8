"""Reward-weight schedules (issue 22): a reward's or length penalty's ``weight`` over the global step.

Each schedule against values by hand; one application path (``batch_advantages``) for rewards and
penalties; ``--check`` refuses a malformed schedule or one on a plugin without a weight, naming it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from rlvr_plugins import Plugin, RewardFunction, hookimpl
from rlvr_plugins.advantages import batch_advantages
from rlvr_plugins.errors import PluginError
from rlvr_plugins.manager import build_plugin_set, temporary_plugin
from rlvr_plugins.schedules import cosine_value, linear_value, parse_schedule, step_value

DEMO = Path(__file__).resolve().parents[1] / "configs" / "demo.yaml"


def test_linear_warmup_by_hand():
    # from 0.2 to 1.0 over 8 steps: 0.2 + 0.8 * t / 8, then 1.0
    assert [linear_value(t, 0.2, 1.0, 8) for t in (0, 2, 4, 8, 100)] == pytest.approx([0.2, 0.4, 0.6, 1.0, 1.0])
    assert linear_value(0, 0.2, 1.0, 0) == 1.0  # steps = 0: the end value at once


def test_cosine_by_hand():
    # from 1 to 0 over 4 steps: (1 + cos(pi t / 4)) / 2
    expected = [1.0, (1 + math.sqrt(0.5)) / 2, 0.5, (1 - math.sqrt(0.5)) / 2, 0.0, 0.0]
    assert [cosine_value(t, 1.0, 0.0, 4) for t in (0, 1, 2, 3, 4, 9)] == pytest.approx(expected)
    assert cosine_value(3, 2.0, 2.0, 4) == 2.0  # from == to: constant


def test_step_by_hand():
    points = [(0, 0.0), (10, 0.5), (20, 1.0)]
    assert [step_value(t, points) for t in (0, 9, 10, 19, 20, 1000)] == [0.0, 0.0, 0.5, 0.5, 1.0, 1.0]
    assert step_value(5, [(0, 3.0)]) == 3.0  # one point: constant


def test_parse_every_kind():
    assert parse_schedule({"schedule": "constant", "value": 0.5}).at(123) == 0.5
    assert parse_schedule({"schedule": "linear", "from": 0, "to": 1, "steps": 10}).at(5) == 0.5
    assert parse_schedule({"schedule": "step", "points": [[0, 0], [3, 2]]}).at(3) == 2.0
    assert parse_schedule({"schedule": "cosine", "from": 1, "to": 0, "steps": 2}).at(1) == pytest.approx(0.5)


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"schedule": "exp"}, "'schedule' must be one of ['constant', 'linear', 'step', 'cosine'], got 'exp'"),
        ({"schedule": "linear", "from": 0, "to": 1}, "missing ['steps']"),
        ({"schedule": "linear", "from": 0, "to": 1, "steps": 5, "warm": 1}, "unknown key(s) ['warm']"),
        ({"schedule": "linear", "from": 0, "to": 1, "steps": -1}, "'steps' must be an integer >= 0, got -1"),
        ({"schedule": "cosine", "from": "a", "to": 1, "steps": 5}, "'from' must be a finite number, got 'a'"),
        ({"schedule": "step", "points": [[5, 1.0]]}, "steps rising from 0, got steps [5]"),
        ({"schedule": "step", "points": [[0, 1.0], [0, 2.0]]}, "steps rising from 0, got steps [0, 0]"),
        ({"schedule": "step", "points": [[0, 1.0], [4]]}, "got point [4]"),
    ],
)
def test_malformed_schedules_say_what_is_valid(raw, message):
    with pytest.raises(ValueError) as info:
        parse_schedule(raw)
    assert message in str(info.value)


def test_schedule_is_a_function_of_the_step_so_a_resumed_run_gets_the_same_value():
    config = {"r1-format": {"weight": {"schedule": "cosine", "from": 1.0, "to": 0.0, "steps": 4}}}
    before = build_plugin_set(config)
    seen = [before.weight_factor("r1-format", s) for s in range(6)]
    resumed = build_plugin_set(config)  # a fresh process at step 3, nothing restored but the step
    assert resumed.weight_factor("r1-format", 3) == seen[3] == pytest.approx((1 - math.sqrt(0.5)) / 2)
    assert [resumed.weight_factor("r1-format", s) for s in range(6)] == seen


def rewards_batch():
    # two rewards (accuracy, format), 2 groups of 2
    return torch.tensor([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.0, 0.0]])


def run(plugin_set, step, names=("r1-accuracy", "r1-format")):
    plugin_set.reward_functions()
    return batch_advantages(
        plugin_set,
        rewards_per_func=rewards_batch(),
        weights=torch.tensor([1.0, 1.0]),
        failed=torch.zeros(4, 2, dtype=torch.bool),
        lengths=torch.tensor([10, 90, 10, 100]),
        num_generations=2,
        step=step,
        names=list(names),
    )


def test_a_reward_schedule_scales_that_reward_in_the_outcome():
    plugin_set = build_plugin_set(
        {
            "r1-accuracy": {},
            "r1-format": {"weight": {"schedule": "linear", "from": 0.0, "to": 0.5, "steps": 10}},
            "dr-grpo": {},
        }
    )
    # the format weight is 0.5 * t / 10: 0 at step 0, 0.25 at step 5, 0.5 from step 10
    for step, w in ((0, 0.0), (5, 0.25), (10, 0.5), (50, 0.5)):
        result = run(plugin_set, step)
        assert result.total.tolist() == pytest.approx([1 + w, w, 1.0, 0.0])
        # dr-grpo: r - group mean
        assert result.advantages.tolist() == pytest.approx([0.5, -0.5, 0.5, -0.5])
    assert plugin_set.scheduled_weights(5) == {"r1-format": pytest.approx(0.25)}


def test_a_penalty_schedule_scales_the_penalty_on_the_same_path():
    plugin_set = build_plugin_set(
        {
            "r1-accuracy": {},
            "r1-format": {},
            "dapo-overlong": {
                "max_length": 100,
                "cache": 20,
                "weight": {"schedule": "step", "points": [[0, 0.0], [4, 2.0]]},
            },
        }
    )
    # overlong penalties of lengths 10, 90, 10, 100 (L_max 100, cache 20): 0, -0.5, 0, -1
    assert run(plugin_set, 3).total.tolist() == pytest.approx([2.0, 1.0, 1.0, 0.0])
    assert run(plugin_set, 4).total.tolist() == pytest.approx([2.0, 0.0, 1.0, -2.0])
    assert plugin_set.scheduled_weights(4) == {"dapo-overlong": 2.0}
    assert plugin_set.scheduled_weights(3) == {"dapo-overlong": 0.0}
    assert build_plugin_set({"r1-format": {}}).scheduled_weights(3) == {}  # nothing scheduled: nothing logged


def test_a_schedule_on_a_plugin_without_a_weight_or_malformed_is_refused_naming_plugin_and_key():
    with pytest.raises(PluginError, match=r"plugin 'grpo': option 'weight' is a schedule, but this plugin"):
        build_plugin_set({"grpo": {"weight": {"schedule": "constant", "value": 1}}})
    with pytest.raises(PluginError, match=r"plugin 'r1-format': option 'weight' \(a schedule\): a linear schedule"):
        build_plugin_set({"r1-format": {"weight": {"schedule": "linear", "to": 1}}})


@pytest.mark.parametrize(
    "setting, message",
    [
        (
            "plugins.r1-format={weight: {schedule: cosine, from: 1}}",
            "plugin 'r1-format': option 'weight' (a schedule): a cosine schedule takes ['from', 'to', 'steps']",
        ),
        (
            "plugins.grpo={weight: {schedule: constant, value: 1}}",
            "plugin 'grpo': option 'weight' is a schedule, but this plugin contributes no weighted reward",
        ),
    ],
)
def test_check_refuses_a_bad_schedule_in_one_line(tmp_path, capsys, setting, message):
    from rlvr_plugins.cli import main

    code = main(["train", str(DEMO), "--check", "--set", f"output_dir={tmp_path}", "--set", setting])
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def has_digit(*, prompt, completion, example):
    return 1.0 if any(c.isdigit() for c in completion) else 0.0


def one(*, prompt, completion, example):
    return 1.0


class ConstantReward(Plugin):
    """Scores every completion 1.0, with a ``weight`` option (so its weight may be a schedule)."""

    name = "schedule-test-one"

    @dataclass
    class Options:
        weight: float = 1.0

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(RewardFunction(self.name, one, self.options.weight, isolated=False))


@pytest.mark.slow
def test_training_logs_the_scheduled_weight_each_step_and_trl_reward_uses_it(tiny_trainer, reward_plugin):
    reward_plugin("schedule-test-digit", has_digit, isolated=False)
    plugins = {
        "schedule-test-digit": {},
        "schedule-test-one": {"weight": {"schedule": "step", "points": [[0, 0.0], [1, 2.0]]}},
    }
    with temporary_plugin(ConstantReward):
        trainer = tiny_trainer(plugins)
    trainer.train()
    logged = [h for h in trainer.state.log_history if "weights/schedule-test-one" in h]
    assert [h["weights/schedule-test-one"] for h in logged] == [0.0, 2.0]
    for h, w in zip(logged, (0.0, 2.0), strict=True):
        # the constant reward adds exactly its scheduled weight to the mean total, in ours and in TRL's metric
        digit = h["rewards/schedule-test-digit/mean"]
        assert h["rlvr/reward_total"] == pytest.approx(digit + w, abs=1e-6)
        assert h["reward"] == pytest.approx(digit + w, abs=1e-6)


def test_check_names_the_file_and_line_of_a_bad_schedule(tmp_path, capsys):
    from rlvr_plugins.cli import main

    text = DEMO.read_text(encoding="utf-8").replace(
        "  r1-format: {weight: 0.1}", "  r1-format:\n    weight: {schedule: linear, from: 0.0}"
    )
    assert "schedule: linear" in text
    lines = text.splitlines()
    line = next(i for i, t in enumerate(lines, 1) if "schedule: linear" in t)
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    assert main(["train", str(path), "--check", "--set", f"output_dir={tmp_path / 'run'}"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:{line}: plugin 'r1-format': option 'weight' (a schedule): a linear schedule takes" in err


@pytest.mark.slow
def test_a_resumed_run_logs_the_same_scheduled_weights(tmp_path):
    import os
    import shutil
    import subprocess
    import sys

    import yaml

    from rlvr_plugins.train.runlog import read_metrics

    repo = Path(__file__).resolve().parents[1]
    cfg = yaml.safe_load((repo / "tests" / "configs" / "smoke.yaml").read_text())
    cfg.pop("eval")
    cfg["output_dir"] = str(tmp_path / "run")
    cfg["trainer"]["max_steps"] = 3
    # cosine from 1 to 0 over 2 steps: 1, 0.5, 0 at global steps 0, 1, 2 (logged as steps 1, 2, 3)
    cfg["plugins"]["r1-format"] = {"weight": {"schedule": "cosine", "from": 1.0, "to": 0.0, "steps": 2}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))

    def train(*extra):
        env = {**os.environ, "PYTHONWARNINGS": "ignore", "RLVR_THREADS": "1"}
        proc = subprocess.run(
            [sys.executable, "-m", "rlvr_plugins.cli", "train", str(path), *extra],
            cwd=repo,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        rows = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "weights/r1-format" in r]
        return [(r["step"], r["weights/r1-format"]) for r in rows]

    assert train() == [(1, 1.0), (2, pytest.approx(0.5)), (3, pytest.approx(0.0, abs=1e-12))]
    shutil.rmtree(tmp_path / "run" / "checkpoint-3")  # resume from checkpoint-2: step 3 is trained again
    assert train("--resume") == [(1, 1.0), (2, pytest.approx(0.5)), (3, pytest.approx(0.0, abs=1e-12))]


def test_the_run_header_records_the_schedule_as_written():
    from rlvr_plugins.lab.score import describe_scoring
    from rlvr_plugins.train.runfolder import run_header

    written = {"schedule": "step", "points": [[0, 0.0], [5, 0.5]]}
    plugin_set = build_plugin_set({"r1-accuracy": {}, "r1-format": {"weight": written}})
    header = run_header(plugin_set)
    (fmt,) = [p for p in header["plugins"] if p["name"] == "r1-format"]
    assert fmt["options"]["weight"] == written
    assert build_plugin_set({"r1-format": fmt["options"]}).weight_factor("r1-format", 5) == 0.5  # re-read: same
    assert "r1-format x1 (times its weight schedule)" in describe_scoring(plugin_set)


def test_the_plugins_own_weight_rule_holds_at_every_value_of_the_schedule():
    # dapo-overlong's weight must be >= 0: a cosine down to -0.5 reaches a value the plugin refuses
    with pytest.raises(PluginError) as info:
        build_plugin_set({"dapo-overlong": {"weight": {"schedule": "cosine", "from": 1.0, "to": -0.5, "steps": 10}}})
    assert str(info.value).startswith(
        "plugin 'dapo-overlong': option 'weight' (a schedule) reaches -0.5, where: option 'weight' must be a finite "
        "number >= 0, got -0.5"
    )
    build_plugin_set({"dapo-overlong": {"weight": {"schedule": "cosine", "from": 1.0, "to": 0.0, "steps": 10}}})


def test_rlvr_plugins_says_which_weights_may_be_a_schedule(capsys):
    from rlvr_plugins import cli

    assert cli.main(["plugins", "--json"]) == 0
    options = {row["name"]: row.get("options", []) for row in json.loads(capsys.readouterr().out)}

    def weight(name):
        return next(o for o in options[name] if o.startswith("weight ("))

    # a reward (r1-format), a built-in length penalty (dapo-overlong), a third-party one (kimi-length)
    for name in ("r1-format", "dapo-overlong", "kimi-length"):
        assert weight(name).endswith(
            "or a schedule: constant | linear | step | cosine over the step, e.g. "
            "{schedule: linear, from: 0.0, to: 1.0, steps: 100})"
        ), name
        assert weight(name).startswith("weight (float, default 1.0; "), name
    assert options["grpo"] == ["eps (float, default 0.0001)"]  # an estimator: no weight, no schedule


def test_a_weight_option_outside_the_weighted_hooks_is_not_shown_as_a_schedule():
    from rlvr_plugins.manager import plugin_options

    class Logger(Plugin):
        name = "weighted-logger"

        @dataclass
        class Options:
            weight: float = 1.0

        @hookimpl
        def rlvr_on_rewards(self, rewards):
            return None

    assert plugin_options(Logger) == ["weight (float, default 1.0)"]
