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
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import demo_grid  # noqa: E402

SETTINGS: dict[str, Any] = {
    "task": {"min_digits": 2, "max_digits": 3, "ops": "*", "tool_rate": 0.4, "slip": 0.3},
    "data_seed": 0,
    "n_eval": 400,
    "n_rl": 4000,
    "model": {},  # the demo's tiny Qwen3 as it is (demo.model.DEFAULT_MODEL_CONFIG, as configs/demo.yaml)
    "sft": {
        "examples": 19200,
        "learning_rate": 3.0e-3,
        "per_device_train_batch_size": 32,
        "lr_scheduler_type": "constant_with_warmup",
        "warmup_steps": 0.05,
        "logging_steps": 50,
    },
    "grpo": {
        "max_steps": 80,
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


def held_out(trainer) -> dict[str, float]:
    """Greedy held-out episodes through TRL's evaluate: accuracy and tool calls per episode."""
    from rlvr_plugins.train.evaluation import evaluate_episodes

    result = evaluate_episodes(trainer, "r1-accuracy")
    return {
        "accuracy": round(result["rewards"]["r1-accuracy"], 4),
        "tool_calls": round(result["tool_calls"], 4),
        "step": trainer.state.global_step,
    }


def run_cell(seed: int, out: Path, settings: dict[str, Any] = SETTINGS) -> dict[str, Any]:
    """One run: SFT cold start, greedy held-out eval, GRPO with the calculator, evaluations; a summary dict."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback, set_seed
    from trl import GRPOConfig

    from rlvr_plugins.builtin.calculator import CalculatorTool
    from rlvr_plugins.demo.agentic import agent_train_eval, build_agent_tokenizer
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
        environment_factory=CalculatorTool,
    )
    evals = [held_out(trainer)]
    print(f"[eval step 0] {evals[-1]}", flush=True)

    class PeriodicEval(TrainerCallback):
        """Greedy held-out episodes every ``eval_every`` steps (``evaluate_episodes`` keeps the step's own
        train log)."""

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step % settings["eval_every"] == 0 and state.global_step < args.max_steps:
                evals.append(held_out(trainer))
                print(f"[eval step {state.global_step}] {evals[-1]}", flush=True)
            return control

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
        "eval_before": evals[0],
        "eval_after": evals[-1],
        "evals": evals,
        "train_log": train_log,
        "sft_final_loss": last_logged_loss(sft_trainer.state.log_history),
        "stages": {
            "sft_seconds": round(t_sft - t0, 1),
            "eval_before_seconds": round(t_rl - t_sft, 1),
            "grpo_seconds": round(t_end - t_rl, 1),
            "total_seconds": round(t_end - t0, 1),
        },
        "settings": settings,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def cell_command(cell: dict, folder: Path, args) -> list[str]:
    """One cell: this script with ``--cell``, in a process of its own."""
    return [sys.executable, str(Path(__file__).resolve()), "--cell", str(cell["seed"]), "--out", str(folder)]


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--cell" in argv:
        p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--cell", type=int, metavar="SEED", required=True)
        p.add_argument("--out", required=True)
        args = p.parse_args(argv)
        summary = run_cell(args.cell, Path(args.out))
        print(json.dumps({k: summary[k] for k in ("eval_before", "eval_after", "sft_final_loss", "stages")}))
        return 0
    return demo_grid.main(
        ["--config", "benchmarks/agentic_grid.py", "--seeds", "0", "1", "2", "--out", "runs/agentic-grid", *argv],
        cell_command=cell_command,
        description=__doc__ or "",
    )


if __name__ == "__main__":
    sys.exit(main())
