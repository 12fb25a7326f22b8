"""Sample efficiency: rollouts to reach a held-out accuracy target, ``kimi-curriculum`` vs uniform sampling.

The task is the demo's addition with a mixed difficulty: operands of 1 to 4 digits
(``difficulty_weights`` 0.3, 0.3, 0.2, 0.2 over the digit count of the longer operand).
After the demo's SFT cold start, 1-digit problems are nearly solved, 2-digit ones are
learnable, 3-digit ones hard, and 4-digit ones out of reach (the model never saw four
columns, and most of their worked solutions do not fit in the demo's 34 new tokens), so a
uniform sampler spends many rollouts on groups that are all right or all wrong.

Protocol, per seed:

1. One SFT cold start for the whole benchmark (``rlvr sft`` with ``configs/demo.yaml``:
   the demo's SFT steps on its sloppy-teacher data; 500 since issue 15, 300 when the recorded
   results were measured), saved once and loaded by every run.
2. Two GRPO runs from that checkpoint through ``rlvr_plugins.train.run.train`` (the code behind
   ``rlvr train``), identical except for the train sampler: TRL's ``RepeatSampler``
   (``uniform``) or ``kimi-curriculum`` with its default options (``curriculum``). The
   demo's GRPO settings otherwise: 8 prompts x 8 completions per step, lr 2e-4,
   temperature 1.0, ``r1-accuracy`` + 0.1 ``r1-format``. The run's seed is the seed.
3. Every ``--eval-every`` steps a callback decodes the fixed held-out set greedily and
   scores it with ``r1-accuracy`` (the framework's ``evaluate``, as ``rlvr train`` does
   before and after GRPO). The first evaluation at or above ``--target`` ends the run;
   its rollout count (completions generated so far, counted by a plugin on
   ``rlvr_on_rewards``) is the result. A run that never reaches the target is censored:
   it counts as the budget (``--budget-steps`` x completions per step).

Per seed the ratio is rollouts(curriculum) / rollouts(uniform); the figure is the median
ratio over seeds (lower is better for the curriculum).

    python benchmarks/sample_efficiency.py [--quick] [--seeds 0 1 2] [--target 0.34] [--json FILE]

Prints a table and the JSON; writes the JSON to ``benchmarks/results/`` unless told otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import load_average, machine_note  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DEMO = ROOT / "configs" / "demo.yaml"
HOMEWORK = ROOT / "configs" / "homework"
ARMS = ("uniform", "curriculum", "dynamic")
DEFAULT_ARMS = ("uniform", "curriculum")
ARM_PLUGINS = {"uniform": {}, "curriculum": {"kimi-curriculum": {}}, "dynamic": {"dapo-dynamic-sampling": {}}}
ARM_TEXT = {
    "uniform": "repeat-sampler (TRL RepeatSampler)",
    "curriculum": "kimi-curriculum, default options",
    "dynamic": "dapo-dynamic-sampling, default options",
}
MIX = {"min_digits": 1, "max_digits": 4, "difficulty_weights": [0.3, 0.3, 0.2, 0.2], "cot": "columns"}
FULL = {
    "seeds": [0, 1, 2],
    "budget_steps": 120,
    "eval_every": 10,
    "eval_size": 200,
    "pool_size": 1000,
    "sft_examples": 9600,
    "target": 0.34,
}
QUICK = {
    "seeds": [0, 1],
    "budget_steps": 4,
    "eval_every": 2,
    "eval_size": 24,
    "pool_size": 64,
    "sft_examples": 320,
    "target": 0.34,
}
HOMEWORK_FULL = {  # --recipe homework: the demo task from the 700-step SFT start of docs/comparison.md
    "seeds": [0, 1, 2],
    "budget_steps": 150,
    "eval_every": 10,
    "eval_size": 400,
    "pool_size": 4000,
    "sft_examples": 22400,
    "target": 0.78,  # fixed before any run: ~90 % of plain GRPO's 150-step gain in dynamic_grid.json's grpo rows
}
COUNTER = "bench-rollouts"


def counter_plugin(make_eval: Any = None):
    """A plugin that counts the completions of every scored batch, and which prompts they came from;
    with ``make_eval(trainer) -> HeldOutEval``, it also adds that evaluation's callback to the trainer."""
    from rlvr_plugins import Plugin, hookimpl
    from rlvr_plugins.advantages import zero_variance_groups

    class RolloutCounter(Plugin):
        name = COUNTER
        description = "benchmark: counts rollouts (completions scored) and zero-variance groups"

        def __init__(self, options=None):
            super().__init__(options)
            self.rollouts = 0
            self.zero_variance_rollouts = 0
            self.group_indices: list[int] = []
            self.held_out: HeldOutEval | None = None

        @hookimpl
        def rlvr_trainer_callbacks(self, trainer):
            if make_eval is None:
                return None
            self.held_out = make_eval(trainer)
            return [self.held_out.callback()]

        @hookimpl
        def rlvr_on_rewards(self, example_indices, rewards, valid, num_generations):
            zero = zero_variance_groups(rewards, valid, num_generations)
            self.rollouts += rewards.numel()
            self.zero_variance_rollouts += int(zero.sum()) * num_generations
            self.group_indices.extend(int(i) for i in example_indices[::num_generations])

    return RolloutCounter


