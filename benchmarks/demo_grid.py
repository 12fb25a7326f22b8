"""The demo's robustness table: ``rlvr train configs/demo.yaml`` for every seed × torch thread count.

A different thread count changes the order of float reductions, which stands in for another
CPU (issue 15). Each cell is one full run (SFT cold start, greedy eval, GRPO, greedy eval) in
its own folder; the table gives held-out accuracy before and after GRPO, the gain, the SFT's
last logged loss, and the run's wall and CPU seconds (user + sys of the run's process tree,
from ``wait4``). Accuracy does not depend on the machine's load (same seed and thread count,
same numbers); wall time does, so cells run ``--jobs`` at a time report CPU time as the cost
and wall time only as measured under that load.

    python benchmarks/demo_grid.py [--seeds 0 1 2 3 4] [--threads 1 2] [--jobs 2]
        [--out runs/demo-grid] [--json FILE] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import load_average, machine_note  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TARGET_POINTS = 10.0  # issue 15: GRPO adds at least this many points for every cell


def rlvr_command() -> list[str]:
    found = shutil.which("rlvr", path=str(Path(sys.executable).parent)) or shutil.which("rlvr")
    return [found] if found else [sys.executable, "-m", "rlvr_plugins.cli"]


def held_out_points(summary: dict) -> dict:
    """``{before, after, gain}``: a run's held-out accuracy before and after GRPO, in points (``summary.json``)."""
    before, after = summary["eval_before"]["accuracy"], summary["eval_after"]["accuracy"]
    return {"before": round(100 * before, 1), "after": round(100 * after, 1), "gain": round(100 * (after - before), 1)}


def train_command(cell: dict, folder: Path, args) -> list[str]:
    """``rlvr train`` of the config for one cell (its seed, into ``folder``)."""
    return [
        *rlvr_command(),
        "train",
        args.config,
        "--overwrite",
        "--set",
        f"seed={cell['seed']}",
        "--set",
        f"output_dir={folder}",
        *[part for s in args.set for part in ("--set", s)],
    ]


def start(cell: dict, args, cell_command=train_command) -> dict:
    folder = Path(args.out) / cell["name"]
    env = {**os.environ, "OMP_NUM_THREADS": str(cell["threads"])}
    if args.jobs > 1:  # idle OpenMP threads yield instead of spinning on a shared box (numerics unchanged)
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    command = cell_command(cell, folder, args)
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
    run["process"].returncode = status  # reaped by wait4 (for its rusage), not by Popen
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
        summary = json.loads(summary_path.read_text())
        cell.update(
            **held_out_points(summary),
            sft_loss=summary.get("sft_final_loss"),
            stages=summary.get("stages"),
        )
        if "tool_calls" in summary["eval_before"]:
            cell.update(
                calls_before=summary["eval_before"]["tool_calls"], calls_after=summary["eval_after"]["tool_calls"]
            )
    return cell


def main(argv=None, *, cell_command=train_command, description: str = __doc__ or "") -> int:
    """The grid; ``cell_command(cell, folder, args)``: the command line of one cell (default: ``rlvr train``)."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/demo.yaml")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--jobs", type=int, default=1, help="cells run side by side (accuracy is unaffected)")
    p.add_argument("--out", default="runs/demo-grid")
    p.add_argument("--json", help="write the cells and the machine's load here")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed on to rlvr train")
    args = p.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    pending = [{"name": f"s{s}_t{t}", "seed": s, "threads": t} for t in args.threads for s in args.seeds]
    load_start, running, cells = load_average(), {}, []
    while pending or running:
        while pending and len(running) < args.jobs:
            run = start(pending.pop(0), args, cell_command)
            running[run["process"].pid] = run
        pid, status, usage = os.wait4(-1, 0)
        if pid in running:
            cell = finish(running.pop(pid), os.waitstatus_to_exitcode(status), usage)
            cells.append(cell)
            print(json.dumps(cell), flush=True)
    cells.sort(key=lambda c: (c["seed"], c["threads"]))
    tools = any("calls_before" in c for c in cells)
    calls_head = " tool calls before | after |" if tools else ""
    print(
        f"\n| seed | threads | before | after | gain |{calls_head} SFT loss | CPU s | wall s |"
        f"\n|---|---|---|---|---|{'---|---|' if tools else ''}---|---|---|"
    )
    for c in cells:
        if "gain" not in c:
            print(
                f"| {c['seed']} | {c['threads']} | failed (exit {c['exit_status']}, see {args.out}/{c['name']}.log) |"
            )
            continue
        loss = "" if c["sft_loss"] is None else f"{c['sft_loss']:.3f}"
        calls = f" {c['calls_before']:.2f} | {c['calls_after']:.2f} |" if tools else ""
        print(
            f"| {c['seed']} | {c['threads']} | {c['before']:.1f} % | {c['after']:.1f} % | {c['gain']:+.1f} |{calls} "
            f"{loss} | {c['cpu_s']:.0f} | {c['wall_s']:.0f} |"
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
                    "config": args.config,
                    "set": args.set,
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
