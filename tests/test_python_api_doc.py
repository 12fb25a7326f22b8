"""docs/python-api.md runs: its ``python`` blocks, top to bottom in one namespace (each trains a tiny model for a
step or two), and its YAML block is a valid config whose plugins give the GRPOConfig the page says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "python-api.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", PAGE.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_the_page_has_a_block_per_section_and_is_linked():
    assert len(blocks("python")) >= 6 and len(blocks("yaml")) == 1
    assert "docs/python-api.md" in (REPO / "README.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_every_python_block_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "python_api_doc"}
    for number, code in enumerate(blocks("python"), 1):
        try:
            exec(compile(code, f"{PAGE.name} python block {number}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"docs/python-api.md, python block {number} fails: {exc!r}") from exc
    assert (tmp_path / "runs" / "resume" / "run" / "checkpoint-2").is_dir()


def test_the_yaml_block_is_a_config_with_the_scripts_plugins(tmp_path, monkeypatch):
    from rlvr_plugins.train.config import load_config
    from rlvr_plugins.train.run import prepare

    monkeypatch.chdir(tmp_path)
    (config_file,) = [tmp_path / "config.yaml"]
    config_file.write_text(blocks("yaml")[0], encoding="utf-8")
    prepared = prepare(load_config(config_file))
    assert (prepared.grpo_args.loss_type, prepared.grpo_args.scale_rewards) == ("dr_grpo", "none")
    assert [r.weight for _, r in prepared.plugin_set.reward_functions()] == [0.5]
