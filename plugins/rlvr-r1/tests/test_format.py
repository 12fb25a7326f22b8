import time
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_plugins.text import BLANK_LETTERS
from rlvr_r1.answers import extract_answer
from rlvr_r1.format import format_score, has_extractable_answer

GOOD = "<think>Add 2 and 3.</think><answer>5</answer>"

CASES = [
    ("canonical", GOOD, 1.0),
    ("whitespace around and between", "\n  <think>\nAdd 2 and 3.\n</think>\n\n<answer>\n5\n</answer>\n\t ", 1.0),
    ("spaces inside blocks", "<think> reasoning </think> <answer> 5 </answer>", 1.0),
    ("boxed answer", r"<think>r</think><answer>\boxed{\frac{1}{2}}</answer>", 1.0),
    ("latex symbol answer", r"<think>r</think><answer>$\pi$</answer>", 1.0),
    ("zero is an answer", "<think>r</think><answer>0</answer>", 1.0),
    ("unicode content", "<think>让我们想一想 😀</think><answer>四十二</answer>", 1.0),
    ("arabic-indic digits", "<think>r</think><answer>١٢</answer>", 1.0),
    ("nbsp is whitespace", "<think>r</think>\u00a0<answer>5</answer>", 1.0),
    ("empty think", "<think></think><answer>5</answer>", 0.0),
    ("whitespace-only think", "<think> \n\t </think><answer>5</answer>", 0.0),
    ("empty answer", "<think>r</think><answer></answer>", 0.0),
    ("whitespace-only answer", "<think>r</think><answer> \n </answer>", 0.0),
    ("punctuation-only answer", "<think>r</think><answer> ... ?! </answer>", 0.0),
    ("empty box", r"<think>r</think><answer>\boxed{}</answer>", 0.0),
    ("empty math", r"<think>r</think><answer>$ \, $</answer>", 0.0),
    ("empty text command", r"<think>r</think><answer>\text{ }</answer>", 0.0),
    ("duplicated think block", "<think>a</think><think>b</think><answer>5</answer>", 0.0),
    ("duplicated answer block", "<think>a</think><answer>5</answer><answer>6</answer>", 0.0),
    ("think nested in think", "<think>a<think>b</think></think><answer>5</answer>", 0.0),
    ("think nested in answer", "<think>a</think><answer><think>5</answer>", 0.0),
    ("answer nested in think", "<think>a<answer>5</answer></think><answer>5</answer>", 0.0),
    ("answer nested in answer", "<think>a</think><answer><answer>5</answer></answer>", 0.0),
    ("reordered blocks", "<answer>5</answer><think>a</think>", 0.0),
    ("closing before opening", "</think>a<think><answer>5</answer>", 0.0),
    ("text after answer", "<think>a</think><answer>5</answer> I hope this helps", 0.0),
    ("newline then text after answer", "<think>a</think><answer>5</answer>\n\nDone.", 0.0),
    ("text before think", "Sure! <think>a</think><answer>5</answer>", 0.0),
    ("text between blocks", "<think>a</think> so <answer>5</answer>", 0.0),
    ("zero-width space between blocks", "<think>a</think>\u200b<answer>5</answer>", 0.0),
    ("missing closing think", "<think>a<answer>5</answer>", 0.0),
    ("missing closing answer", "<think>a</think><answer>5", 0.0),
    ("missing answer block", "<think>a</think> 5", 0.0),
    ("missing think block", "<answer>5</answer>", 0.0),
    ("upper-case tags", "<THINK>a</THINK><ANSWER>5</ANSWER>", 0.0),
    ("mixed-case tag", "<Think>a</think><answer>5</answer>", 0.0),
    ("upper-case duplicate inside think", "<think>a <THINK> b</think><answer>5</answer>", 0.0),
    ("tag with inner space is not a tag", "< think>a</think><answer>5</answer>", 0.0),
    ("empty string", "", 0.0),
    ("plain text", "The answer is 5.", 0.0),
]

OPENED_CASES = [
    ("opened canonical", "Add 2 and 3.</think><answer>5</answer>", 1.0),
    ("opened with whitespace", "\nAdd 2 and 3.\n</think>\n<answer>5</answer>\n", 1.0),
    ("opened but tag repeated", "<think>Add 2 and 3.</think><answer>5</answer>", 0.0),
    ("opened empty reasoning", "  </think><answer>5</answer>", 0.0),
    ("opened nested think", "a<think>b</think><answer>5</answer>", 0.0),
    ("opened missing close", "Add 2 and 3.<answer>5</answer>", 0.0),
    ("opened text after answer", "a</think><answer>5</answer>x", 0.0),
]


@pytest.mark.parametrize("name,completion,expected", CASES, ids=[c[0] for c in CASES])
def test_format_cases(name, completion, expected):
    assert format_score(completion) == expected


