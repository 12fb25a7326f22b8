"""Plugin overhead: CPU time per step of ``RLVRTrainer`` (defaults) vs plain TRL ``GRPOTrainer``
doing *the same work*.

Both trainers are built in one process from the same saved model, seed and data, with the
same cheap reward (in-process on both sides, so no worker process escapes the clock), and
stepped in alternation one step at a time (ABBA order: TRL first on even steps, ours first on
odd ones). Each trainer keeps its own torch/python random state, swapped in at the start of
its step, so both sample the same completions: the script records every step's completion
ids, advantages and loss on both sides and **refuses to print a ratio** (exit status 3) if any
differ.

Per step it measures the process's CPU time (user + system of every thread,
``time.process_time``; torch runs on ``RLVR_THREADS`` threads, default 1) and wall time; the
ratio is the median of the per-step ratios ours / TRL with a 95 % bootstrap interval. The
framework's own share is measured by instrumentation, not by subtraction: every method
``RLVRTrainer`` overrides and the reward adapter are wrapped by a CPU-time ledger that charges
their time to "ours" minus the time of the TRL methods they call (``super()``) and of the
user's reward function.

    python benchmarks/plugin_overhead.py [--steps 40] [--warmup 3] [--model tiny|demo] [--json FILE] [--quick]

Goal (issue 14): CPU ratio <= 1.02 with its interval below 1.05, framework share <= 1.5 %.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import (
    DifferentWork,
    Ledger,
    bootstrap_ci,
    check_identical_work,
    load_average,  # noqa: E402
    machine_note,
    paired_ratio,
)

GOAL_RATIO, GOAL_CI_BELOW, GOAL_SHARE = 1.02, 1.05, 0.015
OURS, USER = "rlvr_plugins", "user reward"


def digits_reward(completions, **kwargs):
    return [sum(ch.isdigit() for ch in c) / max(1, len(c)) for c in completions]


def digit_score(*, prompt, completion, example):
    return sum(ch.isdigit() for ch in completion) / max(1, len(completion))


def random_state() -> tuple:
    import numpy as np
    import torch

    return torch.get_rng_state(), random.getstate(), np.random.get_state()


def set_random_state(state: tuple) -> None:
    import numpy as np
    import torch

    torch.set_rng_state(state[0])
    random.setstate(state[1])
    np.random.set_state(state[2])


class Stepper:
    """Run a trainer's loop one block of steps at a time, on its own thread.

    ``times`` / ``process_cpu_times``: wall and process CPU seconds per block, divided by the block's
    steps. With ``rng_state`` the trainer's random state is its own: set at its first step,
    saved when it pauses and restored when it resumes, so trainers stepped in alternation
    draw the same random numbers as if each ran alone from ``rng_state``.
    """

    def __init__(self, trainer, rng_state: tuple | None = None):
        from transformers import TrainerCallback

        self.trainer, self.go, self.done = trainer, threading.Semaphore(0), threading.Semaphore(0)
        self.times: list[float] = []
        self.process_cpu_times: list[float] = []
        self.block = 0
        self.rng_state = rng_state
        outer = self

        class Gate(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                if state.global_step % outer.block == 0:
                    if state.global_step:
                        outer._pause()
                        outer.done.release()
                    outer.go.acquire()
                    outer._resume()

        trainer.add_callback(Gate())
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _pause(self):
        if self.rng_state is not None:
            self.rng_state = random_state()

    def _resume(self):
        if self.rng_state is not None:
            set_random_state(self.rng_state)

    def _run(self):
        self.trainer.train()
        self.done.release()

    def step_block(self, block: int):
        self.block = block
        if not self.thread.is_alive():
            self.thread.start()
        t, c = time.perf_counter(), time.process_time()
        self.go.release()
        self.done.acquire()
        self.process_cpu_times.append((time.process_time() - c) / block)
        self.times.append((time.perf_counter() - t) / block)

    def finish(self):
        self.go.release()
        self.thread.join(timeout=600)


def instrument(ledger: Ledger) -> None:
    """Charge ``RLVRTrainer``'s own methods and the reward adapter to ``OURS``; the TRL methods
    they override (reached through ``super()``) to TRL; the benchmark's reward functions to ``USER``."""
    from trl import GRPOTrainer

    from rlvr_plugins.rewards import TRLReward
    from rlvr_plugins.trainer import RLVRTrainer

    for name, fn in list(vars(RLVRTrainer).items()):
        if callable(fn) and not isinstance(fn, type) and not name.startswith("__"):
            setattr(RLVRTrainer, name, ledger.wrap(f"{OURS}:{name}", fn))
            parent = getattr(GRPOTrainer, name, None)  # what super() reaches: TRL's or transformers' method
            if callable(parent):
                setattr(GRPOTrainer, name, ledger.wrap("trl", parent))
    TRLReward.__call__ = ledger.wrap(f"{OURS}:TRLReward.__call__", TRLReward.__call__)
    module = sys.modules[__name__]
    module.digits_reward = ledger.wrap(USER, digits_reward)
    module.digit_score = ledger.wrap(USER, digit_score)


