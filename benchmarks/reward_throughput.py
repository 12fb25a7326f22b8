"""Accuracy-reward throughput: ``r1-accuracy`` through the reward engine vs ``trl.rewards.accuracy_reward``.

Same 1,024 completions (128 prompts × 8) for both, in one run, interleaved repeats.
The problems and final answers are real (MATH-style answers from the shared Minerva and
OlympiadBench sets when ``../shared/data`` exists, else GSM8K-like numbers); each prompt
gets 8 completions: correct in several equivalent forms, and wrong ones.

    python benchmarks/reward_throughput.py [--repeats 3] [--workers 2] [--json out.json]

Verdicts are compared on the completions both can decide (TRL returns None when it cannot
parse the gold answer; ours masks a completion on timeout). Each repeat starts fresh
worker processes for ours and a fresh interpreter for TRL's function, each warmed on one
unrelated item outside the timing (imports done, sympy's caches cold), so neither side
reuses anything from an earlier repeat; within a repeat, each of our workers parses a
distinct answer once and verifies a (reference, parsed answer) pair once, as in training.
The JSON has the per-repeat times and ratios as well as the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchkit import load_average, machine_note  # noqa: E402

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]


def gold_answers(n: int, seed: int) -> list[str]:
    data = Path(os.environ.get("RLVR_SHARED_DATA", ROOT.parent / "shared" / "data"))
    answers = []
    if (data / "eval" / "olympiadbench.jsonl").exists():
        for line in (data / "eval" / "olympiadbench.jsonl").read_text().splitlines():
            row = json.loads(line)
            final = (row.get("final_answer") or [""])[0].strip()
            if final.startswith("$") and final.endswith("$") and final.count("$") == 2:
                answers.append(final.strip("$ "))
        from rlvr_r1.answers import last_boxed

        for line in (data / "eval" / "minerva_math.jsonl").read_text().splitlines():
            boxed = last_boxed(json.loads(line)["solution"])
            if boxed:
                answers.append(boxed)
    rng = random.Random(seed)
    if len(answers) < n:
        answers += [str(rng.randint(1, 10**4)) for _ in range(n - len(answers))]
    rng.shuffle(answers)
    return answers[:n]


def completions_for(answer: str, other: str, rng: random.Random) -> list[str]:
    think = "<think>Let me work through the problem step by step.</think>"
    forms = [
        f"{think}<answer>\\boxed{{{answer}}}</answer>",
        f"{think}<answer>The answer is $\\boxed{{{answer}}}$.</answer>",
        f"{think}<answer>${answer}$</answer>",
        f"{think}<answer>\\boxed{{{other}}}</answer>",
        f"{think}<answer>$\\boxed{{{other}}}$</answer>",
        f"{think}<answer>\\boxed{{{answer}}}</answer>",
        f"{think}<answer>I think it is $\\boxed{{{other}}}$</answer>",
        f"{think}<answer>\\boxed{{{answer}}}</answer>",
    ]
    rng.shuffle(forms)
    return forms


def build(prompts: int, per_prompt: int, seed: int):
    rng = random.Random(seed)
    golds = gold_answers(prompts, seed)
    rows = []
    for i, gold in enumerate(golds):
        other = golds[(i + 1) % len(golds)]
        for completion in completions_for(gold, other, rng)[:per_prompt]:
            rows.append({"completion": completion, "gold": gold})
    return rows


def run_trl(rows):
    from trl.rewards import accuracy_reward

    completions = [[{"role": "assistant", "content": r["completion"]}] for r in rows]
    solutions = [f"${r['gold']}$" for r in rows]
    t = time.perf_counter()
    values = accuracy_reward(completions, solutions)
    return time.perf_counter() - t, values


def run_trl_fresh(args) -> tuple[float, list]:
    """TRL's function in a fresh interpreter (cold sympy caches, like our fresh workers), warmed on one item."""
    import subprocess
    import sys

    cmd = [
        sys.executable,
        __file__,
        "--trl-once",
        "--prompts",
        str(args.prompts),
        "--per-prompt",
        str(args.per_prompt),
        "--seed",
        str(args.seed),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return result["seconds"], result["values"]


def trl_once(args) -> None:
    import logging

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    rows = build(args.prompts, args.per_prompt, args.seed)
    run_trl([{"completion": "<answer>\\boxed{\\frac{1}{2}}</answer>", "gold": "\\frac{1}{3}"}])
    seconds, values = run_trl(rows)
    print(json.dumps({"seconds": seconds, "values": values}))


def run_ours(rows, engines, reward):
    from rlvr_plugins.rewards import score_items

    items = score_items(["q"] * len(rows), [r["completion"] for r in rows], [{"answer": r["gold"]} for r in rows])
    t = time.perf_counter()
    result = engines.score(reward, items)
    values = [None if f else v for v, f in zip(result.values, result.failed)]
    return time.perf_counter() - t, values


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", type=int, default=128)
    p.add_argument("--per-prompt", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json")
    p.add_argument("--trl-once", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.trl_once:
        return trl_once(args)

    import logging

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    from rlvr_plugins.manager import build_plugin_set
    from rlvr_plugins.rewards import Engines

    load_start = load_average()
    rows = build(args.prompts, args.per_prompt, args.seed)
    reward = build_plugin_set({"r1-accuracy": {"fallback": None}}).reward_functions()[0][1]
    warm_up = [{"completion": "<answer>\\boxed{\\frac{1}{2}}</answer>", "gold": "\\frac{1}{3}"}] * (2 * args.workers)
    ours_t, trl_t, starts = [], [], []
    for _ in range(args.repeats):
        engines = Engines(num_workers=args.workers, timeout_s=10.0)  # fresh workers: no cached verdicts
        start, _ = run_ours(warm_up, engines, reward)  # start the workers, import math-verify in them
        starts.append(start)
        t, ours = run_ours(rows, engines, reward)
        ours_t.append(t)
        engines.close()
        t, theirs = run_trl_fresh(args)
        trl_t.append(t)
    cold = statistics.median(starts)
    both = [(a, b) for a, b in zip(ours, theirs) if a is not None and b is not None]
    agree = sum(float(a) == float(b) for a, b in both)
    disagreements = [
        (rows[i]["completion"], rows[i]["gold"], ours[i], theirs[i])
        for i in range(len(rows))
        if ours[i] is not None and theirs[i] is not None and float(ours[i]) != float(theirs[i])
    ]
    result = {
        "completions": len(rows),
        "workers": args.workers,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load": machine_note(load_start, load_average()),
        "ours_seconds_median": statistics.median(ours_t),
        "trl_seconds_median": statistics.median(trl_t),
        "speedup": statistics.median(trl_t) / statistics.median(ours_t),
        "ours_seconds": ours_t,
        "trl_seconds": trl_t,
        "speedup_per_repeat": [b / a for a, b in zip(ours_t, trl_t)],
        "worker_start_seconds": cold,
        "decided_by_both": len(both),
        "identical_verdicts": agree,
        "undecided_ours": sum(v is None for v in ours),
        "undecided_trl": sum(v is None for v in theirs),
        "disagreements_sample": disagreements[:5],
    }
    refused = speedup_refusal(len(rows), len(both), agree)
    if refused:
        for key in ("speedup", "speedup_per_repeat"):
            result.pop(key)
        result["refused"] = refused
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return result


def speedup_refusal(completions: int, decided_by_both: int, identical: int) -> str | None:
    """Why no speed-up may be printed (the two sides did not reach the same verdict on every
    completion: one timed out or they disagree, so they did different work), or ``None``."""
    if decided_by_both == identical == completions:
        return None
    return (
        f"different work, no speed-up: {completions - decided_by_both} of {completions} completions undecided "
        f"by one side, {decided_by_both - identical} verdicts differ"
    )


if __name__ == "__main__":
    main()
