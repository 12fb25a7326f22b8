"""Sandbox cost: ``code-tests`` on stdin programs through the reward engine (the path
``rlvr score`` takes, without the model and torch), beside a bare interpreter start measured
in the same run.

The matrix: program kind (``trivial``: ``print(int(input()) + k)``; ``imports``: the same
after importing a dozen standard-library modules; ``cpu``: the same after a 200,000-step
loop), 1 or N test cases per completion, 1 or 2 reward workers, and distinct programs (each
adds its own ``k``, so no cache can answer) or identical ones (one program, one input).

Per configuration: wall time for all programs, ms per program and per sandboxed run (one run
per test case), programs per second. Split of one sandboxed run (1 worker, one case), from
rounds that interleave a bare ``python -I -S -B -c pass`` (the sandbox's flags), the bare
program run that way, and the program through the engine and the sandbox: interpreter start,
program = bare program minus bare start, sandbox set-up = sandboxed minus bare program.
``python -c pass`` (with ``site``) is printed beside it for reference.

    python benchmarks/code_sandbox_cost.py [--programs 40] [--cases 4] [--json FILE] [--quick]
        [--isolation auto] [--python /usr/bin/python3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import load_average, machine_note  # noqa: E402

FENCE = "```"
IMPORTS = (
    "import argparse, collections, dataclasses, datetime, decimal, fractions, functools, heapq, itertools, "
    "json, pathlib, re, statistics, typing\n"
)
SANDBOX_FLAGS = ["-I", "-S", "-B"]  # how the sandbox starts the interpreter (rlvr_code.sandbox.run_python)
PREAMBLE = {"trivial": "", "imports": IMPORTS, "cpu": "s = 0\nfor i in range(200000):\n    s += i\n"}


def program(kind: str, k: int) -> str:
    return f"{PREAMBLE[kind]}print(int(input()) + {k})\n"


def items(kind: str, n: int, cases: int, distinct: bool) -> list[dict]:
    """``n`` completions of ``kind``, each with ``cases`` stdin tests that its program passes."""
    out = []
    for j in range(n):
        k = j if distinct else 0
        tests = [{"input": f"{c}\n", "output": f"{c + k}\n"} for c in range(1, cases + 1)]
        out.append(
            {"prompt": "p", "completion": f"{FENCE}python\n{program(kind, k)}{FENCE}", "example": {"tests": tests}}
        )
    return out


def bare_ms(interpreter: str, args: list[str], stdin: str, repeats: int) -> float:
    """Median wall ms of ``interpreter *args`` run directly (no sandbox) with ``stdin``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([interpreter, *args], input=stdin, capture_output=True, text=True, check=True)
        times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


def measure(engine, scorer, kind: str, n: int, cases: int, distinct: bool, workers: int) -> dict:
    batch = items(kind, n, cases, distinct)
    start = time.perf_counter()
    result = engine.score("code-tests", scorer, batch)
    wall = time.perf_counter() - start
    if list(result.values) != [1.0] * n:
        raise SystemExit(
            f"{kind}, {cases} cases: not every program passed ({list(result.values)}); "
            "the figures would measure failures"
        )
    return {
        "kind": kind,
        "cases": cases,
        "workers": workers,
        "distinct": distinct,
        "programs": n,
        "wall_s": round(wall, 3),
        "ms_per_program": round(1000 * wall / n, 2),
        "ms_per_run": round(1000 * wall / (n * cases), 2),
        "programs_per_s": round(n / wall, 1),
    }


def split(kind: str, start_ms: list[float], bare_ms_: list[float], sandboxed_ms: list[float]) -> dict:
    """One sandboxed run of ``kind`` split into interpreter start, the program and the sandbox's
    set-up (with the engine's round trip), from medians of interleaved runs: a bare start, the
    bare program (start included) and the program through the engine and the sandbox."""
    start, whole, sandboxed = (statistics.median(x) for x in (start_ms, bare_ms_, sandboxed_ms))
    return {
        "kind": kind,
        "sandboxed_ms": round(sandboxed, 2),
        "interpreter_start_ms": round(start, 2),
        "program_ms": round(whole - start, 2),
        "sandbox_setup_ms": round(sandboxed - whole, 2),
    }