def record_work(trainer) -> dict[str, list]:
    """Record each step's completion ids and advantages (``_generate_and_score_completions``'s output)."""
    records: dict[str, list] = {"completion_ids": [], "advantages": []}
    generate = trainer._generate_and_score_completions

    def recording(inputs):
        output = generate(inputs)
        records["completion_ids"].append(output["completion_ids"].tolist())
        records["advantages"].append([round(x, 6) for x in output["advantages"].tolist()])
        return output

    trainer._generate_and_score_completions = recording
    return records


SIZE = dict(per_device_train_batch_size=32, num_generations=8, max_completion_length=16)
QUICK_SIZE = dict(per_device_train_batch_size=8, num_generations=4, max_completion_length=8)
DEMO_SIZE = dict(per_device_train_batch_size=64, num_generations=8, max_completion_length=34)
MODELS = {  # --model: the tiny model (hidden 64, 2 layers) or the CPU demo's (configs/demo.yaml, 1.06 M)
    "tiny": (dict(hidden_size=64, intermediate_size=256, num_hidden_layers=2, head_dim=32), SIZE),
    "demo": (
        dict(
            hidden_size=128,
            intermediate_size=512,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=4,
            head_dim=32,
        ),
        DEMO_SIZE,
    ),
    "quick": (dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, head_dim=32), QUICK_SIZE),
}


def build(kind: str, workdir: Path, model_dir: str, steps: int, size: dict):
    """Plain TRL (``trl``) or ``RLVRTrainer`` with the defaults (``defaults``), the cheap digit reward
    in-process, from the model saved in ``model_dir``; ``size``: ``GRPOConfig`` fields (batch,
    generations, lengths) over :func:`rlvr_plugins.testing.grpo_args`."""
    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOTrainer

    from rlvr_plugins import Plugin, RewardFunction, hookimpl
    from rlvr_plugins.manager import build_plugin_set, temporary_plugin
    from rlvr_plugins.rewards import Engines
    from rlvr_plugins.testing import char_tokenizer, grpo_args, tiny_rows
    from rlvr_plugins.trainer import RLVRTrainer

    tokenizer = char_tokenizer()
    dataset = Dataset.from_list(tiny_rows(256))
    args = grpo_args(workdir / kind, max_steps=steps, logging_steps=1, **{"learning_rate": 1e-4, **size})
    module = sys.modules[__name__]
    if kind == "trl":
        reward = module.digits_reward
        reward.__name__ = "digits"
        trainer = GRPOTrainer(
            model=model_dir, reward_funcs=[reward], args=args, train_dataset=dataset, processing_class=tokenizer
        )
    else:

        class Digits(Plugin):
            name = "bench-digits"

            @hookimpl
            def rlvr_reward_functions(self, register):
                register(RewardFunction("digits", module.digit_score, isolated=False))

        with temporary_plugin(Digits):
            plugin_set = build_plugin_set({"bench-digits": {}})
        trainer = RLVRTrainer(
            plugin_set=plugin_set,
            engines=Engines(in_process=True),
            model=model_dir,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
        )
    trainer.remove_callback(PrinterCallback)
    return trainer


def ours_total(totals: dict) -> float:
    """CPU seconds charged to any of the framework's wrapped methods (owners ``rlvr_plugins:<method>``)."""
    return sum(v for k, v in totals.items() if k and k.startswith(OURS + ":"))


def losses(trainer) -> list[float]:
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


