"""Two processes (gloo on CPU) give the same gathered advantages and length penalties as one.

The runs compared come from ``rank_runs`` (tests/conftest.py): every scenario of tests/multiproc/ranks.py in one
launch on one process and one on two, shared by the tests that read them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from multiproc_launch import RANKS, launch, records

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_groups_split_across_two_ranks_match_one_process(rank_runs):
    pytest.importorskip("rlvr_kimi")
    one, two = rank_runs[1]["gather"], rank_runs[2]["gather"]  # each group of 8 is split 4 + 4
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
def test_peer_estimators_on_groups_split_across_two_ranks_match_one_process(rank_runs, estimator):
    """opo reads the gathered completion lengths, gpg a batch-wide count: both see the whole gathered batch."""
    pytest.importorskip("rlvr_kimi")
    one, two = rank_runs[1][estimator], rank_runs[2][estimator]
    assert len(one) == len(two) == 2
    for a, b in zip(one, two):
        assert a["indices"] == b["indices"] and len(set(a["indices"])) == 1
        assert a["rewards"] == pytest.approx(b["rewards"], abs=1e-6)
        assert a["advantages"] == pytest.approx(b["advantages"], abs=1e-6)
        assert any(abs(x) > 0.1 for x in a["advantages"])


@pytest.mark.slow
def test_prime_length_on_groups_split_across_two_ranks_matches_one_process(rank_runs):
    """prime-length reads its group's pass rate and longest completion: only right after the gather."""
    pytest.importorskip("rlvr_kimi")
    one, two = rank_runs[1]["prime-length"], rank_runs[2]["prime-length"]
    without = rank_runs[1]["gather"]
    assert len(one) == len(two) == len(without) == 2
    for a, b, c in zip(one, two, without):
        assert a["indices"] == b["indices"] and len(set(a["indices"])) == 1
        assert a["rewards"] == pytest.approx(b["rewards"], abs=1e-6)
        assert a["advantages"] == pytest.approx(b["advantages"], abs=1e-6)
        assert max(abs(x - y) for x, y in zip(a["rewards"], c["rewards"])) > 1e-3  # prime-length took part


@pytest.mark.slow
def test_rlvr_train_smoke_recipe_on_two_processes(tmp_path):
    out = tmp_path / "run"
    config = REPO / "tests" / "configs" / "smoke.yaml"
    sets = ["--set", f"output_dir={out}", "--set", "trainer.per_device_train_batch_size=4"]
    result = launch(["-m", "rlvr_plugins.cli", "train", str(config), *sets], processes=2)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.count("gain from GRPO") == 1  # only the main process reports
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "reward" in r] == [1, 2]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["grpo_steps"] == 2 and (out / "checkpoint-2" / "rlvr_plugin_state.json").exists()


@pytest.fixture(scope="module")
def stopped_ranks(tmp_path_factory):
    """Fault item 17's runs that stop, in one launch on 2 processes: ``failing`` (each rank records the error
    it stopped with) then ``hook`` (stops the launch). The timeout is the watchdog against a collective hang."""
    out = tmp_path_factory.mktemp("stopped")
    try:
        result = launch([str(RANKS), str(out), "failing", "hook"], processes=2, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail("failing, hook: the ranks hung (no exit within 300 s)")
    return result, {mode: records(out / f"{mode}.jsonl") for mode in ("failing", "hook")}


@pytest.mark.slow
def test_17_a_reward_failing_on_one_rank_is_masked_and_both_ranks_go_on(rank_runs):
    """Also: rank 1 logs a metric rank 0 does not (observer/rank1_only); nothing hangs (the launch of
    ``rank_runs`` on two processes ends in time and without error)."""
    rows = rank_runs[2]["masked"]
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
def test_17_a_reward_failing_k_times_on_one_rank_stops_every_rank_with_one_error(stopped_ranks):
    result, rows = stopped_ranks
    errors = sorted((r for r in rows["failing"] if "error" in r), key=lambda r: r["rank"])
    assert [r["rank"] for r in errors] == [0, 1], result.stderr[-4000:]
    for r in errors:  # both ranks raise the same error, naming the reward and the rank where it failed
        assert "reward error on rank 1 (all 2 ranks stop)" in r["error"]
        assert "rank-flaky" in r["error"] and "max_consecutive_failures=3" in r["error"]
    assert not [r for r in rows["failing"] if "valid" in r or "done" in r]  # nothing was trained on


@pytest.mark.slow
def test_17_an_observer_hook_raising_on_one_rank_stops_both(stopped_ranks):
    result, rows = stopped_ranks
    assert result.returncode != 0
    assert "observer broke on rank 1" in result.stderr
    assert not [r for r in rows["hook"] if "done" in r]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["pool", "pool-kimi"])
def test_rollout_pool_chooses_the_same_batches_on_two_processes_as_on_one(rank_runs, scenario):
    """Every process holds the same gathered pool, so dapo-dynamic-sampling's rounds, choices and trained
    rows (each group of 4 split 2 + 2) are those of one process. With kimi-curriculum (``pool-kimi``), whose
    counts choose the extra rounds' prompts, both processes draw the same prompts in every round as one
    process does, and end with the same counts."""
    if scenario == "pool-kimi":
        pytest.importorskip("rlvr_kimi")
    one, two = list(rank_runs[1][scenario]), list(rank_runs[2][scenario])
    if scenario == "pool-kimi":
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
def test_kimi_curriculum_counts_each_continued_group_once_when_it_finishes_on_two_processes_as_on_one(rank_runs):
    """Partial rollouts with kimi-curriculum as the train sampler: a group that finishes at a later round or step
    is counted then, once (every finished group: G attempts; the unfinished ones stay in flight), and every
    process holds the counts of one process."""
    pytest.importorskip("rlvr_kimi")
    one, two = rank_runs[1]["partial-kimi"], rank_runs[2]["partial-kimi"]
    steps_one, steps_two = one[:-1], two[:-1]
    assert len(steps_one) == len(steps_two) == 4
    assert max(step["pool/rounds"] for step in steps_one) > 1  # groups continued: finished a round after they started
    for a, b in zip(steps_one, steps_two):
        assert (a["groups"], a["pending"], a["started"]) == (b["groups"], b["pending"], b["started"])
    (view,) = one[-1]["views"]
    assert two[-1]["views"] == [view, view]
    assert sum(view["attempts"]) == 4 * view["finished_groups"] > 0  # G = 4 per finished group, each once
    assert view["in_flight"] == sorted(steps_one[-1]["pending"]) and view["observed"] == 4
    assert 0 < sum(view["successes"]) < sum(view["attempts"])


@pytest.mark.slow
def test_partial_rollouts_continue_the_same_trajectories_on_two_processes_as_on_one(rank_runs):
    """Every process holds the same pending groups (gathered rows), so the segments, the groups that wait, the
    trained rows and their stale-token masks are those of one process."""
    pytest.importorskip("rlvr_kimi")
    one, two = rank_runs[1]["partial"], rank_runs[2]["partial"]
    assert len(one) == len(two) == 4
    assert any(step["pending"] for step in one) and any(0 in mask for s in one for _, _, mask in s["rows"])
    for a, b in zip(one, two):
        assert (a["groups"], a["pending"], a["started"]) == (b["groups"], b["pending"], b["started"])
        assert [(r[0], r[2]) for r in a["rows"]] == [(r[0], r[2]) for r in b["rows"]]
        assert [r[1] for r in a["rows"]] == pytest.approx([r[1] for r in b["rows"]], abs=1e-6)
