"""Two processes (gloo on CPU) give the same gathered advantages and length penalties as one."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


SCRIPT = REPO / "tests" / "multiproc" / "two_ranks.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(out, per_device, processes, estimator=None, options=None):
    extra = [estimator, json.dumps(options or {})] if estimator else []
    return run_script(SCRIPT, out, [str(per_device), *extra], processes)


def run_script(script: Path, out: Path, arguments: list[str], processes: int) -> list[dict]:
    """Run ``script OUT *arguments`` in one process, or in ``processes`` under torch.distributed.run; the JSON
    lines it wrote to ``out``."""
    cmd = [sys.executable, str(script), str(out), *arguments]
    if processes > 1:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            str(processes),
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(free_port()),
            *cmd[1:],
        ]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert result.returncode == 0, result.stderr[-4000:]
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.slow
def test_groups_split_across_two_ranks_match_one_process(tmp_path):
    pytest.importorskip("rlvr_kimi")
    one = run(tmp_path / "one.jsonl", per_device=8, processes=1)
    two = run(tmp_path / "two.jsonl", per_device=4, processes=2)  # each group of 8 is split 4 + 4
    assert len(one) == len(two) == 2
    for a, b in zip(one, two):
        assert a["indices"] == b["indices"] and len(set(a["indices"])) == 1
        assert a["per_func"] == b["per_func"]
        assert a["rewards"] == pytest.approx(b["rewards"], abs=1e-6)
        assert a["advantages"] == pytest.approx(b["advantages"], abs=1e-6)
        weighted = [r[0] + 0.5 * r[1] for r in a["per_func"]]
        penalty = [t - w for t, w in zip(a["rewards"], weighted)]
        assert any(abs(p) > 1e-3 for p in penalty)  # kimi-length shaped the group's total reward
        assert any(abs(x) > 0.1 for x in a["advantages"])


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["opo", "gpg"])
def test_peer_estimators_on_groups_split_across_two_ranks_match_one_process(tmp_path, estimator):
    """opo reads the gathered completion lengths, gpg a batch-wide count: both see the whole gathered batch."""
    pytest.importorskip("rlvr_kimi")
    one = run(tmp_path / "one.jsonl", per_device=8, processes=1, estimator=estimator)
    two = run(tmp_path / "two.jsonl", per_device=4, processes=2, estimator=estimator)
    assert len(one) == len(two) == 2
    for a, b in zip(one, two):
        assert a["indices"] == b["indices"] and len(set(a["indices"])) == 1
        assert a["rewards"] == pytest.approx(b["rewards"], abs=1e-6)
        assert a["advantages"] == pytest.approx(b["advantages"], abs=1e-6)
        assert any(abs(x) > 0.1 for x in a["advantages"])


@pytest.mark.slow
def test_prime_length_on_groups_split_across_two_ranks_matches_one_process(tmp_path):
    """prime-length reads its group's pass rate and longest completion: only right after the gather."""
    pytest.importorskip("rlvr_kimi")
    options = {"correctness_reward": "mp-correct", "weight": 1.0}
    one = run(tmp_path / "one.jsonl", per_device=8, processes=1, estimator="prime-length", options=options)
    two = run(tmp_path / "two.jsonl", per_device=4, processes=2, estimator="prime-length", options=options)
    without = run(tmp_path / "without.jsonl", per_device=8, processes=1)
    assert len(one) == len(two) == len(without) == 2
    for a, b, c in zip(one, two, without):
        assert a["indices"] == b["indices"] and len(set(a["indices"])) == 1
        assert a["rewards"] == pytest.approx(b["rewards"], abs=1e-6)
        assert a["advantages"] == pytest.approx(b["advantages"], abs=1e-6)
        assert max(abs(x - y) for x, y in zip(a["rewards"], c["rewards"])) > 1e-3  # prime-length took part


@pytest.mark.slow
def test_rlvr_train_smoke_recipe_on_two_processes(tmp_path):
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(free_port()),
        "-m",
        "rlvr_plugins.cli",
        "train",
        str(REPO / "tests" / "configs" / "smoke.yaml"),
        "--set",
        f"output_dir={out}",
        "--set",
        "trainer.per_device_train_batch_size=4",
    ]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.count("gain from GRPO") == 1  # only the main process reports
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "reward" in r] == [1, 2]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["grpo_steps"] == 2 and (out / "checkpoint-2" / "rlvr_plugin_state.json").exists()


RANK_FAULTS = REPO / "tests" / "multiproc" / "rank_faults.py"


def run_rank_faults(tmp_path, mode):
    """Fault item 17 on 2 processes; the subprocess timeout is the watchdog against a collective hang."""
    out = tmp_path / f"{mode}.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(free_port()),
        str(RANK_FAULTS),
        str(out),
        mode,
    ]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{mode}: the ranks hung (no exit within 300 s)")
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return result, rows