class HeldOutEval:
    """Greedy held-out accuracy every ``every`` steps; stops training at the first value ``>= target``."""

    def __init__(self, trainer, config: dict[str, Any], every: int, target: float, max_steps: int, at_start: bool):
        from rlvr_plugins.train import data

        self.trainer, self.config, self.every, self.target = trainer, config, every, target
        self.max_steps, self.at_start = max_steps, at_start
        rows = data.load_rows(config, "eval")
        rows = data.render(rows, trainer.plugin_set, trainer.processing_class, int(config["seed"]))
        self.levels: dict[int, list[dict]] = {}
        for row in rows:
            self.levels.setdefault(int(row["difficulty"]), []).append(row)
        self.curve: list[dict[str, Any]] = []
        self.reached: dict[str, Any] | None = None
        self.started_cpu, self.eval_cpu = time.process_time(), 0.0

    def evaluate(self, step: int) -> dict[str, Any]:
        from rlvr_plugins.train.evaluation import evaluate
        from rlvr_plugins.train.sections import EvalSection

        t, cpu = time.perf_counter(), time.process_time()
        train_cpu = cpu - self.started_cpu - self.eval_cpu  # this process's CPU-seconds of training so far
        rewards = self.trainer.plugin_set.reward_functions()
        max_new = int(self.trainer.args.max_completion_length)
        options = EvalSection(reward="r1-accuracy", batch_size=256).in_train(max_new)
        by_level = {}
        for level, rows in sorted(self.levels.items()):
            result = evaluate(
                self.trainer.model, self.trainer.processing_class, rows, rewards, self.trainer.engines, options
            )
            by_level[level] = result["accuracy"]
        n = sum(len(rows) for rows in self.levels.values())
        accuracy = sum(by_level[level] * len(rows) for level, rows in self.levels.items()) / n
        counter = self.trainer.plugin_set.get(COUNTER)
        point = {
            "step": step,
            "rollouts": counter.rollouts,
            "accuracy": accuracy,
            "accuracy_by_digits": by_level,
            "seconds": round(time.perf_counter() - t, 2),
            "train_cpu_seconds": round(train_cpu, 2),
        }
        self.eval_cpu += time.process_time() - cpu
        self.curve.append(point)
        return point

    def measure(self, step: int, _model=None) -> dict[str, Any]:
        point = self.evaluate(step)
        if step:
            print(
                f"  [held-out] step {step:4d}  rollouts {point['rollouts']:6d}  "
                f"accuracy {100 * point['accuracy']:5.1f}%  ({point['seconds']:.1f}s)",
                flush=True,
            )
        return point

    def reached_target(self, point: dict[str, Any]) -> bool:
        if point["step"] and point["accuracy"] >= self.target and self.reached is None:
            self.reached = point
        return self.reached is point

    def callback(self):
        """The framework's periodic evaluation: at the start (when ``at_start``), every ``every`` steps and at
        the last step; training stops at the first point ``>= target``."""
        from rlvr_plugins.train.runlog import PeriodicEval

        return PeriodicEval(
            self.every, self.measure, None, at_start=self.at_start, at_last=True, stop_when=self.reached_target
        )