@pytest.mark.parametrize("name,completion,expected", OPENED_CASES, ids=[c[0] for c in OPENED_CASES])
def test_format_think_opened(name, completion, expected):
    assert format_score(completion, think_opened=True) == expected


def test_opened_completion_fails_without_flag():
    assert format_score("Add 2 and 3.</think><answer>5</answer>") == 0.0


@pytest.mark.parametrize(
    "content,expected",
    [
        ("5", True),
        (r"\pi", True),
        ("x", True),
        (r"\boxed{}", False),
        ("$ $", False),
        ("...", False),
        (r"\left( \right)", False),
    ],
)
def test_has_extractable_answer(content, expected):
    assert has_extractable_answer(content) is expected


ADVERSARIAL = {
    "300 KB of <think>": "<think>" * (300_000 // 7),
    "300 KB of </answer> after a good prefix": GOOD + "</answer>" * (300_000 // 9),
    "300 KB of mixed tags": "<think></think><answer></answer>" * (300_000 // 32),
    "300 KB of case variants": "<ThInK></tHiNk>" * (300_000 // 15),
    "300 KB of almost-tags": "<think <answer </think" * (300_000 // 22),
}


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_repeated_tags_are_fast(name):
    start = time.perf_counter()
    assert format_score(ADVERSARIAL[name]) == 0.0
    assert format_score(ADVERSARIAL[name], think_opened=True) == 0.0
    assert time.perf_counter() - start < 0.5


def test_ten_megabytes_of_plain_text():
    text = "word " * 2_000_000
    start = time.perf_counter()
    assert format_score(text) == 0.0
    assert format_score(f"<think>{text}</think><answer>7</answer>") == 1.0
    assert format_score(f"<think>r</think><answer>{text}</answer>") == 1.0
    assert time.perf_counter() - start < 2.0


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_format_never_raises(text):
    assert format_score(text) in (0.0, 1.0)
    assert format_score(text, think_opened=True) in (0.0, 1.0)


_NO_TAGS = st.text(alphabet=st.characters(blacklist_characters="<"), max_size=40)


@settings(max_examples=300, deadline=None)
@given(_NO_TAGS, _NO_TAGS, st.sampled_from(["", " ", "\n", " \n\t"]))
def test_well_formed_shape(think, answer, gap):
    completion = f"{gap}<think>{think}</think>{gap}<answer>{answer}</answer>{gap}"
    seen = [c for c in think if unicodedata.category(c) not in ("Cf", "Cc") and c not in BLANK_LETTERS]
    expected = float(any(c.isalnum() for c in seen) and has_extractable_answer(answer))
    assert format_score(completion) == expected
    if expected:
        assert extract_answer(completion) == answer.strip()


def test_format_is_linear_on_a_megabyte_of_adversarial_input():
    from rlvr_plugins.testing import adversarial_texts, time_each

    out = time_each(format_score, adversarial_texts(1_000_000), limit_s=2.0)
    assert {result for result, _ in out.values()} == {0.0}


# --- what a reader would see (issue 21, item 12) -----------------------------------------------


@pytest.mark.parametrize(
    "thinking",
    [
        "\u200b",  # zero-width space
        "\u2060\u2060",  # word joiner
        "\x00\x00\x00",  # NUL
        "\u200b \u200c\n\u200d\ufeff\u00ad",  # zero-width (non-)joiners, BOM, soft hyphen, with whitespace
        "\u202e\u2066\u2069",  # bidirectional controls
        "\x1b\x7f\x07",  # escape, delete, bell
        "\u3164\u115f\u1160\uffa0",  # Hangul fillers: letters that draw nothing
        "\u2800\u2800",  # Braille blank
        "\U000e0020\U000e0041",  # tag characters
        "\u3000\u2003\u200a",  # ideographic, em, hair spaces
        "...",  # placeholders: punctuation only, nothing to read
        "---",
        ". . .",
        "?!\u200b*",
    ],
)
def test_a_think_block_of_only_invisible_characters_or_punctuation_is_empty(thinking):
    assert format_score(f"<think>{thinking}</think><answer>5</answer>") == 0.0
    assert format_score(f"{thinking}</think><answer>5</answer>", think_opened=True) == 0.0


@pytest.mark.parametrize(
    "thinking",
    ["Add 2 and 3.", "\u200bAdd\u200b 2 and 3.\u200b", "5", "2+3=5", "中", "\u3164a", "x\x00", "...so 5"],
)
def test_a_think_block_with_something_to_read_still_counts(thinking):
    assert format_score(f"<think>{thinking}</think><answer>5</answer>") == 1.0


def test_an_answer_of_only_invisible_letters_is_empty():
    assert has_extractable_answer("\u3164\u200b") is False
    assert format_score("<think>Add 2 and 3.</think><answer>\u3164</answer>") == 0.0
    assert format_score("<think>Add 2 and 3.</think><answer>\u200b5</answer>") == 1.0
