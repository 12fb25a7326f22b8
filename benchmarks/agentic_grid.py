"""The agentic CPU demo (issue 23): does GRPO teach a tiny model to call a calculator?

One cell is one full run in its own process, through the Python API: the task of
``rlvr_plugins.demo.agentic`` (multi-digit arithmetic, a calculator environment), a seeded tiny
Qwen3, an SFT cold start on the teacher's multi-turn episodes (TRL's ``SFTTrainer`` with
``assistant_only_loss``: the tool results are out of the loss), then ``RLVRTrainer`` with
``environment_factory`` (TRL's tool loop) and ``r1-accuracy``. Held-out evaluation runs the
same episodes greedily through TRL's own generation path and tool loop (``trainer.evaluate()``
with sampling switched off), so it calls the calculator exactly as training does; it reports
accuracy (``r1-accuracy`` mean) and TRL's ``tools/call_frequency`` (calls per episode; with
``max_tool_calling_iterations: 1`` at most one call is run, so it is the share of episodes that
call the tool).

    python benchmarks/agentic_grid.py [--seeds 0 1 2] [--threads 1 2] [--jobs 1] [--out runs/agentic-grid]
        [--json FILE]
    python benchmarks/agentic_grid.py --cell SEED --out FOLDER      # one run, in this process
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import load_average, machine_note  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TARGET_POINTS = 10.0  # issue 23: GRPO adds at least this many points of held-out accuracy
TIME_LIMIT_S = 600.0  # issue 23: within 10 minutes on 2 cores

SETTINGS: dict[str, Any] = {
    "task": {"min_digits": 2, "max_digits": 3, "ops": "*", "tool_rate": 0.3, "slip": 0.3},
    "data_seed": 0,
    "n_eval": 400,
    "n_rl": 4000,
    "model": {
        "hidden_size": 128,
        "intermediate_size": 512,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "head_dim": 32,
    },
    "sft": {
        "examples": 12800,
        "learning_rate": 3.0e-3,
        "per_device_train_batch_size": 32,
        "lr_scheduler_type": "constant_with_warmup",
        "warmup_steps": 0.05,
        "logging_steps": 50,
    },
    "grpo": {
        "max_steps": 60,
        "learning_rate": 2.0e-4,
        "lr_scheduler_type": "constant",
        "per_device_train_batch_size": 64,
        "num_generations": 8,
        "max_completion_length": 40,
        "temperature": 1.0,
        "beta": 0.0,
        "loss_type": "dapo",
        "logging_steps": 5,
        "max_tool_calling_iterations": 1,
        "per_device_eval_batch_size": 200,
        "num_generations_eval": 1,
    },
    "eval_every": 20,
}


@contextlib.contextmanager
def greedy(trainer):
    """TRL's generation config switched to greedy decoding for the block (evaluation), then put back."""
    config = trainer.generation_config
    before = config.do_sample
    config.do_sample = False
    try:
        yield
    finally:
        config.do_sample = before


def held_out(trainer) -> dict[str, float]:
    """Greedy held-out episodes through TRL's evaluate: accuracy and tool calls per episode."""
    with greedy(trainer):
        metrics = trainer.evaluate()
    return {
        "accuracy": round(metrics["eval_rewards/r1-accuracy/mean"], 4),
        "tool_calls": round(metrics.get("eval_tools/call_frequency", 0.0), 4),
        "step": trainer.state.global_step,
    }


