"""Program extraction, test-case formats and the output comparison rule (no sandbox needed)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlvr_code.cases import (
    AssertTests,
    TestCase,
    answer_part,
    extract_program,
    load_assert_tests,
    load_cases,
    normalise_output,
    outputs_match,
    program_names,
)

FENCE = "```"


def block(code, tag="python"):
    return f"{FENCE}{tag}\n{code}\n{FENCE}"


def test_last_python_block_wins():
    completion = f"First try:\n{block('print(1)')}\nBetter:\n{block('print(2)')}\nDone."
    assert extract_program(completion) == "print(2)\n"


def test_code_inside_the_thinking_part_is_ignored():
    assert extract_program(f"<think>{block('print(1)')}</think>no code here") is None
    assert extract_program(f"<think>{block('print(1)')}</think>{block('print(2)')}") == "print(2)\n"
    assert extract_program(f"<think>still thinking {block('print(1)')}") is None
    assert extract_program(f"{block('print(1)')}", think_opened=True) is None
    assert extract_program(f"thinking</think>{block('print(3)')}", think_opened=True) == "print(3)\n"


def test_reopened_thinking_ends_the_answer_part():
    assert answer_part("a</think>answer<think>more") == "answer"


def test_tags_and_fallback_to_untagged_blocks():
    assert extract_program(block("print(1)", "py") + "\n" + block("int main(){}", "cpp")) == "print(1)\n"
    assert extract_program(block("print(1)", "Python3")) == "print(1)\n"
    assert extract_program(block("print(1)", "")) == "print(1)\n"
    assert extract_program(block("print(2)") + "\n" + block("print(1)", "")) == "print(2)\n"  # tagged beats untagged
    assert extract_program(block("int main(){}", "cpp")) is None


def test_unclosed_or_empty_blocks_are_not_programs():
    assert extract_program(f"{FENCE}python\nprint(1)\n") is None
    assert extract_program(block("print(1)") + f"\n{FENCE}python\nprint(2)\n") == "print(1)\n"
    assert extract_program(block("   ")) is None
    assert extract_program("print(1)") is None


def test_fence_with_indentation_and_trailing_text_on_the_opening_line():
    completion = f"  {FENCE}python title=sol.py\n  x = 1\n  print(x)\n  {FENCE}\n"
    assert extract_program(completion) == "  x = 1\n  print(x)\n"


CASES = [TestCase("1 2\n", "3\n"), TestCase("5 7\n", "12\n")]


@pytest.mark.parametrize(
    "raw",
    [
        [{"input": "1 2\n", "output": "3\n"}, {"input": "5 7\n", "output": "12\n"}],
        json.dumps([{"input": "1 2\n", "output": "3\n"}, {"input": "5 7\n", "output": "12\n"}]),
        {"inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]},
        json.dumps({"inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]}),
        {"input": ["1 2\n", "5 7\n"], "output": ["3\n", "12\n"]},
    ],
)
def test_stdin_formats(raw):
    assert load_cases(raw) == CASES


def test_lists_of_lines_are_joined():
    assert load_cases([{"input": ["1", "2"], "output": ["3"]}]) == [TestCase("1\n2\n", "3\n")]


@pytest.mark.parametrize("raw", [None, "", "  ", []])
def test_no_cases(raw):
    assert load_cases(raw) == []


@pytest.mark.parametrize(
    "raw, message",
    [
        ("{not json", "not valid JSON"),
        ({"inputs": ["1"], "outputs": []}, "equal length"),
        ({"inputs": ["1"], "outputs": ["1"], "fn_name": "f"}, "call-based tests"),
        ([{"input": "1"}], "test case 0 must be a mapping with 'input' and 'output'"),
        ([{"input": 1, "output": "1"}], "must be a string"),
        (42, "must be a list, a mapping or a JSON string"),
    ],
)
def test_malformed_tests_raise(raw, message):
    with pytest.raises(ValueError, match=message):
        load_cases(raw)


def test_assert_tests_formats():
    assert load_assert_tests("assert f(1) == 2") == AssertTests("assert f(1) == 2", ("f",))
    mbpp = load_assert_tests(["assert f(1) == 2", "assert g(2) == 3"], setup="import math")
    assert mbpp == AssertTests("import math\nassert f(1) == 2\nassert g(2) == 3\n", ("f", "g"))
    humaneval = load_assert_tests("def check(candidate):\n    assert candidate(1) == 2\n", entry_point="f")
    assert humaneval.code.endswith("\n\ncheck(f)\n") and humaneval.names == ("f",)
    assert load_assert_tests("assert f(1) == 2", entry_point="f") == AssertTests("assert f(1) == 2", ("f",))
    assert load_assert_tests(None) is None and load_assert_tests("") is None and load_assert_tests([]) is None
    with pytest.raises(ValueError, match="entry_point must be a Python identifier"):
        load_assert_tests("def check(c):\n    pass\n", entry_point="f); import os; (")


def test_names_the_tests_take_from_the_program():
    """Read and never bound, builtins aside: what the checker binds to the program's functions."""
    code = (
        "import math as m\nfrom os import path\nLIMIT = 3\ndef helper(x, *rest, k=1):\n    return [y for y in rest]\n"
        "class Box:\n    pass\ntry:\n    pass\nexcept ValueError as err:\n    print(err)\n"
        "for i in range(LIMIT):\n    assert solve(i, m.pi, path, helper, Box, len) == expected(i)\n"
    )
    assert program_names(code) == ("expected", "solve")


