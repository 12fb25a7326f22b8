"""``rlvr score`` end to end with judge-equivalence and the stub judge: rules rows, judged rows, masked rows."""

import json
import math

import pytest

from rlvr_plugins import cli

pytestmark = pytest.mark.slow  # the CLI imports torch and starts a reward worker

ROD, FIVE = "How long is the rod?", "What is 2+3?"
ROWS = [
    {"prompt": ROD, "completion": "<answer>0.5 metres</answer>", "answer": "50 cm", "group": "a"},  # judge: yes
    {"prompt": ROD, "completion": "<answer>5 metres</answer>", "answer": "50 cm", "group": "a"},  # judge: no
    {"prompt": ROD, "completion": "I do not know.", "answer": "50 cm", "group": "a"},  # rules: no answer
    {"prompt": ROD, "completion": "<answer>0.5  metres</answer>", "answer": "50 cm", "group": "a"},  # cached
    {"prompt": FIVE, "completion": "<answer>5</answer>", "answer": "5", "group": "b"},  # rules: equal
    {"prompt": FIVE, "completion": "<answer>6</answer>", "answer": "5", "group": "b"},  # rules: differ
]


def run_score(tmp_path, base_url, name):
    config = tmp_path / f"{name}.yaml"
    config.write_text(
        "model: {tiny: {}}\n"
        f"plugins: {{judge-equivalence: {{model: stub-judge, base_url: '{base_url}', timeout_s: 1.0, retries: 1, "
        "backoff_s: 0.05}}\n"
        "engine: {workers: 1, timeout_s: 10}\n"
    )
    rows = tmp_path / "rollouts.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = tmp_path / f"{name}.jsonl"
    assert cli.main(["score", str(config), str(rows), "--output", str(out)]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_score_asks_the_judge_only_where_rules_cannot_decide(tmp_path, stub, capsys):
    scored = run_score(tmp_path, stub.base_url, "up")
    assert [r["judge-equivalence"] for r in scored] == [1, 0, 0, 1, 1, 0]
    assert stub.count == 2  # rows 1 and 2; row 4 repeats row 1's pair, rows 3, 5, 6 are decided by the rules
    answers = [r["body"]["messages"][0]["content"].split("Final answer: ")[1].split("\n")[0] for r in stub.requests]
    assert sorted(answers) == ["0.5 metres", "5 metres"]
    std_a, std_b = math.sqrt(1 / 3), math.sqrt(1 / 2)  # sample std of [1, 0, 0, 1] and of [1, 0]
    expected = [
        0.5 / (std_a + 1e-4),
        -0.5 / (std_a + 1e-4),
        -0.5 / (std_a + 1e-4),
        0.5 / (std_a + 1e-4),
        0.5 / (std_b + 1e-4),
        -0.5 / (std_b + 1e-4),
    ]
    assert [r["advantage"] for r in scored] == pytest.approx(expected, abs=1e-5)
    assert all(r["scored"] for r in scored)
    assert "could not be scored" not in capsys.readouterr().out


def test_score_masks_the_rows_the_judge_could_not_answer(tmp_path, dead_url, capsys):
    scored = run_score(tmp_path, dead_url, "down")
    assert [r["judge-equivalence"] for r in scored] == [None, None, 0, None, 1, 0]
    assert [r["scored"] for r in scored] == [False, False, True, False, True, True]
    assert [r["reward"] for r in scored] == [None, None, 0, None, 1, 0]
    # group a keeps one valid row (advantage 0); group b is untouched
    std_b = math.sqrt(1 / 2)
    assert [r["advantage"] for r in scored] == pytest.approx(
        [0, 0, 0, 0, 0.5 / (std_b + 1e-4), -0.5 / (std_b + 1e-4)], abs=1e-5
    )
    assert "3 row(s) could not be scored" in capsys.readouterr().out