def run_cell(seed: int, out: Path, settings: dict[str, Any] = SETTINGS) -> dict[str, Any]:
    """One run: SFT cold start, greedy held-out eval, GRPO with the calculator, evaluations; a summary dict."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback, set_seed
    from trl import GRPOConfig

    from rlvr_plugins.demo.agentic import CalculatorEnvironment, agent_train_eval, build_agent_tokenizer
    from rlvr_plugins.demo.model import build_tiny_model
    from rlvr_plugins.train.modeling import cpu_defaults
    from rlvr_plugins.train.sft import last_logged_loss, run_sft
    from rlvr_plugins.train.validate import SFTSection
    from rlvr_plugins.trainer import RLVRTrainer

    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    set_seed(seed)
    tokenizer = build_agent_tokenizer()
    model = build_tiny_model(tokenizer, seed=seed, **settings["model"])
    sft_opts = dict(settings["sft"])
    n_sft = sft_opts.pop("examples")
    train_rows, eval_rows = agent_train_eval(
        n_sft + settings["n_rl"], settings["n_eval"], settings["data_seed"], **settings["task"]
    )
    sft_rows, rl_rows = train_rows[:n_sft], train_rows[n_sft:]
    section = SFTSection(completion_column="completion", examples=n_sft, trl={**sft_opts, "assistant_only_loss": True})
    grpo = dict(settings["grpo"])
    sft_trainer = run_sft(model, tokenizer, sft_rows, section, out / "sft", seed, grpo["max_completion_length"])
    model = sft_trainer.model
    t_sft = time.perf_counter()

    columns = ("prompt", "answer", "difficulty")
    args = GRPOConfig(
        **cpu_defaults(
            {**grpo, "output_dir": str(out / "grpo"), "seed": seed, "report_to": "none", "save_strategy": "no"}
        )
    )
    trainer = RLVRTrainer(
        model=model,
        args=args,
        plugins={"r1-accuracy": {"weight": 1.0}},
        train_dataset=Dataset.from_list([{k: r[k] for k in columns} for r in rl_rows]),
        eval_dataset=Dataset.from_list([{k: r[k] for k in columns} for r in eval_rows]),
        processing_class=tokenizer,
        environment_factory=CalculatorEnvironment,
    )
    evals = [held_out(trainer)]
    print(f"[eval step 0] {evals[-1]}", flush=True)

    class PeriodicEval(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step % settings["eval_every"] == 0 and state.global_step < args.max_steps:
                evals.append(held_out(trainer))
                print(f"[eval step {state.global_step}] {evals[-1]}", flush=True)

    trainer.add_callback(PeriodicEval())
    t_rl = time.perf_counter()
    trainer.train()
    evals.append(held_out(trainer))
    print(f"[eval step {trainer.state.global_step}] {evals[-1]}", flush=True)
    t_end = time.perf_counter()
    train_log = [
        {k: row[k] for k in ("step", "reward", "tools/call_frequency", "completions/mean_length") if k in row}
        for row in trainer.state.log_history
        if "reward" in row
    ]
    summary = {
        "seed": seed,
        "threads": torch.get_num_threads(),
        "before": evals[0],
        "after": evals[-1],
        "evals": evals,
        "train_log": train_log,
        "sft_final_loss": last_logged_loss(sft_trainer.state.log_history),
        "seconds": {
            "sft": round(t_sft - t0, 1),
            "eval_before": round(t_rl - t_sft, 1),
            "grpo_with_evals": round(t_end - t_rl, 1),
            "total": round(t_end - t0, 1),
        },
        "settings": settings,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def start(cell: dict, args) -> dict:
    folder = Path(args.out) / cell["name"]
    env = {**os.environ, "OMP_NUM_THREADS": str(cell["threads"])}
    if args.jobs > 1:
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    command = [sys.executable, str(Path(__file__).resolve()), "--cell", str(cell["seed"]), "--out", str(folder)]
    log = open(Path(args.out) / f"{cell['name']}.log", "w")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    return {
        **cell,
        "folder": folder,
        "process": process,
        "log": log,
        "t0": time.perf_counter(),
        "load_start": load_average(),
    }


def finish(run: dict, status: int, usage) -> dict:
    run["process"].returncode = status
    run["log"].close()
    cell = {k: run[k] for k in ("name", "seed", "threads")}
    cell.update(
        wall_s=round(time.perf_counter() - run["t0"], 1),
        cpu_s=round(usage.ru_utime + usage.ru_stime, 1),
        load_start=run["load_start"],
        load_end=load_average(),
        exit_status=status,
    )
    summary_path = run["folder"] / "summary.json"
    if status == 0 and summary_path.is_file():
        s = json.loads(summary_path.read_text())
        cell.update(
            before=round(100 * s["before"]["accuracy"], 1),
            after=round(100 * s["after"]["accuracy"], 1),
            gain=round(100 * (s["after"]["accuracy"] - s["before"]["accuracy"]), 1),
            calls_before=s["before"]["tool_calls"],
            calls_after=s["after"]["tool_calls"],
            sft_loss=s["sft_final_loss"],
            seconds=s["seconds"],
        )
    return cell


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--jobs", type=int, default=1, help="cells run side by side (accuracy is unaffected)")
    p.add_argument("--out", default="runs/agentic-grid")
    p.add_argument("--json", help="write the cells and the machine's load here")
    p.add_argument("--cell", type=int, metavar="SEED", help="run one cell in this process, into --out")
    args = p.parse_args(argv)
    if args.cell is not None:
        summary = run_cell(args.cell, Path(args.out))
        print(json.dumps({k: summary[k] for k in ("before", "after", "sft_final_loss", "seconds")}))
        return 0
    Path(args.out).mkdir(parents=True, exist_ok=True)
    pending = [{"name": f"s{s}_t{t}", "seed": s, "threads": t} for t in args.threads for s in args.seeds]
    load_start, running, cells = load_average(), {}, []
    while pending or running:
        while pending and len(running) < args.jobs:
            run = start(pending.pop(0), args)
            running[run["process"].pid] = run
        pid, status, usage = os.wait4(-1, 0)
        if pid in running:
            cell = finish(running.pop(pid), os.waitstatus_to_exitcode(status), usage)
            cells.append(cell)
            print(json.dumps(cell), flush=True)
    cells.sort(key=lambda c: (c["seed"], c["threads"]))
    print(
        "\n| seed | threads | accuracy before | after | gain | tool calls before | after | SFT loss | CPU s | wall s |"
        "\n|---|---|---|---|---|---|---|---|---|---|"
    )
    for c in cells:
        if "gain" not in c:
            print(
                f"| {c['seed']} | {c['threads']} | failed (exit {c['exit_status']}, see {args.out}/{c['name']}.log) |"
            )
            continue
        print(
            f"| {c['seed']} | {c['threads']} | {c['before']:.1f} % | {c['after']:.1f} % | {c['gain']:+.1f} "
            f"| {c['calls_before']:.2f} | {c['calls_after']:.2f} | {c['sft_loss']} | {c['cpu_s']:.0f} "
            f"| {c['wall_s']:.0f} |"
        )
    gains = [c["gain"] for c in cells if "gain" in c]
    held = sum(g >= TARGET_POINTS for g in gains)
    if gains:
        print(
            f"\ngain: min {min(gains):+.1f}, median {statistics.median(gains):+.1f}, max {max(gains):+.1f} points; "
            f"{held} of {len(cells)} cells >= +{TARGET_POINTS:.0f}"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "settings": SETTINGS,
                    "jobs": args.jobs,
                    "machine": machine_note(load_start, load_average()),
                    "cells": cells,
                },
                indent=1,
            )
            + "\n"
        )
    return 0 if gains and held == len(cells) else 1


if __name__ == "__main__":
    sys.exit(main())
