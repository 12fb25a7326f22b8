"""The estimator comparison of docs/comparison.md: GRPO from one SFT start, one run per estimator × seed.

Every run is ``rlvr train configs/homework/estimators.yaml`` (the demo's GRPO stage from the model
of ``rlvr sft configs/homework/sft.yaml``) with one estimator enabled, so the runs differ in the
estimator and the seed only (``dr-grpo`` also brings its constant-normalised loss, which it requires).
Runs go one after another, seed by seed (every estimator at seed 0 first), so a grid cut short still
compares all estimators at the seeds it finished. The JSON is rewritten after every run.

    python benchmarks/estimator_grid.py [--estimators grpo rloo ...] [--seeds 0 1 2]
        [--out runs/estimator-grid] [--json benchmarks/results/estimator_grid.json] [--set KEY=VALUE ...]
    python benchmarks/estimator_grid.py --table     # the table of the runs already in --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import load_average, machine_note  # noqa: E402
from demo_grid import held_out_points, rlvr_command  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ESTIMATORS = ["grpo", "rloo", "dr-grpo", "reinforce++", "reinforce++-baseline", "opo", "gpg", "pass-at-k"]
OWN_LOSS = {"dr-grpo": "trainer.loss_type="}  # plugins that set TRL's loss_type themselves: the base's is removed


def train_command(estimator: str, seed: int, folder: Path, args) -> list[str]:
    """``rlvr train`` of the base config with ``estimator`` enabled, at ``seed``, into ``folder``."""
    sets = [f"plugins.{estimator}={{}}", f"seed={seed}", f"output_dir={folder}", *args.set]
    if estimator in OWN_LOSS:
        sets.append(OWN_LOSS[estimator])
    return [*rlvr_command(), "train", args.config, "--overwrite", *[p for s in sets for p in ("--set", s)]]


def run_one(estimator: str, seed: int, args) -> dict:
    """One run, its held-out accuracy before and after GRPO, and its CPU seconds (``wait4``)."""
    folder = Path(args.out) / f"{estimator}_s{seed}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    started, load_start = time.perf_counter(), load_average()
    with open(Path(args.out) / f"{estimator}_s{seed}.log", "w") as log:
        process = subprocess.Popen(
            train_command(estimator, seed, folder, args), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    cell = {
        "estimator": estimator,
        "seed": seed,
        "folder": str(folder),
        "exit_status": process.returncode,
        "wall_s": round(time.perf_counter() - started, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "load_start": load_start,
        "load_end": load_average(),
    }
    summary_path = folder / "summary.json"
    if process.returncode == 0 and summary_path.is_file():
        summary = json.loads(summary_path.read_text())
        cell.update(**held_out_points(summary), grpo_seconds=summary.get("stages", {}).get("grpo_seconds"))
    return cell


def table(cells: list[dict]) -> str:
    """Markdown: per estimator, held-out after GRPO and the gain, mean and (min–max) over its seeds."""
    lines = ["| estimator | seeds | held-out after, mean (min–max) | gain, mean (min–max) |", "|---|---|---|---|"]
    for estimator in dict.fromkeys(c["estimator"] for c in cells):
        done = [c for c in cells if c["estimator"] == estimator and "gain" in c]
        if not done:
            lines.append(f"| `{estimator}` | none | every run failed (see its log) | |")
            continue
        after, gain = [c["after"] for c in done], [c["gain"] for c in done]
        lines.append(
            f"| `{estimator}` | {', '.join(str(c['seed']) for c in done)} "
            f"| {statistics.mean(after):.1f} % ({min(after):.1f}–{max(after):.1f}) "
            f"| {statistics.mean(gain):+.1f} ({min(gain):+.1f} to {max(gain):+.1f}) |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/homework/estimators.yaml")
    p.add_argument("--estimators", nargs="+", default=ESTIMATORS)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--out", default="runs/estimator-grid")
    p.add_argument("--json", default="benchmarks/results/estimator_grid.json")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed on to rlvr train")
    p.add_argument("--table", action="store_true", help="print the table of the runs in --json and stop (no runs)")
    args = p.parse_args(argv)
    if args.table:
        print(table(json.loads(Path(args.json).read_text())["cells"]))
        return 0
    Path(args.out).mkdir(parents=True, exist_ok=True)
    load_start, cells = load_average(), []
    for seed in args.seeds:
        for estimator in args.estimators:
            cells.append(run_one(estimator, seed, args))
            print(json.dumps(cells[-1]), flush=True)
            record = {
                "config": args.config,
                "set": args.set,
                "threads": 1,
                "machine": machine_note(load_start, load_average()),
                "cells": cells,
            }
            Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    print("\n" + table(cells))
    return 0 if all("gain" in c for c in cells) else 1


if __name__ == "__main__":
    sys.exit(main())