def sft_once(workdir: Path, examples: int, recipe: Path = DEMO) -> tuple[Path, float]:
    """The demo's SFT cold start (``rlvr sft configs/demo.yaml``, or ``recipe``), seed 0; returns the model folder
    and seconds."""
    from rlvr_plugins.cli.sft_cmd import run_sft_command
    from rlvr_plugins.train.config import load_config

    t = time.perf_counter()
    config = load_config(
        recipe,
        [f"output_dir={workdir / 'sft'}", f"sft.examples={examples}", "sft.logging_steps=100", "sft.disable_tqdm=true"],
    )
    summary = run_sft_command(config)
    return Path(summary["model"]), time.perf_counter() - t


def arm_config(arm: str, seed: int, model: Path, out: Path, p: dict[str, Any], recipe: str = "mix") -> dict[str, Any]:
    """The GRPO config of one arm from the SFT checkpoint; ``arm`` picks the sampler. ``mix``: the demo config on
    the mixed task; ``homework``: ``configs/homework/estimators.yaml`` (the demo task), rewards scored in the
    training process so that its CPU-seconds hold every round's scoring."""
    from rlvr_plugins.train.config import load_config, validate

    if recipe == "homework":
        config = copy.deepcopy(load_config(HOMEWORK / "estimators.yaml"))
        config["eval"].pop("every_steps", None)
        config["engine"] = {"in_process": True}
        for split in ("train", "eval"):
            config["data"][split]["size"] = p["pool_size" if split == "train" else "eval_size"]
    else:
        config = copy.deepcopy(load_config(DEMO))
        config.pop("sft")
        split = {"source": "synthetic", "task": "arithmetic", "seed": 1, "options": dict(MIX)}
        config["data"] = {"train": {**split, "size": p["pool_size"]}, "eval": {**split, "size": p["eval_size"]}}
    config["output_dir"], config["seed"] = str(out), seed
    config["model"] = {"name_or_path": str(model), "tokenizer": "char"}
    config["eval"]["batch_size"] = 256
    config["plugins"][COUNTER] = {}
    config["plugins"].update(copy.deepcopy(ARM_PLUGINS[arm]))
    config["trainer"].update(max_steps=p["budget_steps"], save_strategy="no", logging_steps=10, disable_tqdm=True)
    validate(config)
    return config


def run_arm(
    arm: str, seed: int, model: Path, workdir: Path, p: dict[str, Any], at_start: bool, recipe: str = "mix"
) -> dict[str, Any]:
    from rlvr_plugins.manager import temporary_plugin
    from rlvr_plugins.train.data import load_rows
    from rlvr_plugins.train.run import train

    config = arm_config(arm, seed, model, workdir / f"{arm}-seed{seed}", p, recipe)
    print(f"== seed {seed}, {arm}", flush=True)
    t = time.perf_counter()
    made: list[HeldOutEval] = []

    def make_eval(trainer) -> HeldOutEval:
        made.append(HeldOutEval(trainer, config, p["eval_every"], p["target"], p["budget_steps"], at_start))
        return made[-1]

    with temporary_plugin(counter_plugin(make_eval)):
        summary = train(config, overwrite=True)  # a reused --workdir holds the previous benchmark's arms
    seconds = time.perf_counter() - t
    ev = made[0]
    counter = ev.trainer.plugin_set.get(COUNTER)
    per_step = int(config["trainer"]["per_device_train_batch_size"])
    budget = p["budget_steps"] * per_step
    levels = [int(r["difficulty"]) for r in load_rows(config, "train")]
    drawn = Counter(levels[i] for i in counter.group_indices)
    reached = ev.reached
    return {
        "arm": arm,
        "seed": seed,
        "reached_target": reached is not None,
        "censored": reached is None,
        "rollouts_to_target": reached["rollouts"] if reached else max(budget, counter.rollouts),
        "steps_to_target": reached["step"] if reached else p["budget_steps"],
        "steps_run": summary["grpo_steps"],
        "rollouts_run": counter.rollouts,
        "train_cpu_seconds_to_target": (reached or ev.curve[-1])["train_cpu_seconds"],
        "completions_per_step": per_step,
        "accuracy_start": summary["eval_before"]["accuracy"],
        "accuracy_end": summary["eval_after"]["accuracy"],
        "best_accuracy": max([summary["eval_before"]["accuracy"]] + [c["accuracy"] for c in ev.curve]),
        "curve": ev.curve,
        "zero_variance_share": counter.zero_variance_rollouts / max(1, counter.rollouts),
        "prompts_drawn_by_digits": {d: drawn[d] / max(1, sum(drawn.values())) for d in sorted(drawn)},
        "seconds": round(seconds, 1),
    }