def run(steps: int, warmup: int, model: str = "tiny", build_first: str = "trl") -> dict:
    """Build, step in ABBA alternation, check identical work; the raw per-step series."""
    import torch
    import transformers

    from rlvr_plugins.testing import char_tokenizer, tiny_model

    ledger = Ledger()
    instrument(ledger)
    total = warmup + steps
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = str(Path(tmp) / "init")
        config, size = MODELS[model]
        tiny_model(char_tokenizer(), **config).save_pretrained(model_dir)
        transformers.set_seed(0)
        start_state = random_state()
        steppers, records = {}, {}
        for kind in sorted(("trl", "defaults"), key=lambda k: k != build_first):
            trainer = build(kind, Path(tmp), model_dir, total, size)
            records[kind] = record_work(trainer)
            steppers[kind] = Stepper(trainer, rng_state=start_state)
        ours_cpu: list[float] = []
        for step in range(total):
            order = ("trl", "defaults") if step % 2 == 0 else ("defaults", "trl")
            for kind in order:
                s = steppers[kind]
                before = ours_total(ledger.totals(s.thread.ident)) if s.thread.ident else 0.0
                if kind == "defaults" and step == warmup:
                    timed_from = dict(ledger.totals(s.thread.ident))
                s.step_block(1)
                if kind == "defaults":
                    ours_cpu.append(ours_total(ledger.totals(s.thread.ident)) - before)
        for s in steppers.values():
            s.finish()
        for kind in steppers:
            records[kind]["loss"] = losses(steppers[kind].trainer)
        trl_ours = ours_total(ledger.totals(steppers["trl"].thread.ident))
        timed_to = ledger.totals(steppers["defaults"].thread.ident)
    by_method = {
        k.split(":", 1)[1]: round(1000 * (v - timed_from.get(k, 0.0)) / steps, 4)
        for k, v in sorted(timed_to.items(), key=lambda kv: -kv[1])
        if k and k.startswith(OURS + ":")
    }
    return {
        "steppers": steppers,
        "records": records,
        "ours_cpu": ours_cpu,
        "trl_charged_to_ours": trl_ours,
        "ours_ms_per_step_by_method": {k: v for k, v in by_method.items() if v > 0},
        "torch_threads": torch.get_num_threads(),
    }


def summarise(
    cpu_ours: list[float],
    cpu_trl: list[float],
    wall_ours: list[float],
    wall_trl: list[float],
    ours_share_cpu: list[float],
) -> dict:
    """Ratios with intervals and the goal check, from timed (post-warm-up) per-step series."""
    cpu = paired_ratio(cpu_ours, cpu_trl)
    wall = paired_ratio(wall_ours, wall_trl)
    shares = [o / c for o, c in zip(ours_share_cpu, cpu_ours)]
    share = statistics.median(shares)
    return {
        "cpu_s_per_step_median": {"trl": statistics.median(cpu_trl), "defaults": statistics.median(cpu_ours)},
        "wall_s_per_step_median": {"trl": statistics.median(wall_trl), "defaults": statistics.median(wall_ours)},
        "cpu_ratio_defaults_vs_trl": cpu,
        "wall_ratio_defaults_vs_trl": wall,
        "framework_share_of_step_cpu": {
            "median": share,
            "max": max(shares),
            "ms_per_step_median": 1000 * statistics.median(ours_share_cpu),
        },
        "goal": {
            "cpu_ratio_at_most": GOAL_RATIO,
            "ci_upper_below": GOAL_CI_BELOW,
            "share_at_most": GOAL_SHARE,
            "met": cpu["median"] <= GOAL_RATIO and cpu["ci95"][1] < GOAL_CI_BELOW and share <= GOAL_SHARE,
        },
    }


