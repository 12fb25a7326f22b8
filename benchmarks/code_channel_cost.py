"""The assert-test channel's own cost on the program's side (issue 21, item 3).

An assert-style test runs the program in a sandbox of its own and calls its functions over a
pipe (rlvr_code.calls); decoding each call and encoding each answer runs in the program's
process, so it counts in the program's CPU time. This measures that cost per call and per
megabyte (program CPU time from the keeper's wait4, median of ROUNDS), so that the scorer can
budget it apart from ``time_limit_s`` (``CHANNEL_S_PER_CALL``, ``CHANNEL_S_PER_MB``).

    python benchmarks/code_channel_cost.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

from rlvr_code.cases import load_assert_tests
from rlvr_code.plugins import CodeTestsOptions, CodeTestsScorer, channel_traffic

ROUNDS = 5
PROGRAM = "def echo(x):\n    return x\n"
CASES = {
    "0 calls": "assert echo is not None",
    "10,000 calls": "for i in range(10_000):\n    assert echo(i) == i",
    "1 call, 16 MB str": "s = 'x' * (16 << 20)\nassert echo(s) == s",
    "1 call, 10^6 ints": "xs = list(range(10**6))\nassert echo(xs) == xs",
}


def measure(scorer: CodeTestsScorer, test: str) -> dict:
    tests = load_assert_tests(test, entry_point=None, setup=None)
    cpu, traffic = [], (0, 0)
    for _ in range(ROUNDS):
        verdict, served = scorer.run_pair(PROGRAM, tests)
        assert verdict.ok and served is not None, verdict.stderr[-500:]
        cpu.append(served.cpu_s)
        traffic = channel_traffic(verdict.stderr)
    return {"program_cpu_s": statistics.median(cpu), "calls": traffic[0], "bytes": traffic[1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json")
    parser.add_argument("--isolation", default="auto")
    parser.add_argument("--python", default="")
    args = parser.parse_args()
    scorer = CodeTestsScorer(
        CodeTestsOptions(time_limit_s=30.0, total_time_s=60.0, isolation=args.isolation, python=args.python)
    )
    rows = {name: measure(scorer, test) for name, test in CASES.items()}
    base = rows["0 calls"]["program_cpu_s"]
    calls = rows["10,000 calls"]
    per_call = (calls["program_cpu_s"] - base) / calls["calls"]
    big = rows["1 call, 16 MB str"]
    per_mb = (big["program_cpu_s"] - base) / (big["bytes"] / (1 << 20))
    ints = rows["1 call, 10^6 ints"]
    per_mb_ints = (ints["program_cpu_s"] - base) / (ints["bytes"] / (1 << 20))
    out = {
        "rows": rows,
        "per_call_s": per_call,
        "per_mb_str_s": per_mb,
        "per_mb_ints_s": per_mb_ints,
        "loadavg": os.getloadavg(),
    }
    print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