@pytest.mark.slow
def test_17_a_reward_failing_on_one_rank_is_masked_and_both_ranks_go_on(tmp_path):
    """Also: rank 1 logs a metric rank 0 does not (observer/rank1_only); nothing hangs."""
    result, rows = run_rank_faults(tmp_path, "masked")
    assert result.returncode == 0, result.stderr[-4000:]
    seen = [r for r in rows if "valid" in r]
    assert sorted((r["rank"], r["step"]) for r in seen) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for step in (0, 1):  # both ranks see the same gathered batch; only rank 1's half has masked rows
        rank0, rank1 = sorted((r for r in seen if r["step"] == step), key=lambda r: r["rank"])
        assert rank0["valid"] == rank1["valid"] and rank0["valid"][:4] == [True] * 4
    masked = sum(v is False for r in seen if r["rank"] == 0 for v in r["valid"])
    assert masked > 0
    (done,) = [r for r in rows if "done" in r]
    failed = [h["rlvr/failed/rank-flaky"] for h in done["log"] if "rlvr/failed/rank-flaky" in h]
    assert sum(failed) == masked


@pytest.mark.slow
def test_17_a_reward_failing_k_times_on_one_rank_stops_every_rank_with_one_error(tmp_path):
    result, rows = run_rank_faults(tmp_path, "failing")
    assert result.returncode != 0
    # both ranks raise the same error, naming the reward and the rank where it failed
    assert result.stderr.count("reward error on rank 1 (all 2 ranks stop)") >= 2, result.stderr[-4000:]
    assert "rank-flaky" in result.stderr and "max_consecutive_failures=3" in result.stderr
    assert not [r for r in rows if "valid" in r]  # nothing was trained on


@pytest.mark.slow
def test_17_an_observer_hook_raising_on_one_rank_stops_both(tmp_path):
    result, rows = run_rank_faults(tmp_path, "hook")
    assert result.returncode != 0
    assert "observer broke on rank 1" in result.stderr
    assert not [r for r in rows if "done" in r]


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["repeat-sampler", "kimi-curriculum"])
def test_rollout_pool_chooses_the_same_batches_on_two_processes_as_on_one(tmp_path, sampler):
    """Every process holds the same gathered pool, so dapo-dynamic-sampling's rounds, choices and trained
    rows (each group of 4 split 2 + 2) are those of one process. With kimi-curriculum, whose counts choose
    the extra rounds' prompts, both processes draw the same prompts in every round as one process does,
    and end with the same counts."""
    if sampler != "repeat-sampler":
        pytest.importorskip("rlvr_kimi")
    script = REPO / "tests" / "multiproc" / "pool_ranks.py"
    one = run_script(script, tmp_path / "one.jsonl", ["8", sampler], processes=1)
    two = run_script(script, tmp_path / "two.jsonl", ["4", sampler], processes=2)
    if sampler == "kimi-curriculum":
        [single], views = one.pop()["views"], two.pop()["views"]
        assert views[0] == views[1] == single
        assert any(r >= 1 for _, r, _ in single["rounds"])  # extra rounds were drawn
        assert sum(single["attempts"]) == 4 * sum(len(prompts) for _, _, prompts in single["rounds"])
    assert len(one) == len(two) == 3
    assert max(step["pool/rounds"] for step in one) > 1 and all(s["pool/short_batch"] == 0 for s in one)
    for a, b in zip(one, two):
        assert a["groups"] == b["groups"]
        assert [r[0] for r in a["rows"]] == [r[0] for r in b["rows"]]
        assert [r[1] for r in a["rows"]] == pytest.approx([r[1] for r in b["rows"]], abs=1e-6)
        assert {k: v for k, v in a.items() if k.startswith("pool/")} == {
            k: v for k, v in b.items() if k.startswith("pool/")
        }


@pytest.mark.slow
def test_partial_rollouts_continue_the_same_trajectories_on_two_processes_as_on_one(tmp_path):
    """Every process holds the same pending groups (gathered rows), so the segments, the groups that wait, the
    trained rows and their stale-token masks are those of one process."""
    pytest.importorskip("rlvr_kimi")
    script = REPO / "tests" / "multiproc" / "partial_ranks.py"
    one = run_script(script, tmp_path / "one.jsonl", ["8"], processes=1)
    two = run_script(script, tmp_path / "two.jsonl", ["4"], processes=2)
    assert len(one) == len(two) == 4
    assert any(step["pending"] for step in one) and any(0 in mask for s in one for _, _, mask in s["rows"])
    for a, b in zip(one, two):
        assert (a["groups"], a["pending"], a["started"]) == (b["groups"], b["pending"], b["started"])
        assert [(r[0], r[2]) for r in a["rows"]] == [(r[0], r[2]) for r in b["rows"]]
        assert [r[1] for r in a["rows"]] == pytest.approx([r[1] for r in b["rows"]], abs=1e-6)
