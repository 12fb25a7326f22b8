"""``rlvr score``: rewards, penalties, totals and advantages per group, computed by hand."""

import json
import math
from pathlib import Path

import pytest

from rlvr_plugins import cli
from rlvr_plugins.train.data import DataError

REPO = Path(__file__).resolve().parents[1]

SMOKE = REPO / "tests" / "configs" / "smoke.yaml"
ROWS = [
    {"prompt": "12+7=", "completion": "<think>91</think><answer>19</answer>", "answer": "19", "group": "a"},
    {"prompt": "12+7=", "completion": "<think>81</think><answer>18</answer>", "answer": "19", "group": "a"},
    {"prompt": "12+7=", "completion": "<answer>19</answer>", "answer": "19", "group": "a"},
    {"prompt": "12+7=", "completion": "<think>91</think><answer>19</answer> extra", "answer": "19", "group": "a"},
    {"prompt": "3+4=", "completion": "<think>7</think><answer>7</answer>", "answer": "7", "group": "b"},
    {"prompt": "3+4=", "completion": "<think>7</think><answer>7</answer>", "answer": "7", "group": "b"},
    {"prompt": "1+1=", "completion": "<think>2</think><answer>2</answer>", "answer": "2"},
]


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_score_gives_each_reward_total_and_group_advantage(tmp_path, capsys):
    src = write_rows(tmp_path / "rollouts.jsonl", ROWS)
    out = tmp_path / "scored.jsonl"
    assert cli.main(["score", str(SMOKE), str(src), "--output", str(out)]) == 0
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(scored) == len(ROWS)
    assert [r["r1-accuracy"] for r in scored] == [1, 0, 1, 1, 1, 1, 1]
    assert [r["r1-format"] for r in scored] == [1, 1, 0, 0, 1, 1, 1]
    # smoke.yaml weights: accuracy 1.0, format 0.5
    assert [r["reward"] for r in scored] == [1.5, 0.5, 1.0, 1.0, 1.5, 1.5, 1.5]
    # group a: rewards 1.5, 0.5, 1, 1 -> mean 1, sample std sqrt(0.5/3)
    std = math.sqrt(0.5 / 3)
    assert [r["advantage"] for r in scored[:4]] == pytest.approx(
        [0.5 / (std + 1e-4), -0.5 / (std + 1e-4), 0, 0], abs=1e-5
    )
    assert [r["advantage"] for r in scored[4:]] == [0, 0, 0]  # zero-variance group, lone row
    assert scored[0]["group"] == "a" and "group" not in scored[6]
    captured = capsys.readouterr()
    table = captured.out
    assert "r1-accuracy" in table and "advantage" in table and "wrote 7 rows" in table
    assert table.startswith(
        "scoring with rewards r1-accuracy x1, r1-format x0.5; length penalties none; "
        "advantages by the estimator 'grpo', within each group\n"
    )
    assert captured.err.startswith("WARNING: 1 of 7 rows have no 'group' column, so each such row is its own group")


def test_score_warns_loudly_when_no_row_has_a_group(tmp_path, capsys):
    rows = [{k: v for k, v in r.items() if k != "group"} for r in ROWS[:4]]
    config = tmp_path / "score.yaml"
    config.write_text(
        "model: {tiny: {}}\nplugins: {r1-accuracy: {}, kimi-length: {warmup_steps: 0}}\nengine: {in_process: true}\n"
    )
    assert cli.main(["score", str(config), str(write_rows(tmp_path / "r.jsonl", rows))]) == 0
    captured = capsys.readouterr()
    assert captured.err == (
        "WARNING: no row has a 'group' column, so each such row is its own group of one and its "
        "advantage is 0 (there is nothing to compare it with); give the completions of one "
        "prompt the same 'group' value\n"
    )
    assert "length penalties kimi-length; advantages by the estimator 'grpo'" in captured.out


def test_score_with_rloo_and_a_score_only_config(tmp_path):
    config = tmp_path / "score.yaml"
    config.write_text("model: {tiny: {}}\nplugins: {r1-accuracy: {}, rloo: {}}\nengine: {in_process: true}\n")
    src = write_rows(tmp_path / "rollouts.jsonl", ROWS[:4])
    out = tmp_path / "scored.jsonl"
    assert cli.main(["score", str(config), str(src), "--output", str(out)]) == 0
    adv = [json.loads(line)["advantage"] for line in out.read_text().splitlines()]
    # accuracy 1, 0, 1, 1: rloo A_i = r_i - mean(others)
    assert adv == pytest.approx([1 - 2 / 3, 0 - 1, 1 - 2 / 3, 1 - 2 / 3], abs=1e-5)


def test_score_rejects_rows_without_completion(tmp_path, capsys):
    src = write_rows(tmp_path / "bad.jsonl", [{"prompt": "x", "completion": "y"}, {"prompt": "x"}])
    assert cli.main(["score", str(SMOKE), str(src)]) == 2
    assert "bad.jsonl:2: no 'completion' column; columns present: ['prompt']" in capsys.readouterr().err


def test_malformed_jsonl_names_file_and_line(tmp_path):
    from rlvr_plugins.train.data import read_jsonl

    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"prompt": "a"}\n{"prompt": \n')
    with pytest.raises(DataError, match=r"broken.jsonl:2: malformed JSON"):
        read_jsonl(str(bad))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(DataError, match="is empty"):
        read_jsonl(str(empty))
