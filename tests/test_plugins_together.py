"""The seed plugins enabled together in one demo-scale run, through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rlvr_plugins import cli
from rlvr_plugins.train.runlog import read_metrics

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_curriculum_thinking_fusion_length_reward_and_dr_grpo_in_one_run(tmp_path):
    pytest.importorskip("rlvr_kimi")
    pytest.importorskip("rlvr_qwen_thinking")
    config = yaml.safe_load((REPO / "tests" / "configs" / "smoke.yaml").read_text())
    config.pop("sft")
    config["output_dir"] = str(tmp_path / "run")
    config["trainer"].update({"max_steps": 3, "save_steps": 3})
    config["plugins"].update(
        {
            "kimi-length": {"weight": 0.5},
            "kimi-curriculum": {"start_quantile": 0.3, "full_at_step": 2},
            "qwen-thinking": {"no_think_share": 0.5, "compliance_weight": 0.5},
            "dr-grpo": {},
        }
    )
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert cli.main(["train", str(path)]) == 0
    rows = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "reward" in r]
    assert [r["step"] for r in rows] == [1, 2, 3]
    for key in (
        "rewards/r1-accuracy/mean",
        "rewards/r1-format/mean",
        "rewards/qwen-mode-compliance/mean",
        "penalties/kimi-length/mean",
        "curriculum/admitted_difficulty",
    ):
        assert all(key in r for r in rows), key
    admitted = [r["curriculum/admitted_difficulty"] for r in rows]
    assert admitted == sorted(admitted) and admitted[0] < admitted[-1]  # the curriculum widens
    plugins = json.loads((tmp_path / "run" / "plugins.json").read_text())
    assert {p["name"] for p in plugins["plugins"]} >= {"kimi-curriculum", "qwen-thinking", "dr-grpo", "kimi-length"}
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["eval_after"]["n"] == 16
