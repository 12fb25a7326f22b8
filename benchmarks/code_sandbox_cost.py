"""Sandbox cost per trivial program: ``code-tests`` on N distinct trivial stdin programs
through the reward engine (the path ``rlvr score`` takes, without the model and torch).

    python benchmarks/code_sandbox_cost.py [--programs 201] [--workers 1 2] [--isolation auto] [--python /usr/bin/python3]

Prints, per worker count, the wall time for all programs and the time per program. Each
program is distinct (``print(int(input()) + k)``), so nothing is cached between them.
"""

from __future__ import annotations

import argparse
import json
import time

from rlvr_code.plugins import CodeTestsOptions, CodeTestsScorer
from rlvr_plugins.engine import RewardEngine

FENCE = "```"


def items(n: int) -> list[dict]:
    return [{"prompt": "p", "completion": f"{FENCE}python\nprint(int(input()) + {k})\n{FENCE}",
             "example": {"tests": [{"input": "1\n", "output": f"{1 + k}\n"}]}} for k in range(n)]


def measure(n: int, workers: int, isolation: str, python: str = "") -> dict:
    scorer = CodeTestsScorer(CodeTestsOptions(isolation=isolation, python=python))
    batch = items(n)
    with RewardEngine(num_workers=workers, timeout_s=30.0) as engine:
        engine.score("code-tests", scorer, batch[:workers])  # warm: workers started, isolation probed
        start = time.monotonic()
        result = engine.score("code-tests", scorer, batch)
        wall = time.monotonic() - start
    assert list(result.values) == [1.0] * n, result
    return {"workers": workers, "programs": n, "wall_s": round(wall, 3), "ms_per_program": round(1000 * wall / n, 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--programs", type=int, default=201)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--isolation", default="auto")
    parser.add_argument("--python", default="", help="interpreter (basic mode as root: one nobody can run)")
    args = parser.parse_args()
    for workers in args.workers:
        print(json.dumps(measure(args.programs, workers, args.isolation, args.python)))


if __name__ == "__main__":
    main()