def ratio_summary(runs: list[dict[str, Any]], seeds: list[int], arm: str = "curriculum") -> dict[str, Any]:
    """Per-seed ratio ``arm`` / uniform of rollouts to target (and of the training CPU-seconds to it,
    evaluation excluded; a censored run counts what it spent); median, min, max."""
    by = {(r["arm"], r["seed"]): r for r in runs}
    ratios = {s: by[arm, s]["rollouts_to_target"] / by["uniform", s]["rollouts_to_target"] for s in seeds}
    cpu = {
        s: by[arm, s]["train_cpu_seconds_to_target"] / max(by["uniform", s]["train_cpu_seconds_to_target"], 1e-9)
        for s in seeds
    }
    values = list(ratios.values())
    return {
        "ratio_by_seed": ratios,
        "median_ratio": statistics.median(values),
        "min_ratio": min(values),
        "max_ratio": max(values),
        "cpu_ratio_by_seed": cpu,
        "median_cpu_ratio": statistics.median(cpu.values()),
        "any_censored": any(r["censored"] for r in runs if r["arm"] in (arm, "uniform")),
    }


def table(runs: list[dict[str, Any]], seeds: list[int], ratios: dict[int, float], arm: str = "curriculum") -> str:
    by = {(r["arm"], r["seed"]): r for r in runs}

    def cell(r):
        return f"{r['rollouts_to_target']}{' (censored)' if r['censored'] else ''}"

    lines = [
        f"| seed | uniform: rollouts | {arm}: rollouts | ratio | best acc. uniform | best acc. {arm} |",
        "|---|---|---|---|---|---|",
    ]
    for s in seeds:
        u, c = by["uniform", s], by[arm, s]
        lines.append(
            f"| {s} | {cell(u)} | {cell(c)} | {ratios[s]:.2f} | {100 * u['best_accuracy']:.1f} % | "
            f"{100 * c['best_accuracy']:.1f} % |"
        )
    return "\n".join(lines)


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, default=str) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke test: short SFT, 2 seeds, 4 steps per run")
    ap.add_argument("--seeds", type=int, nargs="+")
    ap.add_argument("--budget-steps", type=int)
    ap.add_argument("--eval-every", type=int)
    ap.add_argument("--eval-size", type=int)
    ap.add_argument("--pool-size", type=int)
    ap.add_argument("--target", type=float, help="held-out accuracy to reach (chosen from a pilot run)")
    ap.add_argument(
        "--arms",
        nargs="+",
        choices=ARMS,
        default=list(DEFAULT_ARMS),
        help="uniform and at least one other for a ratio (pilots: one); dynamic = dapo-dynamic-sampling",
    )
    ap.add_argument(
        "--recipe",
        choices=("mix", "homework"),
        default="mix",
        help="mix: 1-4 digit addition from the demo's SFT (default); homework: the demo task from the 700-step "
        "SFT of configs/homework (defaults: 150 steps, evaluation every 10, target 0.78)",
    )
    ap.add_argument("--sft-model", help="reuse this SFT checkpoint (a model folder) instead of training one")
    ap.add_argument("--workdir", help="keep the runs here (default: a temporary folder)")
    ap.add_argument("--json", help="default: benchmarks/results/sample_efficiency[-quick].json")
    args = ap.parse_args(argv)
    p = dict(QUICK if args.quick else HOMEWORK_FULL if args.recipe == "homework" else FULL)
    for key in ("seeds", "budget_steps", "eval_every", "eval_size", "pool_size", "target"):
        if getattr(args, key) is not None:
            p[key] = getattr(args, key)

    import torch

    from rlvr_plugins.train.run import configure_threads

    configure_threads()
    json_path = Path(args.json) if args.json else RESULTS / f"sample_efficiency{'-quick' if args.quick else ''}.json"
    started = time.perf_counter()
    load_start = load_average()
    with contextlib.ExitStack() as stack:
        workdir = Path(args.workdir) if args.workdir else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        model, sft_seconds = (
            (Path(args.sft_model), 0.0)
            if args.sft_model
            else sft_once(workdir, p["sft_examples"], HOMEWORK / "sft.yaml" if args.recipe == "homework" else DEMO)
        )
        runs = []
        for i, (seed, arm) in enumerate((s, a) for s in p["seeds"] for a in args.arms):
            runs.append(run_arm(arm, seed, model, workdir, p, at_start=not i, recipe=args.recipe))
            write_json(json_path, {"partial": True, "params": p, "runs": runs})
    if len(args.arms) < 2 or "uniform" not in args.arms:
        print(json.dumps(runs, indent=2, default=str))
        return runs
    header = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}",
        "load": machine_note(load_start, load_average()),
        "recipe": args.recipe,
        "task": {
            **(MIX if args.recipe == "mix" else {"config": "configs/homework/estimators.yaml"}),
            "max_completion_length": 34,
            "held_out": p["eval_size"],
            "train_pool": p["pool_size"],
        },
        "arms": {arm: ARM_TEXT[arm] for arm in args.arms},
        "params": p,
        "quick": args.quick,
        "sft_seconds": round(sft_seconds, 1),
        "sft_reused": args.sft_model,
        "sft_curve_start": runs[0]["curve"][0] if runs[0]["curve"] and runs[0]["curve"][0]["step"] == 0 else None,
    }
    if "curriculum" not in args.arms:  # uniform vs dynamic sampling: issue 25's target is a CPU ratio <= 0.8
        ratios = ratio_summary(runs, p["seeds"], "dynamic")
        result = {**header, **ratios, "target_met": ratios["median_cpu_ratio"] <= 0.8, "runs": runs}
        verdict = (
            f"median ratio dynamic/uniform: rollouts {ratios['median_ratio']:.2f}, training CPU-seconds "
            f"{ratios['median_cpu_ratio']:.2f} (min {min(ratios['cpu_ratio_by_seed'].values()):.2f}, max "
            f"{max(ratios['cpu_ratio_by_seed'].values()):.2f}); target <= 0.8"
        )
        arm = "dynamic"
    else:
        ratios = ratio_summary(runs, p["seeds"])
        dynamic = {"dynamic": ratio_summary(runs, p["seeds"], "dynamic")} if "dynamic" in args.arms else {}
        result = {**header, **ratios, "target_met": ratios["median_ratio"] <= 0.75, **dynamic, "runs": runs}
        verdict = (
            f"median ratio curriculum/uniform: {ratios['median_ratio']:.2f} (min {ratios['min_ratio']:.2f}, "
            f"max {ratios['max_ratio']:.2f}); target <= 0.75"
        )
        arm = "curriculum"
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(table(runs, p["seeds"], ratios["ratio_by_seed"], arm))
    print(
        f"{verdict}: {'met' if result['target_met'] else 'NOT met'}"
        f"{'; some runs censored at the budget' if ratios['any_censored'] else ''}; {result['seconds']:.0f} s"
    )
    write_json(json_path, result)
    print(f"wrote {json_path}")
    return result


if __name__ == "__main__":
    main()
