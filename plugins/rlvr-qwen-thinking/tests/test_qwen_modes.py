"""Mode flags (last one wins, whole words only), the fusion decision, adding the flag."""

from __future__ import annotations

import math

import pytest

from rlvr_qwen_thinking.modes import explicit_flag, fused_no_think, thinking_mode, with_no_think_flag


def msg(role, content):
    return {"role": role, "content": content}


@pytest.mark.parametrize(
    "prompt, expected",
    [
        ("What is 2+2?", True),
        ("What is 2+2? /no_think", False),
        ("What is 2+2? /think", True),
        ("/no_think What is 2+2?", False),
        ("first /no_think then /think", True),
        ("first /think then /no_think", False),
        ("(/no_think)", False),
        ("ends with a full stop /no_think.", False),
        ("line one\n/no_think\nline two", False),
    ],
)
def test_flags_in_a_string_prompt_last_one_wins(prompt, expected):
    assert thinking_mode(prompt) is expected


@pytest.mark.parametrize(
    "prompt",
    [
        "a/no_think",
        "x//no_think",
        "/no_thinking",
        "/no_think_more",
        "/no_think/x",
        "</no_think>",
        "<think>reasoning</think>",
        "re-/no_think",
        "/no_think-mode",
        "no_think",
        "/NO_THINK",
    ],
)
def test_a_flag_inside_another_word_or_tag_is_not_a_flag(prompt):
    assert explicit_flag(prompt) is None
    assert thinking_mode(prompt) is True


def test_system_message_flag_applies_when_the_user_says_nothing():
    assert thinking_mode([msg("system", "You are terse. /no_think"), msg("user", "2+2?")]) is False
    assert thinking_mode([msg("system", "You are terse."), msg("user", "2+2? /no_think")]) is False


def test_user_flag_after_the_system_flag_overrides_it():
    assert thinking_mode([msg("system", "/no_think"), msg("user", "prove it /think")]) is True
    assert thinking_mode([msg("system", "/think"), msg("user", "just answer /no_think")]) is False


def test_multi_turn_the_last_flag_wins_and_assistant_turns_carry_no_flag():
    conversation = [
        msg("user", "2+2? /no_think"),
        msg("assistant", "4"),
        msg("user", "and 3+3?"),
        msg("assistant", "6 /think"),
        msg("user", "and 4+4?"),
    ]
    assert explicit_flag(conversation) is False  # the assistant's "/think" is not a flag
    conversation += [msg("assistant", "8"), msg("user", "explain carefully /think")]
    assert explicit_flag(conversation) is True
    assert thinking_mode([msg("user", "hi"), msg("assistant", "hello")]) is True


def test_text_parts_of_multimodal_content_are_scanned():
    assert thinking_mode([msg("user", [{"type": "image"}, {"type": "text", "text": "what is it? /no_think"}])]) is False


def test_with_no_think_flag_appends_to_the_text_or_the_last_user_message():
    assert with_no_think_flag("57+68=") == "57+68= /no_think"
    messages = [msg("system", "Be brief."), msg("user", "Q1"), msg("assistant", "A1"), msg("user", "Q2")]
    assert with_no_think_flag(messages) == [
        msg("system", "Be brief."),
        msg("user", "Q1"),
        msg("assistant", "A1"),
        msg("user", "Q2 /no_think"),
    ]
    assert messages[-1] == msg("user", "Q2")  # not modified in place
    assert with_no_think_flag([msg("system", "S")]) == [msg("system", "S /no_think")]
    with pytest.raises(ValueError, match="no user or system message"):
        with_no_think_flag([msg("assistant", "A")])


def test_fusion_share_is_respected_statistically():
    n = 4000
    for share in (0.1, 0.3, 0.5):
        chosen = sum(fused_no_think(7, i, share) for i in range(n))
        # binomial standard deviation sqrt(n p (1-p)); allow 4 of them
        assert abs(chosen - n * share) <= 4 * math.sqrt(n * share * (1 - share)), (share, chosen)
    assert not any(fused_no_think(7, i, 0.0) for i in range(200))
    assert all(fused_no_think(7, i, 1.0) for i in range(200))


def test_fusion_is_reproducible_from_seed_and_index_only():
    forward = [fused_no_think(3, i, 0.4) for i in range(300)]
    backward = [fused_no_think(3, i, 0.4) for i in reversed(range(300))][::-1]
    assert forward == backward
    other_seed = [fused_no_think(4, i, 0.4) for i in range(300)]
    assert forward != other_seed
    # rows chosen at a share stay chosen at any larger share
    smaller = {i for i in range(300) if fused_no_think(3, i, 0.2)}
    assert smaller <= {i for i, c in enumerate(forward) if c} and 0 < len(smaller) < sum(forward)