def measure_split(engine, scorer, interpreter: str, kind: str, repeats: int) -> dict:
    """``split`` from ``repeats`` rounds of: bare start, bare program, sandboxed program (1 worker,
    one completion, one case, a new ``k`` each round), interleaved so load hits all three alike."""
    start_ms, bare, sandboxed = [], [], []
    for r in range(repeats):
        start_ms.append(bare_ms(interpreter, [*SANDBOX_FLAGS, "-c", "pass"], "", 1))
        bare.append(bare_ms(interpreter, [*SANDBOX_FLAGS, "-c", program(kind, 1000 + r)], "1\n", 1))
        item = items(kind, 1, 1, True)[0]
        item = {
            **item,
            "completion": f"{FENCE}python\n{program(kind, 1000 + r)}{FENCE}",
            "example": {"tests": [{"input": "1\n", "output": f"{1001 + r}\n"}]},
        }
        t = time.perf_counter()
        result = engine.score("code-tests", scorer, [item])
        sandboxed.append(1000 * (time.perf_counter() - t))
        if list(result.values) != [1.0]:
            raise SystemExit(f"{kind}: the split's program failed ({list(result.values)})")
    return split(kind, start_ms, bare, sandboxed)


def markdown(rows: list[dict], parts: list[dict]) -> str:
    lines = [
        "| program | cases | workers | programs | ms per program | ms per run | programs/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        same = "distinct" if r["distinct"] else "identical"
        lines.append(
            f"| {r['kind']} | {r['cases']} | {r['workers']} | {same} | "
            f"{r['ms_per_program']} | {r['ms_per_run']} | {r['programs_per_s']} |"
        )
    lines += [
        "",
        "| program (1 worker, 1 case, interleaved rounds) | sandboxed run ms | interpreter start | program | "
        "sandbox set-up and engine round trip |",
        "|---|---|---|---|---|",
    ]
    for p in parts:
        lines.append(
            f"| {p['kind']} | {p['sandboxed_ms']} | {p['interpreter_start_ms']} | {p['program_ms']} | "
            f"{p['sandbox_setup_ms']} |"
        )
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", type=int, default=40, help="completions per configuration with 1 case")
    parser.add_argument("--cases", type=int, default=4, help="N, the larger number of test cases per completion")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--kinds", nargs="+", default=list(PREAMBLE), choices=list(PREAMBLE))
    parser.add_argument("--isolation", default="auto")
    parser.add_argument("--python", default="", help="interpreter (basic mode as root: one nobody can run)")
    parser.add_argument("--quick", action="store_true", help="4 programs, trivial only, 2 cases (smoke test)")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if args.quick:
        args.programs, args.cases, args.kinds = 4, 2, ["trivial"]

    from rlvr_code.plugins import CodeTestsOptions, CodeTestsScorer
    from rlvr_code.sandbox import _interpreter, run_python
    from rlvr_plugins.engine import RewardEngine

    load_start = load_average()
    interpreter = args.python or _interpreter()
    isolation = run_python("print(1)", isolation=args.isolation, interpreter=args.python or None).isolation
    scorer = CodeTestsScorer(CodeTestsOptions(isolation=args.isolation, python=args.python))
    repeats = 5 if args.quick else 20
    rows, parts = [], []
    for workers in args.workers:
        with RewardEngine(num_workers=workers, timeout_s=60.0) as engine:
            engine.score("code-tests", scorer, items("trivial", workers, 1, True))  # workers started and warm
            if workers == 1:
                parts = [measure_split(engine, scorer, interpreter, kind, repeats) for kind in args.kinds]
            for kind in args.kinds:
                for cases, n in ((1, args.programs), (args.cases, max(2, args.programs // args.cases))):
                    for distinct in (True, False):
                        rows.append(measure(engine, scorer, kind, n, cases, distinct, workers))
                        print(json.dumps(rows[-1]), flush=True)
    with_site = bare_ms(interpreter, ["-c", "pass"], "", repeats)
    result = {
        "machine": machine_note(load_start, load_average()),
        "interpreter": interpreter,
        "isolation": isolation,
        "bare_start_with_site_ms": round(with_site, 2),
        "rows": rows,
        "split": parts,
    }
    print(markdown(rows, parts))
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
