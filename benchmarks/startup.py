"""Start-up: the wall time of the fast commands as a ratio to a bare ``python -c pass``, quiet and under load.

The commands (issue 26, item 6): ``rlvr plugins``, ``rlvr train CONFIG --check`` of a valid config and
``rlvr --help``. Each repeat starts every command once in a fresh process, in a rotated order, beside a
``python -c pass`` of the same interpreter; the ratio of a command is the median of its per-repeat ratios
to that repeat's bare start, with a 95 % bootstrap interval (``benchkit.paired_ratio``), and its wall time
the median with the range, beside its CPU time (user + system, with the processes it waited for: on a quiet
machine a one-process command's wall time is about its CPU time). The loaded condition runs the same
repeats while ``--burners`` processes (default: one per core) spin on the CPU. Both conditions run in one
invocation, quiet first.

    python benchmarks/startup.py [--repeats 7] [--config configs/demo.yaml] [--burners N] [--json FILE] [--quick]

Goal (issue 26): ``rlvr plugins`` and ``--check`` under 1.5 s on a quiet 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import load_average, machine_note, paired_ratio  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GOAL_S = 1.5
GOAL_COMMANDS = ("plugins", "check")


def rlvr_command() -> list[str]:
    """The ``rlvr`` console script beside this interpreter, else ``python -m rlvr_plugins.cli``."""
    script = Path(sys.executable).with_name("rlvr")
    return [str(script)] if script.exists() else [sys.executable, "-m", "rlvr_plugins.cli"]


def commands(config: str, out: str) -> dict[str, list[str]]:
    rlvr = rlvr_command()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "plugins": [*rlvr, "plugins"],
        "check": [*rlvr, "train", config, "--check", "--set", f"output_dir={out}"],
        "help": [*rlvr, "--help"],
    }


def timed(argv: list[str]) -> tuple[float, float]:
    """``(wall, cpu)`` seconds of ``argv`` from start to exit; ``cpu`` is user + system time of the process and of
    every process it waited for (the reward engine's workers). A failing command stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def burn() -> None:
    while True:
        pass


def measure(cmds: dict[str, list[str]], repeats: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """``(wall, cpu)`` seconds per command over ``repeats`` rounds; round ``r`` starts the commands rotated by
    ``r`` (each goes first as often)."""
    names = list(cmds)
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            w, c = timed(cmds[name])
            wall[name].append(w)
            cpu[name].append(c)
    return wall, cpu


def summary(times: dict[str, list[float]], cpu: dict[str, list[float]], base: str) -> dict[str, dict]:
    out = {}
    for name, values in times.items():
        row = {
            "wall_s_median": round(statistics.median(values), 3),
            "wall_s_range": [round(min(values), 3), round(max(values), 3)],
            "wall_s": [round(v, 6) for v in values],
            "cpu_s_median": round(statistics.median(cpu[name]), 3),
            "cpu_s_range": [round(min(cpu[name]), 3), round(max(cpu[name]), 3)],
        }
        if name != base:
            ratio = paired_ratio(values, times[base])
            row["ratio_to_bare_python"] = {
                "median": round(ratio["median"], 2),
                "ci95": [round(x, 2) for x in ratio["ci95"]],
            }
        out[name] = row
    return out


def run_condition(cmds: dict[str, list[str]], repeats: int, burners: int) -> dict:
    procs = [multiprocessing.Process(target=burn, daemon=True) for _ in range(burners)]
    for p in procs:
        p.start()
    load_start = load_average()
    try:
        timed(cmds["python -c pass"])  # warm the file cache before the timed rounds
        times, cpu = measure(cmds, repeats)
    finally:
        for p in procs:
            p.terminate()
            p.join()
    return {
        "burners": burners,
        "machine": machine_note(load_start, load_average()),
        "commands": summary(times, cpu, "python -c pass"),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--config", default="configs/demo.yaml", help="a valid config for rlvr train --check")
    p.add_argument("--burners", type=int, default=os.cpu_count() or 1, help="CPU-burning processes when loaded")
    p.add_argument("--quick", action="store_true", help="2 repeats, quiet only (smoke test)")
    p.add_argument("--json")
    args = p.parse_args()
    repeats = 2 if args.quick else args.repeats
    with tempfile.TemporaryDirectory() as tmp:
        cmds = commands(args.config, str(Path(tmp) / "run"))
        result = {
            "benchmark": "startup",
            "python": platform.python_version(),
            "repeats": repeats,
            "config": args.config,
            "quiet": run_condition(cmds, repeats, 0),
        }
        if not args.quick:
            result["loaded"] = run_condition(cmds, repeats, args.burners)
    quiet = result["quiet"]["commands"]
    result["goal"] = {
        "seconds": GOAL_S,
        "met_quiet": {name: quiet[name]["wall_s_median"] < GOAL_S for name in GOAL_COMMANDS},
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
