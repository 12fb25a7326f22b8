"""Two processes (gloo on CPU) give the same gathered advantages and length penalties as one."""

from __future__ import annotations

from pathlib import Path
import json
import os
import socket
import subprocess
import sys

import pytest

REPO = Path(__file__).resolve().parents[1]


SCRIPT = REPO / "tests" / "multiproc" / "two_ranks.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(out, per_device, processes):
    cmd = [sys.executable, str(SCRIPT), str(out), str(per_device)]
    if processes > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(processes),
               "--master_addr", "127.0.0.1", "--master_port", str(free_port()), *cmd[1:]]
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
def test_rlvr_train_smoke_recipe_on_two_processes(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), "-m", "rlvr_plugins.cli", "train",
           str(REPO / "tests" / "configs" / "smoke.yaml"), "--set", f"output_dir={out}",
           "--set", "trainer.per_device_train_batch_size=4"]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.count("gain from GRPO") == 1  # only the main process reports
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "reward" in r] == [1, 2]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["grpo_steps"] == 2 and (out / "checkpoint-2" / "rlvr_plugin_state.json").exists()
