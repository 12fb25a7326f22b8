"""Crash-safe runs: SIGKILL mid-training then --resume gives the uninterrupted run's metrics; SIGTERM stops cleanly.

The runs use one thread (RLVR_THREADS=1): with several, CPU float reductions in the backward
pass can differ from run to run, so even two uninterrupted runs are not bitwise equal.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from rlvr_plugins.checkpoints import PLUGIN_STATE_FILE, last_complete_checkpoint
from rlvr_plugins.train.runfolder import truncate_metrics
from rlvr_plugins.train.runlog import read_metrics

REPO = Path(__file__).resolve().parents[1]

SMOKE = REPO / "tests" / "configs" / "smoke.yaml"
KEYS = ("loss", "reward", "rewards/r1-accuracy/mean", "rewards/r1-format/mean", "completions/mean_length")


def config(tmp_path, name, plugins=None, **trainer):
    cfg = yaml.safe_load(SMOKE.read_text())
    cfg["output_dir"] = str(tmp_path / name)
    cfg.pop("eval")
    cfg["plugins"].update(plugins or {})
    cfg["trainer"].update(
        {"max_steps": 4, "save_steps": 1, "gradient_accumulation_steps": 2, "per_device_train_batch_size": 4, **trainer}
    )
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def rlvr(*args, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "rlvr_plugins.cli", *args],
        cwd=REPO,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore", "RLVR_THREADS": "1"},
        **{"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **kw},
    )


def finish(proc, timeout=600):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def steps(folder):
    return [r for r in read_metrics(folder / "metrics.jsonl") if "loss" in r]


# cosine-length: the smoke policy's groups then differ in some rounds (by length), so the rounds vary;
# kimi-curriculum draws the extra rounds and the replacements of the prompts skipped before generating
POOL = {
    "dapo-dynamic-sampling": {"max_rounds": 3, "keep_leftovers": True, "max_group_age": 1, "skip_streak": 4},
    "cosine-length": {"correctness_reward": "r1-accuracy"},
    "kimi-curriculum": {"schedule": "none", "correctness_reward": "r1-accuracy"},
}
POOL_KEYS = (
    "pool/rounds",
    "pool/frac_informative",
    "pool/carried",
    "pool/discarded",
    "pool/skipped_prompts",
    "rlvr/ratio/abs_log_mean",
    "curriculum/prompts_seen",
)


@pytest.mark.slow
@pytest.mark.parametrize("plugins", [{}, POOL], ids=["plain", "rollout-pool"])
def test_sigkill_then_resume_matches_the_uninterrupted_run(tmp_path, plugins):
    """With the rollout pool too (beside kimi-curriculum, which draws its extra rounds): the groups waiting in the
    pool, the per-prompt record and the curriculum's counts are checkpointed, and the resumed run trains on the
    same batches (same rounds, skipped prompts, carried groups, losses) and ends with the same counts."""
    log = (tmp_path / "a.log").open("w")  # a file, not a pipe: nobody reads it while b runs
    uninterrupted = rlvr("train", str(config(tmp_path, "a", plugins)), stdout=log, stderr=subprocess.STDOUT)
    b = config(tmp_path, "b", plugins)
    proc = rlvr("train", str(b))
    marker = tmp_path / "b" / "checkpoint-2" / PLUGIN_STATE_FILE
    deadline = time.time() + 300
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert marker.exists()
    code, _, _ = finish(uninterrupted)  # a runs beside b: they share nothing
    log.close()
    assert code == 0, (tmp_path / "a.log").read_text()[-3000:]
    code, out, err = finish(rlvr("train", str(b), "--resume"))
    assert code == 0, err[-3000:]
    a_rows, b_rows = steps(tmp_path / "a"), steps(tmp_path / "b")
    assert [r["step"] for r in b_rows] == [1, 2, 3, 4]  # append-only, nothing duplicated or missing
    for ra, rb in zip(a_rows, b_rows):
        for key in KEYS + (POOL_KEYS if plugins else ()):
            assert ra[key] == pytest.approx(rb[key], rel=1e-5, abs=1e-7), (ra["step"], key)
    if plugins:
        a_state, b_state = (
            json.loads((tmp_path / run / "checkpoint-4" / PLUGIN_STATE_FILE).read_text()) for run in "ab"
        )
        assert a_state["kimi-curriculum"] == b_state["kimi-curriculum"]
        assert sum(r["pool/skipped_prompts"] for r in a_rows) > 0  # replacements drawn by the curriculum
        assert sum(a_state["kimi-curriculum"]["attempts"]) == 4 * sum(r["pool/groups_generated"] for r in a_rows)
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["grpo_steps"] == 4 and summary["resumed_from"].endswith(("checkpoint-2", "checkpoint-3"))


def test_incomplete_checkpoint_is_skipped(tmp_path):
    for step, complete in ((1, True), (2, True), (3, False)):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        if complete:
            (folder / PLUGIN_STATE_FILE).write_text("{}")
    assert last_complete_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-2")
    assert last_complete_checkpoint(str(tmp_path / "missing")) is None


def test_truncate_metrics_keeps_rows_up_to_the_checkpoint(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"step": s, "loss": s / 10}) + "\n" for s in (1, 2, 3, 4)))
    truncate_metrics(path, 2)
    assert [r["step"] for r in read_metrics(path)] == [1, 2]


def test_truncate_metrics_drops_a_torn_last_row(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 0.1}\n{"step": 2, "loss": 0.2}\n{"step": 3, "lo')  # disk full mid-row
    truncate_metrics(path, 3)
    assert read_metrics(path) == [{"step": 1, "loss": 0.1}, {"step": 2, "loss": 0.2}]


@pytest.mark.slow
def test_sigterm_writes_a_checkpoint_and_stops_cleanly(tmp_path):
    cfg = config(tmp_path, "t", max_steps=400, save_steps=1000)
    proc = rlvr("train", str(cfg))
    deadline = time.time() + 300
    metrics = tmp_path / "t" / "metrics.jsonl"
    while (not metrics.exists() or '"reward"' not in metrics.read_text()) and time.time() < deadline:
        time.sleep(0.1)  # a GRPO step logged (the held-out evaluation before GRPO logs its row at step 0 earlier)
    proc.send_signal(signal.SIGTERM)
    code, out, err = finish(proc)
    assert code == 0, err[-3000:]
    assert "stopped by SIGTERM" in out
    summary = json.loads((tmp_path / "t" / "summary.json").read_text())
    step = summary["grpo_steps"]
    assert summary["stopped_by"] == "SIGTERM" and 1 <= step < 400
    assert last_complete_checkpoint(str(tmp_path / "t")) == str(tmp_path / "t" / f"checkpoint-{step}")
