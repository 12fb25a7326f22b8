"""The mode-compliance reward: each rule with a compliant and a violating completion, and its registration."""

from __future__ import annotations

import pickle

import pytest

from rlvr_plugins.manager import build_plugin_set
from rlvr_qwen_thinking.budget import EARLY_STOP_TEXT
from rlvr_qwen_thinking.compliance import ModeComplianceScorer, mode_compliance

BLOCK = "<think>\n\n</think>\n\n"


@pytest.mark.parametrize(
    "completion, expected",
    [
        ("<think>521</think><answer>125</answer>", 1.0),
        ("\n<think>\nlet me add\n</think>\n\n125", 1.0),
        ("<think>52" + EARLY_STOP_TEXT + "<answer>125</answer>", 1.0),  # cut by the budget: still a thinking response
        ("<think>\n\n</think>\n\n<answer>125</answer>", 0.0),  # empty thinking
        ("<answer>125</answer>", 0.0),  # no think block
        ("<think>521 and never closed", 0.0),
        ("<think>a<think>b</think>125", 0.0),
        ("125 <think>late</think>", 0.0),
    ],
)
def test_thinking_prompt_needs_a_non_empty_closed_think_block(completion, expected):
    for prompt in ("57+68=", "57+68= /think", "/no_think 57+68= /think"):
        assert mode_compliance(prompt, completion) == expected


def test_thinking_prompt_that_opens_the_block_needs_only_the_close():
    assert mode_compliance("57+68=<think>\n", "521</think><answer>125</answer>") == 1.0
    assert mode_compliance("57+68=<think>\n", " </think><answer>125</answer>") == 0.0


@pytest.mark.parametrize(
    "completion, expected",
    [
        ("<answer>125</answer>", 1.0),
        ("125", 1.0),
        ("", 0.0),
        ("  \n", 0.0),
        ("<think>521</think><answer>125</answer>", 0.0),
        ("<think>\n\n</think>\n\n<answer>125</answer>", 0.0),  # the block is already in the prompt
        ("125</think>", 0.0),
    ],
)
def test_non_thinking_prompt_with_block_needs_a_direct_answer_without_think_tags(completion, expected):
    assert mode_compliance("57+68= /no_think" + BLOCK, completion) == expected
    assert mode_compliance("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n" + BLOCK, completion) == expected


@pytest.mark.parametrize(
    "completion, expected",
    [
        ("<think>\n\n</think>\n\n<answer>125</answer>", 1.0),
        ("<think></think>125", 1.0),
        (" <think> \n</think> 125", 1.0),
        ("<answer>125</answer>", 0.0),  # the empty block must open the response
        ("<think>521</think><answer>125</answer>", 0.0),  # thinking content
        ("<think>\n\n</think>\n\n", 0.0),  # no answer
        ("<think></think>125<think>x</think>", 0.0),
    ],
)
def test_non_thinking_prompt_without_block_needs_the_empty_block_then_an_answer(completion, expected):
    assert mode_compliance("57+68= /no_think", completion) == expected
    assert (
        mode_compliance([{"role": "system", "content": "/no_think"}, {"role": "user", "content": "57+68="}], completion)
        == expected
    )


def test_reward_is_registered_only_with_a_positive_weight_and_is_picklable():
    assert build_plugin_set({"qwen-thinking": {}}).reward_functions() == []
    [(owner, reward)] = build_plugin_set({"qwen-thinking": {"compliance_weight": 0.5}}).reward_functions()
    assert (owner, reward.name, reward.weight) == ("qwen-thinking", "qwen-mode-compliance", 0.5)
    fn = pickle.loads(pickle.dumps(reward.fn))
    assert isinstance(fn, ModeComplianceScorer)
    assert fn(prompt="1+1= /no_think" + BLOCK, completion="<answer>2</answer>", example={"answer": "2"}) == 1.0
    assert fn(prompt="1+1=", completion="<answer>2</answer>", example={"answer": "2"}) == 0.0


def test_compliance_and_flags_are_linear_on_a_megabyte_of_adversarial_input():
    from rlvr_plugins.testing import adversarial_texts, time_each
    from rlvr_qwen_thinking.modes import explicit_flag

    texts = adversarial_texts(1_000_000)
    thinking = time_each(lambda text: mode_compliance("q", text), texts, limit_s=2.0)
    assert {name for name, (result, _) in thinking.items() if result} == {"interleaved_tags", "think_blocks"}
    flags = time_each(explicit_flag, texts, limit_s=2.0)
    assert {name: result for name, (result, _) in flags.items() if result is not None} == {"flags": False}


@pytest.mark.parametrize(
    "thought", ["\u200b" * 8, "\u2060\x00\ufeff", "\x00" * 3, "...", "---", ". . .", "\u3164\u200b ?"]
)
def test_invisible_or_placeholder_thinking_and_answers_do_not_comply(thought):
    """Issue 21, item 12: 'empty' is what a reader would read (a letter or digit among visible characters)."""
    assert mode_compliance("57+68=", f"<think>{thought}</think><answer>125</answer>") == 0.0
    assert mode_compliance("57+68= /no_think" + BLOCK, thought) == 0.0
    assert mode_compliance("57+68= /no_think", f"<think></think>{thought}") == 0.0
    assert mode_compliance("57+68=", f"<think>\u200b{thought}7+8=15</think>125") == 1.0  # real thinking around it
    assert mode_compliance("57+68= /no_think" + BLOCK, f"{thought} 125") == 1.0
