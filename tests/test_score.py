"""``rlvr score``: rewards, penalties, totals and advantages per group, computed by hand."""

import json
import math
import os
import subprocess
import sys
import textwrap
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


PEAK_RSS = textwrap.dedent(
    """
    import resource, subprocess, sys
    done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
    print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
    print(done.stdout + done.stderr, file=sys.stderr)
    """
)
"""Runs a command and prints its exit status and the peak RSS (MiB) of its largest process, workers included."""


def test_completions_of_15_and_50_mb_get_no_score_and_the_others_are_scored_in_bounded_memory(tmp_path):
    """Issue 21, item 6: a 15 MB completion took 6.4 GB (the token count) and a 50 MB one aborted with nothing
    written. Now both are over engine.max_completion_mb (4 MiB): not tokenized, not scored, with the reason."""

    def huge(megabytes):
        return "<think>" + "Let me think. " * (megabytes * 1_000_000 // 14) + "</think><answer>5</answer>"

    rows = [
        {"prompt": "2+3=", "completion": "<think>Add them.</think><answer>5</answer>", "answer": "5", "group": "a"},
        {"prompt": "2+3=", "completion": huge(15), "answer": "5", "group": "a"},
        {"prompt": "2+3=", "completion": "<think>Add them.</think><answer>6</answer>", "answer": "5", "group": "a"},
        {"prompt": "1+1=", "completion": huge(50), "answer": "2", "group": "b"},
        {"prompt": "1+1=", "completion": "<think>One and one.</think><answer>2</answer>", "answer": "2", "group": "b"},
    ]
    config = tmp_path / "score.yaml"
    config.write_text(
        "model: {tiny: {}}\nplugins: {r1-accuracy: {}, r1-format: {}, r1-language: {}}\n"
        "engine: {workers: 1, timeout_s: 10}\n"
    )
    out = tmp_path / "scored.jsonl"
    rlvr = str(Path(sys.executable).with_name("rlvr"))
    command = [sys.executable, "-c", PEAK_RSS, rlvr, "score", str(config), str(write_rows(tmp_path / "r.jsonl", rows))]
    env = {**os.environ, "RLVR_MAX_LINE_MB": "64", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([*command, "--output", str(out)], capture_output=True, text=True, env=env, timeout=120)
    status, peak_mib = map(int, done.stdout.split())
    assert status == 0, done.stderr
    assert peak_mib < 1024, f"peak RSS {peak_mib} MiB"  # 6.4 GB before, for the 15 MB row alone
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["row"] for r in scored] == [0, 1, 2, 3, 4]
    for i, mib in ((1, "14.3"), (3, "47.7")):  # 15,000,025 and 50,000,023 bytes
        assert scored[i]["scored"] is False and scored[i]["advantage"] == 0.0
        assert (
            scored[i]["r1-accuracy"]
            is scored[i]["r1-format"]
            is scored[i]["r1-language"]
            is scored[i]["reward"]
            is None
        )
        assert scored[i]["not_scored"] == (
            f"the completion is {mib} MiB of text, over max_completion_mb=4 (engine.max_completion_mb in a config): "
            "not scored"
        )
        assert f"row {i}: the completion is {mib} MiB of text" in done.stderr
    # the others, scored without the huge rows: group a has totals 3 and 2 (mean 2.5, sample std sqrt(0.5))
    assert [scored[i]["reward"] for i in (0, 2, 4)] == [3.0, 2.0, 3.0]
    assert [scored[i]["advantage"] for i in (0, 2)] == pytest.approx(
        [0.5 / (math.sqrt(0.5) + 1e-4), -0.5 / (math.sqrt(0.5) + 1e-4)], abs=1e-5
    )
    assert scored[4]["advantage"] == 0.0 and all(scored[i]["scored"] for i in (0, 2, 4))


def test_score_needs_no_model_section_and_then_counts_characters(tmp_path, capsys):
    """Issue 26: rlvr score demanded a model: section only to count tokens. Without one it counts with the demo's
    character tokenizer (documented), so the scores equal those of a config naming that tokenizer."""
    plugins = "plugins: {r1-accuracy: {}, kimi-length: {warmup_steps: 0}}\nengine: {in_process: true}\n"
    (tmp_path / "bare.yaml").write_text(plugins)
    (tmp_path / "char.yaml").write_text("model: {tiny: {}, tokenizer: char}\n" + plugins)
    src = write_rows(tmp_path / "r.jsonl", ROWS[:4])
    for name in ("bare", "char"):
        assert cli.main(["score", str(tmp_path / f"{name}.yaml"), str(src), "--output", str(tmp_path / name)]) == 0
    out = capsys.readouterr().out
    assert out.count("note: the config has no model section, so completion lengths") == 1
    bare, char = ((tmp_path / n).read_text() for n in ("bare", "char"))
    assert bare == char
    # tokens: the four tags one each, then characters: 8, 8, 4, 14; Kimi's lambda = 0.5 - (len - 4) / (14 - 4),
    # kept for a correct answer, min(lambda, 0) for a wrong one (row 1)
    assert [json.loads(line)["kimi-length"] for line in bare.splitlines()] == pytest.approx([0.1, 0.0, 0.5, -0.5])
