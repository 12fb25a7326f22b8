"""``build_fusion_sft`` on demo-task rows: the exact rows, the mix, reproducibility, explicit flags."""

from __future__ import annotations

import pytest

from rlvr_plugins.demo.task import make_problem, split_train_eval
from rlvr_qwen_thinking.modes import fused_no_think
from rlvr_qwen_thinking.sft import build_fusion_sft

BLOCK = "<think>\n\n</think>\n\n"


def test_thinking_and_non_thinking_rows_are_exactly_as_specified():
    rows = [make_problem(57, 68), make_problem(3, 4)]
    assert rows[0]["solution"] == "<think>521</think><answer>125</answer>"
    seed = next(s for s in range(100) if fused_no_think(s, 0, 0.5) and not fused_no_think(s, 1, 0.5))
    out = build_fusion_sft(rows, no_think_share=0.5, seed=seed)
    assert out == [
        {
            "prompt": "57+68= /no_think",
            "answer": "125",
            "difficulty": 2,
            "completion": "<think>\n\n</think>\n\n<answer>125</answer>",
            "thinking": False,
        },
        {
            "prompt": "3+4=",
            "answer": "7",
            "difficulty": 1,
            "completion": "<think>7</think><answer>7</answer>",
            "thinking": True,
        },
    ]


def test_the_mix_follows_the_share_and_is_reproducible():
    rows, _ = split_train_eval(400, 0, 3, max_digits=3)
    out = build_fusion_sft(rows, no_think_share=0.3, seed=9)
    assert out == build_fusion_sft(rows, no_think_share=0.3, seed=9)
    assert [r["thinking"] for r in out] == [not fused_no_think(9, i, 0.3) for i in range(400)]
    assert 0.3 - 0.1 < sum(not r["thinking"] for r in out) / 400 < 0.3 + 0.1  # 4.4 binomial sd (0.023 each)
    for row, source in zip(out, rows):
        if row["thinking"]:
            assert row["prompt"] == source["prompt"] and row["completion"] == source["solution"]
        else:
            assert row["prompt"] == source["prompt"] + " /no_think"
            assert row["completion"] == BLOCK + "<answer>" + source["answer"] + "</answer>"
    assert build_fusion_sft(rows, no_think_share=0.3, seed=10) != out
    assert all(r["thinking"] for r in build_fusion_sft(rows, no_think_share=0.0, seed=9))


def test_explicit_flags_decide_the_mode_and_are_not_repeated():
    rows = [
        {"prompt": "2+2= /no_think", "solution": "<think>4</think>\n<answer>4</answer>"},
        {"prompt": "2+3= /think", "solution": "<think>5</think><answer>5</answer>"},
    ]
    out = build_fusion_sft(rows, no_think_share=0.0, seed=0) + build_fusion_sft(rows, no_think_share=1.0, seed=0)
    for first, second in (out[0:2], out[2:4]):
        assert first == {"prompt": "2+2= /no_think", "completion": BLOCK + "<answer>4</answer>", "thinking": False}
        assert second == {"prompt": "2+3= /think", "completion": "<think>5</think><answer>5</answer>", "thinking": True}


def test_a_solution_without_a_think_block_is_an_error_naming_the_row():
    rows = [make_problem(1, 2), make_problem(1, 2, cot="none")]
    with pytest.raises(ValueError, match="row 1: column 'solution' must hold a worked solution with a think block"):
        build_fusion_sft(rows, no_think_share=0.5, seed=0)
    with pytest.raises(ValueError, match=r"no_think_share must be in \[0, 1\]"):
        build_fusion_sft(rows, no_think_share=2.0, seed=0)