def report(
    records: dict[str, dict[str, list]], series: dict[str, dict[str, list[float]]], warmup: int
) -> tuple[int, dict]:
    """``(0, figures)`` when both trainers did identical work, else ``(3, {"refused": why})``: no ratio.

    ``records``: per trainer (``trl``, ``defaults``), per kind, one entry per step;
    ``series``: per trainer, ``cpu`` and ``wall`` seconds per step, and for ``defaults``
    ``ours`` (the framework's CPU seconds per step); the first ``warmup`` steps are not timed.
    """
    try:
        check_identical_work(records["trl"], records["defaults"], names=("trl", "defaults"))
    except DifferentWork as exc:
        return 3, {"refused": f"the two trainers did different work, no ratio: {exc}"}
    t = slice(warmup, None)
    a, b = series["defaults"], series["trl"]
    figures = {"identical_work": {"steps": len(records["trl"]["loss"]), "checked": sorted(records["trl"])}}
    figures.update(summarise(a["cpu"][t], b["cpu"][t], a["wall"][t], b["wall"][t], a["ours"][t]))
    return 0, figures


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=40, help="timed steps per trainer (after the warm-up)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument(
        "--model",
        choices=["tiny", "demo"],
        default="tiny",
        help="tiny: hidden 64, 2 layers, 32 completions of 16 tokens per step; demo: the CPU demo's "
        "model (1.06 M) and step (64 completions of 34 tokens)",
    )
    p.add_argument("--quick", action="store_true", help="smaller model and batch, 4 timed steps (smoke test)")
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="fresh processes, build order alternating; the figures are then the runs' medians with an "
        "interval across runs (a run's own interval misses what differs between runs)",
    )
    p.add_argument("--build-first", choices=["trl", "defaults"], default="trl", help=argparse.SUPPRESS)
    p.add_argument("--json")
    args = p.parse_args(argv)
    if args.repeats > 1 and not args.quick:
        return repeat_runs(args)
    import torch

    torch.set_num_threads(int(os.environ.get("RLVR_THREADS", "1")))
    steps, warmup = (4, 1) if args.quick else (args.steps, args.warmup)
    load_start = load_average()
    started = time.perf_counter()
    raw = run(steps, warmup, "quick" if args.quick else args.model, args.build_first)
    result = {
        "machine": {
            **machine_note(load_start, load_average()),
            "arch": platform.machine(),
            "torch_threads": raw["torch_threads"],
        },
        "command": " ".join(["python", "benchmarks/plugin_overhead.py", *(argv if argv is not None else sys.argv[1:])]),
        "model": "quick" if args.quick else args.model,
        "built_first": args.build_first,
        "steps_timed": steps,
        "warmup_steps": warmup,
        "seconds": round(time.perf_counter() - started, 1),
    }
    s = raw["steppers"]
    series = {k: {"cpu": s[k].process_cpu_times, "wall": s[k].times} for k in s}
    series["defaults"]["ours"] = raw["ours_cpu"]
    status, verdict = report(raw["records"], series, warmup)
    result.update(verdict)
    if status == 0:
        result["trl_cpu_charged_to_rlvr_plugins"] = raw["trl_charged_to_ours"]
        result["framework_ms_per_step_by_method"] = raw["ours_ms_per_step_by_method"]  # mean over timed steps
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return status


def across_runs(runs: list[dict]) -> dict:
    """Figures over repeated runs (each a ``main`` result): the median of the runs' median CPU
    ratios and framework shares, with a bootstrap interval over runs; ``refused`` if any run was."""
    refused = [r["refused"] for r in runs if "refused" in r]
    if refused:
        return {"refused": f"{len(refused)} of {len(runs)} runs did different work: {refused[0]}"}
    ratios = [r["cpu_ratio_defaults_vs_trl"]["median"] for r in runs]
    shares = [r["framework_share_of_step_cpu"]["median"] for r in runs]
    low, high = bootstrap_ci(ratios)
    ratio, share = statistics.median(ratios), statistics.median(shares)
    return {
        "runs": len(runs),
        "cpu_ratio_per_run": ratios,
        "framework_share_per_run": shares,
        "cpu_ratio_defaults_vs_trl": {"median": ratio, "ci95_over_runs": [low, high]},
        "framework_share_of_step_cpu": {"median": share},
        "goal": {
            "cpu_ratio_at_most": GOAL_RATIO,
            "ci_upper_below": GOAL_CI_BELOW,
            "share_at_most": GOAL_SHARE,
            "met": ratio <= GOAL_RATIO and high < GOAL_CI_BELOW and share <= GOAL_SHARE,
        },
    }


def repeat_runs(args) -> int:
    """``args.repeats`` runs in fresh interpreters (TRL built first in even runs, ours in odd ones)."""
    import subprocess

    load_start = load_average()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            out = Path(tmp) / f"run{i}.json"
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--steps",
                    str(args.steps),
                    "--warmup",
                    str(args.warmup),
                    "--model",
                    args.model,
                    "--build-first",
                    ("trl", "defaults")[i % 2],
                    "--json",
                    str(out),
                ],
                check=False,
                capture_output=True,
            )
            if not out.exists():
                raise SystemExit(f"run {i} wrote no result")
            runs.append(json.loads(out.read_text()))
            print(
                f"run {i}: "
                + json.dumps({k: runs[-1].get(k) for k in ("built_first", "cpu_ratio_defaults_vs_trl", "refused")}),
                flush=True,
            )
    result = {
        "machine": machine_note(load_start, load_average()),
        "command": " ".join(["python", "benchmarks/plugin_overhead.py", *sys.argv[1:]]),
        **across_runs(runs),
        "run_results": runs,
    }
    text = json.dumps({k: v for k, v in result.items() if k != "run_results"}, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 3 if "refused" in result else 0


if __name__ == "__main__":
    sys.exit(main())