@pytest.mark.parametrize(
    "code, message",
    [
        ("assert f(1) ==", "test code is not valid Python: line 1"),
        ("assert 1 == 1", "uses no function of the program"),
        ("def f(x):\n    return x\nassert f(1) == 1", "uses no function of the program"),
        ("assert math.isclose(1.0, 1.0)", "uses no function of the program"),  # math: a module, not the program's
    ],
)
def test_assert_tests_that_cannot_judge_a_program_are_refused_at_load(code, message):
    with pytest.raises(ValueError, match=message):
        load_assert_tests(code)


def test_comparison_rule_examples():
    assert outputs_match("3\n", "3")
    assert outputs_match("1 2   \r\n3\t\n\n\n", "1 2\n3")
    assert not outputs_match("1\n", "1\n2\n")  # only the first expected line
    assert not outputs_match("1\n2\n3\n", "1\n2\n")  # an extra line
    assert not outputs_match(" 3", "3")  # leading space counts
    assert not outputs_match("YES", "yes")  # case counts
    assert not outputs_match("1\n\n2", "1\n2")  # an inner blank line counts
    assert not outputs_match("3.0", "3")  # no numeric tolerance
    assert outputs_match("", "\n")


lines = st.lists(
    st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=8),
    min_size=1,
    max_size=6,
)


@given(lines, st.lists(st.sampled_from([" ", "\t", "\r"]), max_size=3), st.integers(0, 3))
def test_trailing_whitespace_and_final_newlines_never_matter(body, pad, newlines):
    text = "\n".join(body)
    padded = "\n".join(line + "".join(pad) for line in body) + "\n" * newlines
    assert outputs_match(padded, text)
    assert normalise_output(normalise_output(text)) == normalise_output(text)


@given(lines)
def test_printing_only_the_first_line_never_passes(body):
    expected = "\n".join(body)
    if len(normalise_output(expected).split("\n")) >= 2:
        assert not outputs_match(body[0], expected)


def test_extraction_is_linear_on_a_megabyte_of_adversarial_input():
    from rlvr_plugins.testing import adversarial_texts, time_each

    texts = adversarial_texts(1_000_000)
    texts["fences_then_a_program"] = "```python\n" * 100_000 + "```\n"
    out = time_each(extract_program, texts, limit_s=2.0)
    assert {name: result for name, (result, _) in out.items() if result is not None} == {
        "fences_then_a_program": "```python\n" * 99_999,
        "closed_fences": "x\n",
    }
