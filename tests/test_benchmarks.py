"""The benchmark scripts' ``--quick`` modes: they run, and their JSON is complete and self-consistent.

Timings are never asserted (they depend on the machine's load). Both quick modes together
take well over a minute on two cores, so both are marked ``slow``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run_benchmark(script: str, *args: str) -> None:
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "RLVR_THREADS": os.environ.get("RLVR_THREADS", "1")}
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), "--quick", *args],
                            capture_output=True, text=True, cwd=REPO, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow
def test_sample_efficiency_quick_counts_rollouts_consistently(tmp_path):
    out = tmp_path / "se.json"
    run_benchmark("sample_efficiency.py", "--json", str(out))
    result = json.loads(out.read_text())
    p = result["params"]
    assert result["quick"] is True
    runs = result["runs"]
    assert sorted((r["seed"], r["arm"]) for r in runs) == sorted(
        (s, a) for s in p["seeds"] for a in ("uniform", "curriculum"))
    for r in runs:
        per_step = r["completions_per_step"]
        assert per_step == 64  # the demo's 8 prompts x 8 completions
        assert r["rollouts_run"] == r["steps_run"] * per_step
        assert r["steps_run"] <= p["budget_steps"]
        for point in r["curve"]:
            assert point["rollouts"] == point["step"] * per_step
            assert 0.0 <= point["accuracy"] <= 1.0
        evaluated = [c["step"] for c in r["curve"] if c["step"] > 0]
        assert evaluated == sorted(set(range(p["eval_every"], r["steps_run"] + 1, p["eval_every"]))
                                   | ({r["steps_run"]} if r["steps_run"] == p["budget_steps"] else set()))
        if r["censored"]:
            assert r["rollouts_to_target"] == p["budget_steps"] * per_step
            assert all(c["accuracy"] < p["target"] for c in r["curve"])
        else:
            first = next(c for c in r["curve"] if c["accuracy"] >= p["target"])
            assert r["rollouts_to_target"] == first["rollouts"] and r["steps_run"] == first["step"]
        assert sum(r["prompts_drawn_by_digits"].values()) == pytest.approx(1.0)
        assert 0.0 <= r["zero_variance_share"] <= 1.0
    by = {(r["arm"], r["seed"]): r["rollouts_to_target"] for r in runs}
    ratios = {int(s): v for s, v in result["ratio_by_seed"].items()}
    for s in p["seeds"]:
        assert ratios[s] == pytest.approx(by["curriculum", s] / by["uniform", s])
    assert result["median_ratio"] == pytest.approx(statistics.median(ratios.values()))
    assert result["min_ratio"] <= result["median_ratio"] <= result["max_ratio"]
    assert result["target_met"] == (result["median_ratio"] <= 0.75)
    assert result["any_censored"] == any(r["censored"] for r in runs)


@pytest.mark.slow
def test_scaling_quick_table_covers_every_setting(tmp_path):
    out, png = tmp_path / "scaling.json", tmp_path / "scaling.png"
    run_benchmark("scaling.py", "--json", str(out), "--plot", str(png))
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert result["quick"] is True
    assert [(r["sweep"], r[r["sweep"]]) for r in rows] == [
        ("num_generations", 4), ("num_generations", 8), ("completion_length", 8), ("completion_length", 32),
        ("reward_plugins", 1), ("reward_plugins", 4)]
    for r in rows:
        kinds = ["trl", "rlvr"] + (["rlvr-isolated"] if r["sweep"] == "reward_plugins" else [])
        assert r["completions_per_step"] == result["prompts_per_step"] * r["num_generations"]
        for kind in kinds:
            assert r[f"s_per_step_{kind}"] > 0
            assert r[f"steps_run_{kind}"] == r["steps_timed"] + result["block"]
            assert r[f"mean_completion_length_{kind}"] == r["completion_length"]  # min_new_tokens forces it
        for kind in kinds[1:]:
            assert r[f"ratio_{kind}_vs_trl"] == pytest.approx(r[f"s_per_step_{kind}"] / r["s_per_step_trl"])
        assert ("s_per_step_rlvr-isolated" in r) == (r["sweep"] == "reward_plugins")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
