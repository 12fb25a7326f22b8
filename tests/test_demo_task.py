"""The demo's building blocks: tokenizer, task generator (incl. the sloppy teacher), tiny model."""

import pytest

from rlvr_plugins.demo.task import _slipped_solution, make_problem, split_train_eval


def test_columns_solution_spells_out_every_carry():
    row = make_problem(57, 68, cot="columns")
    assert row == {
        "prompt": "57+68=",
        "answer": "125",
        "difficulty": 2,
        "solution": "<think>7+8=15,5+6+1=12</think><answer>125</answer>",
    }


def test_slipped_teacher_forgets_carries_but_answers_stay_true():
    assert _slipped_solution(57, 68) == "<think>7+8=15,5+6=11</think><answer>115</answer>"
    assert _slipped_solution(123, 9) == "<think>3+9=12,2+0=2,1+0=1</think><answer>122</answer>"
    assert _slipped_solution(5, 7) == "<think>5+7=12</think><answer>12</answer>"  # one column: nothing to forget
    clean, _ = split_train_eval(400, 0, 3)
    sloppy, _ = split_train_eval(400, 0, 3, carry_slip=0.6)
    assert [r["prompt"] for r in clean] == [r["prompt"] for r in sloppy]
    assert [r["answer"] for r in clean] == [r["answer"] for r in sloppy]
    changed = [r for r, c in zip(sloppy, clean) if r["solution"] != c["solution"]]
    a_b = [tuple(map(int, r["prompt"][:-1].split("+"))) for r in changed]
    assert all(r["solution"] == _slipped_solution(a, b) for r, (a, b) in zip(changed, a_b))
    with_carry = [r for r in clean if _slipped_solution(*map(int, r["prompt"][:-1].split("+"))) != r["solution"]]
    assert 0.5 < len(changed) / len(with_carry) < 0.7  # 60 % of the rows where forgetting matters


def test_train_and_eval_problems_are_disjoint_and_reproducible():
    train, held_out = split_train_eval(3000, 400, 0)
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in held_out}
    assert split_train_eval(3000, 400, 0) == (train, held_out)
    assert len({r["prompt"] for r in held_out}) == 400


def test_carry_slip_needs_the_columns_style():
    with pytest.raises(ValueError, match="carry_slip needs cot='columns'"):
        split_train_eval(10, 0, 0, cot="reverse", carry_slip=0.5)


def test_char_tokenizer_markers_are_single_tokens_and_round_trip(tmp_path):
    from transformers import AutoTokenizer

    from rlvr_plugins.testing import char_tokenizer

    tok = char_tokenizer()
    text = "<think>7+8=15</think><answer>15</answer>"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == 4 + len("7+8=15") + len("15")
    assert tok.decode(ids + [tok.eos_token_id], skip_special_tokens=True) == text
    tok.save_pretrained(tmp_path)
    assert AutoTokenizer.from_pretrained(tmp_path)(text, add_special_tokens=False)["input_ids"] == ids


def test_demo_config_leaves_exactly_the_teachers_slips_as_headroom_for_rl():
    """configs/demo.yaml: SFT to its plateau imitates the majority habit (carry_slip > 0.5: drop the
    carry), which is right on 241 of the 400 held-out problems (60.2 %); the rest is what GRPO can
    add (README, "The demo"). 22,400 rows go to SFT (700 steps at batch 32), 4,000 to RL."""
    from pathlib import Path

    from rlvr_plugins.demo.task import extract_answer
    from rlvr_plugins.train.config import load_config
    from rlvr_plugins.train.data import load_rows

    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "demo.yaml")
    assert config["data"]["train"]["options"]["carry_slip"] > 0.5
    held_out = load_rows(config, "eval")
    slipped = [
        extract_answer(_slipped_solution(*map(int, r["prompt"][:-1].split("+")))) == r["answer"] for r in held_out
    ]
    assert (len(held_out), sum(slipped)) == (400, 241)
    sft = config["sft"]
    assert (
        sft["examples"] // sft["per_device_train_batch_size"],
        config["data"]["train"]["size"] - sft["examples"],
    ) == (700, 4000)


def test_sft_final_loss_is_the_last_logging_window_not_the_run_average():
    """summary.json's ``sft_final_loss`` (read by benchmarks/demo_grid.py): whether the SFT reached
    its plateau is the last window's loss; TRL's closing ``train_loss`` is the whole run's mean."""
    from rlvr_plugins.train.sft import last_logged_loss

    history = [{"loss": 2.183, "step": 50}, {"loss": 0.09012, "step": 500}, {"train_loss": 0.61, "step": 500}]
    assert last_logged_loss(history) == 0.0901
    assert last_logged_loss([{"train_loss": 0.61, "step": 3}]) is None
    assert last_logged_loss([]) is None


def test_the_eval_split_alone_is_the_one_split_train_eval_draws():
    from rlvr_plugins.demo.task import eval_problems, split_train_eval

    options = {"max_digits": 3, "cot": "columns", "carry_slip": 0.6}
    assert eval_problems(40, 7, **options) == split_train_eval(500, 40, 7, **options)[1]
