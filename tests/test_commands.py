"""``rlvr filter``, ``rlvr distill`` and ``rlvr sft`` on a tiny model, with scripted rewards whose
outcomes are known in advance, so the kept rows and the counts are checked exactly."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from rlvr_plugins import Plugin, RewardFunction, cli, hookimpl
from rlvr_plugins.cli.filter_cmd import in_band
from rlvr_plugins.manager import temporary_plugin
from rlvr_plugins.testing import TINY

N = 4


pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Scripted:
    """Scores by the row's ``kind`` and by how often this prompt text was scored before.

    ``easy``: always 1; ``hard``: always 0; ``mixed``: 1 on the first sample only (pass rate
    1/4); ``direct``: like ``mixed``. A prompt that asks for the final answer only (no chain of
    thought) scores 1 for ``easy`` and ``direct``, 0 otherwise.
    ``style`` follows the pattern 0, 1, 1, 0.5 over each prompt's samples.
    """

    PATTERN = (0.0, 1.0, 1.0, 0.5)

    def __init__(self, what: str):
        self.what, self.seen = what, defaultdict(int)

    def __call__(self, *, prompt, completion, example):
        i = self.seen[prompt]
        self.seen[prompt] += 1
        if self.what == "style":
            return self.PATTERN[i % 4]
        kind = example["kind"]
        if "final answer only" in prompt:
            return float(kind in ("easy", "direct"))
        return {"easy": 1.0, "hard": 0.0}.get(kind, float(i == 0))


class ScriptedPlugin(Plugin):
    name = "scripted"

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(RewardFunction("solved", Scripted("solved"), isolated=False))
        register(RewardFunction("style", Scripted("style"), weight=0.5, isolated=False))


KINDS = ["easy", "hard", "mixed", "direct", "mixed", "hard", "easy", "mixed"]


def write_setup(tmp_path: Path, section: str, options: dict, plugins=None, rows=None) -> Path:
    rows = rows or [
        {"question": f"{i}+{i}=", "answer": str(2 * i), "kind": kind, "solution": f"<think>{i}</think>"}
        for i, kind in enumerate(KINDS)
    ]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "output_dir": str(tmp_path / "run"),
                "seed": 0,
                "model": {"tiny": TINY},
                "data": {"train": {"source": "jsonl", "path": str(data)}, "columns": {"prompt": "question"}},
                "plugins": plugins or {"scripted": {}},
                "engine": {"in_process": True},
                section: options,
            }
        )
    )
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_in_band_defaults_drop_all_and_nothing_solved():
    assert [in_band(c, 8, None, None) for c in (0, 1, 7, 8)] == [False, True, True, False]
    assert [in_band(c, 8, 0.0, 1.0) for c in (0, 8)] == [True, True]
    assert [in_band(c, 8, None, 0.5) for c in (0, 4, 5)] == [False, True, False]


@pytest.mark.slow
def test_filter_keeps_the_prompts_in_the_band_with_their_pass_rate(tmp_path):
    path = write_setup(tmp_path, "filter", {"n": N, "max_new_tokens": 3, "reward": "solved"})
    with temporary_plugin(ScriptedPlugin):
        assert cli.main(["filter", str(path)]) == 0
    kept = read_jsonl(tmp_path / "run" / "filtered.jsonl")
    expected = [i for i, k in enumerate(KINDS) if k in ("mixed", "direct")]
    assert [r["prompt"] for r in kept] == [f"{i}+{i}=" for i in expected]
    assert all(r["pass_rate"] == 0.25 and r["passes"] == 1 for r in kept)
    assert kept[0] == {
        "question": "2+2=",
        "answer": "4",
        "kind": "mixed",
        "solution": "<think>2</think>",
        "prompt": "2+2=",
        "pass_rate": 0.25,
        "passes": 1,
    }
    report = json.loads((tmp_path / "run" / "filter_report.json").read_text())
    assert report["prompts"] == 8 and report["kept"] == 4
    assert report["dropped"] == {"never_solved": 2, "always_solved": 2, "outside_band": 0, "solved_without_cot": 0}
    assert report["pass_count_histogram"] == {"0": 2, "1": 4, "4": 2}
    assert report["mean_pass_rate"] == pytest.approx((2 * 4 + 4 * 1) / 32)


@pytest.mark.slow
def test_filter_drops_prompts_solved_without_chain_of_thought_and_honours_bounds(tmp_path):
    path = write_setup(
        tmp_path,
        "filter",
        {
            "n": N,
            "max_new_tokens": 3,
            "reward": "solved",
            "drop_solved_without_cot": True,
            "min_pass_rate": 0.25,
            "max_pass_rate": 1.0,
            "no_cot_max_new_tokens": 2,
        },
    )
    with temporary_plugin(ScriptedPlugin):
        assert cli.main(["filter", str(path)]) == 0
    kept = read_jsonl(tmp_path / "run" / "filtered.jsonl")
    assert [r["kind"] for r in kept] == ["mixed", "mixed", "mixed"]  # easy and direct are solved without CoT
    report = json.loads((tmp_path / "run" / "filter_report.json").read_text())
    assert report["dropped"] == {"never_solved": 2, "always_solved": 0, "outside_band": 0, "solved_without_cot": 3}
    assert report["band"]["rule"] == "inclusive bounds"


@pytest.mark.slow
def test_distill_keeps_traces_that_reach_every_threshold(tmp_path):
    path = write_setup(
        tmp_path,
        "distill",
        {
            "n": N,
            "max_new_tokens": 3,
            "temperature": 1.0,
            "thresholds": {"solved": 1.0, "style": 1.0},
            "max_per_prompt": 1,
        },
    )
    with temporary_plugin(ScriptedPlugin):
        assert cli.main(["distill", str(path)]) == 0
    rows = read_jsonl(tmp_path / "run" / "distill.jsonl")
    # accepted: solved (easy: every sample; mixed/direct: sample 0 only) and style 1.0 (samples 1, 2)
    assert [r["kind"] for r in rows] == ["easy", "easy"]
    assert all(r["solved"] == 1.0 and r["style"] == 1.0 and isinstance(r["completion"], str) for r in rows)
    assert rows[0]["prompt"] == "0+0=" and rows[0]["teacher_prompt"] == "0+0=" and rows[0]["answer"] == "0"
    report = json.loads((tmp_path / "run" / "distill_report.json").read_text())
    assert report["samples"] == 32 and report["accepted_samples"] == 4 and report["rows_written"] == 2
    assert report["passed_per_reward"] == {"solved": 2 * 4 + 4 * 1, "style": 8 * 2}
    assert report["prompts_with_a_trace"] == 2 and report["acceptance_rate"] == pytest.approx(4 / 32)


def test_distill_threshold_for_an_unknown_reward_lists_the_registered_ones(tmp_path, capsys):
    path = write_setup(tmp_path, "distill", {"thresholds": {"r1-acuracy": 1.0}})
    with temporary_plugin(ScriptedPlugin):
        assert cli.main(["distill", str(path)]) == 2
    assert (
        "distill.thresholds names reward(s) ['r1-acuracy'] that no enabled plugin registers; "
        "registered: ['solved', 'style']"
    ) in capsys.readouterr().err


def test_commands_without_a_reward_or_an_sft_section_stop_early(tmp_path, capsys):
    path = write_setup(tmp_path, "filter", {}, plugins={"plain-template": {}})
    assert cli.main(["filter", str(path)]) == 2
    assert (
        "rlvr filter scores completions with the reward plugins, but the config enables none" in capsys.readouterr().err
    )
    assert cli.main(["sft", str(path)]) == 2
    assert "rlvr sft needs an sft: section" in capsys.readouterr().err


@pytest.mark.slow
def test_sft_command_saves_a_loadable_model(tmp_path, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = write_setup(
        tmp_path,
        "sft",
        {
            "examples": 6,
            "completion_column": "solution",
            "use_cpu": True,
            "per_device_train_batch_size": 2,
            "learning_rate": 1e-3,
            "logging_steps": 1,
            "disable_tqdm": True,
        },
        plugins={"plain-template": {}},
    )
    assert cli.main(["sft", str(path)]) == 0
    progress = [line for line in capsys.readouterr().out.splitlines() if " loss " in line]
    assert progress and all(line.startswith("[sft] step ") for line in progress), progress  # labelled: not GRPO's
    folder = tmp_path / "run" / "model"
    summary = json.loads((tmp_path / "run" / "sft_summary.json").read_text())
    assert summary["examples"] == 6 and summary["examples_from"] is None and summary["model"] == str(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert model.config.hidden_size == TINY["hidden_size"]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert (
        tokenizer.convert_tokens_to_ids("<think>") == 4
        and tokenizer.decode(tokenizer("1+2=")["input_ids"], skip_special_tokens=True) == "1+2="
    )


def test_qwen_fusion_rows_mix_modes_without_repeating_the_empty_think_block(tmp_path):
    pytest.importorskip("rlvr_qwen_thinking.sft", reason="rlvr-qwen-thinking is not installed")
    from rlvr_plugins.cli.common import setup
    from rlvr_plugins.cli.sft_cmd import sft_rows
    from rlvr_plugins.testing import char_tokenizer, tiny_rows
    from rlvr_qwen_thinking.modes import EMPTY_THINK_BLOCK, fused_no_think

    config = {
        "output_dir": str(tmp_path / "run"),
        "seed": 5,
        "model": {"tiny": {}},
        "plugins": {"qwen-thinking": {"no_think_share": 0.5}},
    }
    ctx = setup(config, "sft", need_rewards=False)
    rows = [{k: v for k, v in r.items() if k != "rlvr_index"} for r in tiny_rows(12)]
    out, info = sft_rows(ctx, rows, "solution", char_tokenizer())
    expected_non_thinking = [i for i in range(12) if fused_no_think(5, i, 0.5)]
    assert info == {"examples_from": "qwen-thinking"}
    assert [not r["thinking"] for r in out] == [i in expected_non_thinking for i in range(12)]
    assert 0 < len(expected_non_thinking) < 12
    for i, (row, source) in enumerate(zip(out, rows)):
        if i in expected_non_thinking:
            assert row["prompt"] == source["prompt"] + " /no_think" + EMPTY_THINK_BLOCK
            assert row["solution"] == f"<answer>{source['answer']}</answer>"
        else:
            assert row["prompt"] == source["prompt"] and row["solution"] == source["solution"]


def test_without_qwen_fusion_sft_uses_the_rows_as_they_are(tmp_path):
    pytest.importorskip("rlvr_qwen_thinking", reason="rlvr-qwen-thinking is not installed")
    from rlvr_plugins.cli import sft_cmd
    from rlvr_plugins.cli.common import setup
    from rlvr_plugins.testing import char_tokenizer, tiny_rows

    config = {
        "output_dir": str(tmp_path / "run"),
        "seed": 5,
        "model": {"tiny": {}},
        "plugins": {"qwen-thinking": {"no_think_share": 0.0}},
    }
    rows = [{k: v for k, v in r.items() if k != "rlvr_index"} for r in tiny_rows(4)]
    out, info = sft_cmd.sft_rows(setup(config, "sft", need_rewards=False), rows, "solution", char_tokenizer())
    assert info == {"examples_from": None}
    assert [r["solution"] for r in out] == [r["solution"] for r in rows]


def test_a_tilde_in_a_commands_output_dir_is_the_home_folder_as_for_rlvr_train(tmp_path, monkeypatch):
    from rlvr_plugins.cli.common import setup

    monkeypatch.setenv("HOME", str(tmp_path))
    ctx = setup({"output_dir": "~/run", "model": {"tiny": {}}, "plugins": {"r1-accuracy": {}}}, "eval")
    assert ctx.out == tmp_path / "run" and sorted(os.listdir(tmp_path / "run")) == [
        "eval_config.yaml",
        "eval_plugins.json",
    ]
