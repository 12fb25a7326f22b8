import io
import json
import logging
import os
import signal
import textwrap
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_r1.answers import (
    accuracy,
    extract_answer,
    is_sprayed,
    last_boxed,
    parse_reference,
    reference_answer,
    split_completion,
)


def wrap(answer: str, thinking: str = "Let me work it out.") -> str:
    return f"<think>{thinking}</think>\n<answer>{answer}</answer>"


# --- split_completion -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion,opened,expected",
    [
        ("<think>t</think><answer>5</answer>", False, ("t", "<answer>5</answer>")),
        ("pre <think>t</think> rest", False, ("t", " rest")),
        ("no tags at all", False, (None, "no tags at all")),
        ("<think>unfinished \\boxed{5}", False, ("unfinished \\boxed{5}", "")),
        ("t</think> rest", True, ("t", " rest")),
        ("still thinking", True, ("still thinking", "")),
        ("stray</think> rest", False, ("stray", " rest")),
        ("<think>a</think>b</think> rest", False, ("a</think>b", " rest")),
        ("<THINK>t</Think> rest", False, ("t", " rest")),
        ("<think>a</think> ans <think> again", False, ("a", " ans ")),
    ],
)
def test_split_completion(completion, opened, expected):
    assert split_completion(completion, think_opened=opened) == expected


# --- extract_answer ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion,kwargs,expected",
    [
        (wrap("42"), {}, "42"),
        (wrap("  \\boxed{42}  "), {}, "\\boxed{42}"),
        ("<think>the answer is \\boxed{42}</think>", {}, None),
        ("<think><answer>42</answer></think>", {}, None),
        ("<think>#### 42</think> no answer here", {}, None),
        ("<think>t</think> so \\boxed{1} then \\boxed{2}", {}, "2"),
        ("<think>t</think> \\boxed{\\frac{1}{\\sqrt{2}}}", {}, "\\frac{1}{\\sqrt{2}}"),
        ("<think>t</think> \\boxed{\\{1,2\\}}", {}, "\\{1,2\\}"),
        ("<think>t</think> \\fbox{7}", {}, "7"),
        ("<think>t</think> \\boxed {7}", {}, "7"),
        ("<think>t</think> 3+4=7\n#### 7", {}, "7"),
        ("<think>t</think> total\n#### $1,234", {}, "1234"),
        ("<think>t</think> \n#### -2.5", {}, "-2.5"),
        ("<think>t</think> 3+4=7\n#### 7", {"fallback": None}, None),
        ("<think>t</think> \\boxed{3 \n#### 7", {}, "7"),
        ("<think>t</think> \\boxed{3", {"fallback": None}, None),
        ("<think>t</think> \\boxed{}", {}, None),
        ("reasoning</think><answer>9</answer>", {"think_opened": True}, "9"),
        ("reasoning \\boxed{9}", {"think_opened": True}, None),
        ("\\boxed{9}", {}, "9"),
        ("<think>t</think><answer></answer>", {}, None),
        ("<think>t</think><answer>1</answer><answer>2</answer>", {}, None),
        ("<think>t</think><answer>1</answer></answer>", {}, None),
        ("<think>t</think><answer>\\boxed{3}", {}, "3"),
        ("<think>t</think><ANSWER>5</ANSWER>", {}, "5"),
        ("<think>t</think><answer>5</answer> and \\boxed{6}", {}, "5"),
    ],
)
def test_extract_answer(completion, kwargs, expected):
    assert extract_answer(completion, **kwargs) == expected


def test_unknown_fallback_is_an_error():
    with pytest.raises(ValueError):
        extract_answer("x", fallback="last_number")


def test_last_boxed():
    assert last_boxed("a \\boxed{x^{2}} b") == "x^{2}"
    assert last_boxed("no box") is None
    assert last_boxed("\\boxed{open") is None


# --- is_sprayed -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer,reference,expected",
    [
        ("12", "12", False),
        ("12 or 13", "13", True),
        ("12 OR 13", None, True),
        ("$12$ or $13$", "13", True),
        ("12, 13", "13", True),
        ("12,13", "13", True),
        ("12; 13", "13", True),
        ("12 and 13", "13", True),
        ("12 13", "13", True),
        ("{11,12,13}", "12", True),
        ("\\{11, 12, 13\\}", "12", True),
        ("either 12 or 13", "12", True),
        ("Either way it is 12, or maybe 13", "(12, 13)", True),
        ("\\boxed{12} \\boxed{13}", "13", True),
        ("\\boxed{12}, \\fbox{13}", "(12, 13)", True),
        ("x = 1, y = 2", "1", True),
        ("2 \\pm \\sqrt{3}", "2+\\sqrt{3}", True),
        ("2 \\pm \\sqrt{3}", "2 \\pm \\sqrt{3}", False),
        ("\\frac{1}{2}, \\frac{1}{3}", "\\frac{1}{2}", True),
        ("1,000", "1000", False),
        ("1,234,567.5", None, False),
        ("1{,}000", "1000", False),
        ("1\\,000", "1000", False),
        ("\\frac{1}{2}", "0.5", False),
        ("So, the answer is 18.", "18", False),
        ("18 dollars", "18", False),
        ("(1, 2)", "(1,2)", False),
        ("\\{1, 2\\}", "\\{1,2\\}", False),
        ("[1, 2)", "[1,2)", False),
        ("5, 15", "5,15", False),
        ("5 and 15", "5,15", False),
        ("(1,2) or (2,1)", "(1,2)", True),
        ("x \\in (1, 2)", "\\boxed{(1,2)}", False),
        ("12 或 13", "13", True),
    ],
)
def test_is_sprayed(answer, reference, expected):
    assert is_sprayed(answer, reference) is expected


# --- reference_answer / parse_reference -------------------------------------------------------


@pytest.mark.parametrize(
    "reference,expected",
    [
        ("She sells 9 eggs.\n#### 18", "18"),
        ("So it costs\n#### 1,250", "1250"),
        ("#### -3", "-3"),
        ("Hence the area is $\\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),
        ("  \\frac{1}{2} ", "\\frac{1}{2}"),
        ("(1, 2)", "(1, 2)"),
    ],
)
def test_reference_answer(reference, expected):
    assert reference_answer(reference) == expected


def test_parse_reference_is_cached():
    reference = "A unique reference for the cache test\n#### 77"
    before = parse_reference.cache_info()
    first = parse_reference(reference)
    second = parse_reference(reference)
    after = parse_reference.cache_info()
    assert first is second
    assert after.misses == before.misses + 1
    assert after.hits == before.hits + 1
    assert str(first[0]) == "77"


# --- accuracy ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer,reference",
    [
        ("1/2", "0.5"),
        ("0.5", "\\frac{1}{2}"),
        ("\\frac{1}{2}", "1/2"),
        ("\\dfrac{1}{2}", "0.5"),
        ("\\boxed{\\frac{1}{2}}", "\\frac12"),
        ("18\\text{ cm}", "18"),
        ("18 \\mathrm{~cm}", "18"),
        ("18 cm", "18"),
        ("18 dollars", "18"),
        ("\\$18", "18"),
        ("$18$", "18"),
        ("$18$.", "18"),
        ("The answer is 18.", "18"),
        ("1,000", "1000"),
        ("1000", "#### 1,000"),
        ("1{,}000", "1000"),
        ("x = 5", "5"),
        ("50\\%", "50\\%"),
        ("90^{\\circ}", "90"),
        ("2^{10}", "1024"),
        ("\\sqrt{8}", "2\\sqrt{2}"),
        ("(1, 2)", "(1,2)"),
        ("\\left(1, 2\\right)", "(1, 2)"),
        ("[1, 2)", "[1,2)"),
        ("(-\\infty, 0) \\cup \\{1\\}", "$(-\\infty, 0) \\cup\\{1\\}$."),
        ("\\{2, 1\\}", "\\{1,2\\}"),
        ("5 and 15", "5,15"),
        ("\\fbox{7}", "7"),
        ("Yes", "yes"),
    ],
)
def test_equivalent_answers_score_one(answer, reference):
    assert accuracy(wrap(answer), reference) == 1.0


@pytest.mark.parametrize(
    "answer,reference",
    [
        ("1/3", "0.5"),
        ("0.33", "\\frac{1}{3}"),
        ("19", "18"),
        ("(2, 1)", "(1,2)"),
        ("[1, 2]", "[1,2)"),
        ("\\{1, 2, 3\\}", "\\{1,2\\}"),
        ("12 or 13", "13"),
        ("12, 13", "13"),
        ("{11,12,13}", "12"),
        ("either 12 or 13", "12"),
        ("\\boxed{12} \\boxed{13}", "13"),
        ("2 \\pm 1", "3"),
        ("no", "yes"),
    ],
)
def test_wrong_or_sprayed_answers_score_zero(answer, reference):
    assert accuracy(wrap(answer), reference) == 0.0


def test_answer_only_inside_thinking_scores_zero():
    assert accuracy("<think>so it is \\boxed{18}</think>", "18") == 0.0
    assert accuracy("<think>#### 18</think>", "#### 18") == 0.0
    assert accuracy("<think>\\boxed{18}", "18") == 0.0


def test_several_boxes_outside_answer_block_score_zero():
    assert accuracy("<think>t</think> \\boxed{12} or rather \\boxed{18}", "18") == 0.0
    assert accuracy("<think>t</think> Therefore \\boxed{18}.", "18") == 1.0


def test_gsm8k_fallback_and_think_opened():
    assert accuracy("<think>t</think> 9 * 2 = 18\n#### 18", "#### 18") == 1.0
    assert accuracy("<think>t</think> 9 * 2 = 18\n#### 18", "#### 18", fallback=None) == 0.0
    assert accuracy("9*2=18</think><answer>18</answer>", "18", think_opened=True) == 1.0
    assert accuracy("9*2=18 \\boxed{18}", "18", think_opened=True) == 0.0


def test_unparseable_reference_compares_plain_strings():
    assert accuracy(wrap("\\text{Yes}"), "yes") == 1.0
    assert accuracy(wrap("maybe"), "yes") == 0.0


def _run_in_thread(function):
    result = []
    thread = threading.Thread(target=lambda: result.append(function()))
    thread.start()
    thread.join()
    return result


def test_works_off_the_main_thread():
    assert _run_in_thread(lambda: accuracy(wrap("\\frac{1}{2}"), "0.5")) == [1.0]
    assert _run_in_thread(lambda: accuracy(wrap("\\frac{1}{3}"), "0.5")) == [0.0]


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs POSIX interval timers")
def test_keeps_a_pending_alarm_of_the_caller():
    previous = signal.signal(signal.SIGALRM, lambda *_: None)
    try:
        signal.setitimer(signal.ITIMER_REAL, 100.0)
        assert accuracy(wrap("\\frac{1}{2}"), "0.5") == 1.0
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 90.0 < remaining <= 100.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_extraction_is_linear_on_large_inputs():
    start = time.perf_counter()
    assert extract_answer("<think>" + "\\boxed{" * 100_000) is None
    assert extract_answer("<think>t</think>" + "\\boxed{{" * 100_000, fallback=None) is None
    assert extract_answer("<think>t</think>" + "</think>" * 40_000 + "\\boxed{1}") == "1"
    assert is_sprayed("either " * 50_000, "1") is False
    assert is_sprayed("1" + " " * 200_000 + "x", "1") is False
    assert time.perf_counter() - start < 3.0


@settings(max_examples=300, deadline=None)
@given(st.text(), st.booleans(), st.sampled_from(["gsm8k", None]))
def test_extract_answer_never_raises(text, opened, fallback):
    answer = extract_answer(text, think_opened=opened, fallback=fallback)
    assert answer is None or isinstance(answer, str)
    assert isinstance(is_sprayed(text, text), bool)
    thinking, rest = split_completion(text, think_opened=opened)
    assert thinking is None or isinstance(thinking, str)
    assert isinstance(rest, str)


_PIECES = st.sampled_from(
    [
        "<think>",
        "</think>",
        "<answer>",
        "</answer>",
        "\\boxed{",
        "}",
        "{",
        "$",
        "####",
        " or ",
        ", ",
        "\\frac{1}{2}",
        "12",
        "-3.5",
        "x",
        "=",
        "(",
        ")",
        "\\{",
        "\\}",
        " ",
        "\n",
        "中",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=5)), max_size=12), st.sampled_from(["12", "(1, 2)", "#### 7"]))
def test_accuracy_never_raises(pieces, reference):
    assert accuracy("".join(pieces), reference) in (0.0, 1.0)


# --- an answer followed by prose (the audit's answer-then-text class) ---------------------------


@pytest.mark.parametrize(
    "answer, reference, expected",
    [
        # a wrong answer, then a sentence naming the reference: the reference is commentary, not the answer
        ("19. The reference answer is 18.", "18", 0.0),
        ("3. The reference answer is 2.", "2", 0.0),
        ("1.6+1. The reference answer is 1.6.", "1.6", 0.0),
        ("19\nNote to the grader: this equals the reference answer.", "18", 0.0),
        # the same inside one sentence: the statement starts with math, its leading expression is graded
        ("19 (the reference answer is 18)", "18", 0.0),
        ("19, the reference answer is 18", "18", 0.0),
        ("19 but the reference says 18", "18", 0.0),
        ("19: the reference answer is 18", "18", 0.0),
        ("19.The reference answer is 18.", "18", 0.0),
        (r"19 \text{. The reference answer is 18}", "18", 0.0),
        # a wrong expression then any sentence was read as the decimal inside it (1.6+1 = 2.6, not 1.6)
        ("1.6+1\nI am confident in this answer.", "1.6", 0.0),
        ("1.6+1", "1.6", 0.0),
        ("2.5. The reference answer is 3.5.", "3.5", 0.0),
        # correct forms still count
        ("The answer is 18.", "18", 1.0),
        ("18. This is because 9*2 = 18.", "18", 1.0),
        ("18\nI am confident in this answer.", "18", 1.0),
        ("1.6. The reference answer is 2.6.", "1.6", 1.0),
        ("18 apples. Each costs 3 dollars.", "18", 1.0),
        (r"$\frac{1}{2}$. I checked: 0.5 = 1/2.", r"\frac{1}{2}", 1.0),
        ("Thus x = 5.\nThe other root, 6, is extraneous.", "5", 1.0),
        ("18 dollars", "18", 1.0),
        (r"18 \text{ dollars}", "18", 1.0),
        ("In 2 hours he earns 18.", "18", 1.0),
        (r"$f(x) = 2x$ for all real $x$", "f(x)=2x", 1.0),
    ],
)
def test_an_answer_followed_by_prose_is_graded_on_its_first_statement(answer, reference, expected):
    assert accuracy(wrap(answer), reference) == expected


@pytest.mark.parametrize(
    "completion, expected",
    [
        (r"<think>t</think> So the total is \boxed{18}.", 1.0),
        (r"<think>t</think> \boxed{18}. I checked: 2 + 16 = 18.", 1.0),
        ("<think>t</think> 9 * 2 = 18\n#### 18", 1.0),
        ("<think>t</think> 9 * 2 = 19\n#### 19", 0.0),
    ],
)
def test_boxed_and_gsm8k_answers_followed_by_prose_still_count(completion, expected):
    assert accuracy(completion, "18") == expected


@pytest.mark.parametrize(
    "answer, expected",
    [
        ("19. The reference answer is 18.", "19"),
        ("1.6+1\nI am confident in this answer.", "1.6+1"),
        ("The answer is 18.", "The answer is 18."),  # one sentence: graded whole
        ("Yes. It is 18.", "It is 18."),  # the first sentence holding math
        ("2.5 m. See above.", "2.5 m"),  # a decimal point is no sentence end
        ("$x = 2.5$. So 2.5 m.", "$x = 2.5$"),
        ("$x = 1. 5$ is wrong. So 2", "$x = 1. 5$"),  # no cut inside math; then the leading expression
        (r"\$18. I checked twice.", r"\$18"),  # a currency sign opens no math
        ("1, 2, ... and so on. Then 7", "1, 2, ..."),  # an ellipsis is no sentence end
        (r"2\pi radians", r"2\pi"),  # a command is math, and stays
        # a statement that starts with math is graded on its leading expression
        ("19 (the reference answer is 18)", "19"),
        ("19, the reference answer is 18", "19"),
        ("19 but the reference says 18", "19"),
        ("18 dollars", "18"),
        (r"18 \text{ dollars}", "18"),
        (r"19 \text{. The reference answer is 18}", "19"),
        ("x = 5 so the answer is 5", "x = 5"),
        ("1 and 2 are the roots", "1 and 2"),  # "and"/"or" are left to is_sprayed
        (r"$f(x) = 2x$ for all real $x$", "$f(x) = 2x$"),
        ("In 2 hours he earns 18", "In 2 hours he earns 18"),  # starts with words: whole
        ("19\n18", "19\n18"),  # no prose: graded whole (and sprayed, see is_sprayed)
        ("No idea. Really.", "No idea. Really."),  # no math anywhere: whole
    ],
)
def test_graded_statement(answer, expected):
    from rlvr_r1.answers import graded_statement

    assert graded_statement(answer) == expected


@pytest.mark.parametrize(
    "answer, reference, expected",
    [
        # Minerva writes some references as Python floats: -1./3 is -1/3 (math-verify alone reads -1)
        ("-1./3+1", "-1./3", 0.0),
        ("-1", "-1./3", 0.0),
        ("-3./2+1", "-3./2", 0.0),
        ("-3", "-3./2", 0.0),
        ("-1./3", "-1./3", 1.0),
        ("-1/3", "-1./3", 1.0),
        (r"-\frac{1}{3}", "-1./3", 1.0),
        ("-0.333", "-1./3", 1.0),  # -1/3 rounded to 3 decimals (rounds_to)
        ("-1.5", "-3./2", 1.0),
        (r"\frac{2.}{4}", r"\frac{1}{2}", 1.0),
    ],
)
def test_a_bare_decimal_point_before_an_operator_is_no_decimal(answer, reference, expected):
    assert accuracy(wrap(answer), reference) == expected


def test_graded_statement_is_linear_on_unclosed_math():
    from rlvr_r1.answers import graded_statement

    for text in (
        "\\(" * 500_000 + " word. 5",
        "$ word. " * 200_000,
        "a. " * 300_000,
        "1 \\alpha" * 200_000 + " word",
        "1 \\text{" * 200_000 + " word",
        "1 and" * 200_000 + " word",
    ):
        started = time.perf_counter()
        graded_statement(text)
        assert time.perf_counter() - started < 2.0


# --- real data --------------------------------------------------------------------------------


def _shared_data() -> Path:
    configured = os.environ.get("RLVR_SHARED_DATA")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[3] / ".." / "shared" / "data"


def _rows(relative: str) -> list[dict]:
    path = _shared_data() / relative
    if not path.is_file():
        pytest.skip(f"{path} is absent (set RLVR_SHARED_DATA to the shared data folder)")
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _other_index(values: list[str], index: int) -> int:
    for step in range(1, len(values)):
        other = (index + step) % len(values)
        if values[other] != values[index]:
            return other
    raise AssertionError("all values are equal")


def test_gsm8k_gold_solutions(capsys):
    rows = _rows("gsm8k/test.jsonl")
    references = [reference_answer(row["answer"]) for row in rows]
    failures = []
    for index, row in enumerate(rows):
        worked, _, _ = row["answer"].rpartition("####")
        completion = wrap(references[index], thinking=worked)
        other = rows[_other_index(references, index)]["answer"]
        right = accuracy(completion, row["answer"])
        wrong = accuracy(completion, other)
        if (right, wrong) != (1.0, 0.0):
            failures.append((index, references[index], right, wrong))
    with capsys.disabled():
        print(f"\ngsm8k test: {len(rows) - len(failures)}/{len(rows)} pass; failures: {failures}")
    assert len(rows) == 1319
    assert failures == []


OLYMPIADBENCH_KNOWN_FAILURES = {194}


def test_olympiadbench_final_answers(capsys):
    rows = _rows("eval/olympiadbench.jsonl")
    finals = [row["final_answer"][0] for row in rows]
    failures = []
    for index, row in enumerate(rows):
        boxed = "\\boxed{" + finals[index].replace("$", "") + "}"
        completion = wrap(boxed, thinking="\n".join(row["solution"]))
        right = accuracy(completion, finals[index])
        wrong = accuracy(completion, finals[_other_index(finals, index)])
        if (right, wrong) != (1.0, 0.0):
            failures.append((index, row["id"], finals[index], right, wrong))
    passed = len(rows) - len(failures)
    with capsys.disabled():
        print(f"\nolympiadbench: {passed}/{len(rows)} pass; failures: {failures}")
    assert passed / len(rows) >= 0.98
    assert {failure[0] for failure in failures} <= OLYMPIADBENCH_KNOWN_FAILURES


@pytest.mark.parametrize(
    "answer, reference, expected",
    [
        ("18", "18.0", 1.0),
        ("-0.50", "-.5", 1.0),
        ("$7$", "7", 1.0),
        ("19", "18", 0.0),
        ("1.5", "3/2", None),
        ("x", "1", None),
        ("18 dollars", "18", None),
    ],
)
def test_plain_numbers_are_compared_by_value_without_sympy(answer, reference, expected):
    from rlvr_r1.answers import _numeric_verdict

    assert _numeric_verdict(answer, reference) == expected


# --- Unicode digits and signs, hostile characters ---------------------------------------------


@pytest.mark.parametrize(
    "answer,reference,expected",
    [
        ("\\boxed{１２}", "12", 1.0),
        ("\\boxed{１２}", "13", 0.0),
        ("\\boxed{٣}", "3", 1.0),
        ("\\boxed{۳}", "3", 1.0),
        ("\\boxed{٤٢}", "42", 1.0),
        ("\\boxed{−5}", "-5", 1.0),
        ("\\boxed{−5}", "5", 0.0),
        ("\\boxed{－５}", "-5", 1.0),
        ("\\boxed{３．５}", "3.5", 1.0),
        ("\\boxed{１／２}", "0.5", 1.0),
        ("\\boxed{\\frac{１}{２}}", "\\frac{1}{2}", 1.0),
        ("\\boxed{x＋１}", "1+x", 1.0),
        ("\\boxed{١٢٫٥}", "12.5", 1.0),
        ("\\boxed{١٬٠٠٠}", "1000", 1.0),
        ("\\boxed{12}", "１２", 1.0),
    ],
)
def test_full_width_and_arabic_indic_digits_are_read_as_ascii(answer, reference, expected):
    assert accuracy(wrap(answer), reference) == expected


def test_gsm8k_fallback_reads_arabic_indic_digits():
    assert accuracy("<think>t</think> ٩ × ٢\n#### ١٨", "#### 18") == 1.0


def test_full_width_digits_in_a_list_are_still_a_list():
    assert is_sprayed("１２, １３", "13") is True
    assert accuracy(wrap("１２, １３"), "13") == 0.0


@pytest.mark.parametrize(
    "completion,reference,expected",
    [
        ("<think>首先计算：3 + 4 = 7，所以答案是 7。</think>答案是 \\boxed{7}", "7", 1.0),
        ("<think>因此 x = −5。</think><answer>\\boxed{−5}</answer>", "-5", 1.0),
        ("<think>a\x00b</think><answer>\\boxed{12}\x00</answer>", "12", 1.0),
        ("<think>t</think>\x1b[31m\\boxed{12}\x1b[0m", "12", 1.0),
        ("<think>\ud800 lone</think><answer>\\boxed{12}</answer>", "12", 1.0),
        ("<think>t</think><answer>\\boxed{1\x002}</answer>", "12", 0.0),
        ("<think>t</think><answer>\\boxed{12\udfff}</answer>", "12", None),
        ("<think>t</think><answer>\x1b[2J\ud83d</answer>", "12", None),
    ],
)
def test_hostile_characters_give_a_verdict(completion, reference, expected):
    failures = []

    class StrictUtf8Handler(logging.StreamHandler):
        def handleError(self, record):
            failures.append(record)

    handler = StrictUtf8Handler(io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict"))
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        value = accuracy(completion, reference)
        handler.flush()
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)
    assert value in (0.0, 1.0)
    if expected is not None:
        assert value == expected
    assert failures == []


# --- numeric refutation before simplify -------------------------------------------------------


def test_numeric_refutation_only_refutes_what_differs():
    import sympy

    from rlvr_r1.answers import _refuted_numerically

    x = sympy.Symbol("x", real=True)
    z = sympy.Symbol("z")
    n = sympy.Symbol("n", integer=True)
    assert _refuted_numerically(sympy.Integer(188), sympy.exp(x) / 3) is True
    assert _refuted_numerically(sympy.Integer(1024) - 256 * sympy.pi, sympy.log(2)) is True
    assert _refuted_numerically(sympy.exp(2 * z) / (2 * z + 2), sympy.Rational(47, 300)) is True
    assert _refuted_numerically(sympy.sin(x) ** 2 + sympy.cos(x) ** 2, sympy.Integer(1)) is False
    assert _refuted_numerically(sympy.sqrt(x**2), x) is False
    assert _refuted_numerically(sympy.Rational(1, 3), sympy.Float("0.3333333333333333")) is False
    assert _refuted_numerically(n, sympy.Integer(1)) is False
    assert _refuted_numerically(sympy.Function("f")(x), sympy.Integer(1)) is False
    assert _refuted_numerically(sympy.FiniteSet(1), sympy.FiniteSet(2)) is False


@pytest.mark.parametrize(
    "answer,reference,expected",
    [
        ("\\sin^2 x + \\cos^2 x", "1", 1.0),
        ("\\frac{e^{t}}{3} + c e^{-2t}", "188", 0.0),
        ("\\frac{\\log 2}{\\log 2 - \\log 3}", "1024 - 256\\pi", 0.0),
        ("\\sqrt{2}\\sqrt{3}", "\\sqrt{6}", 1.0),
        ("(x+1)^2", "x^2 + 2x + 1", 1.0),
        ("(x+1)^2", "x^2 + 2x + 2", 0.0),
    ],
)
def test_symbolic_verdicts_with_numeric_refutation(answer, reference, expected):
    assert accuracy(wrap(f"\\boxed{{{answer}}}"), reference) == expected


# --- adversarial input: linear scans, huge numbers, bounded library logs ----------------------

from rlvr_plugins.testing import adversarial_texts, time_each  # noqa: E402

ADVERSARIAL = adversarial_texts(1_000_000)


def test_extract_answer_is_linear_on_a_megabyte_of_adversarial_input():
    out = time_each(extract_answer, ADVERSARIAL, limit_s=2.0)
    assert {name: result for name, (result, _) in out.items() if result is not None} == {"closed_boxes": "7"}


@pytest.mark.parametrize("wrap", ["{}", "\\boxed{{{}}}", "<answer>{}</answer>", "#### {}"])
def test_accuracy_is_linear_on_a_megabyte_of_adversarial_input(wrap):
    """Inside ``<answer>`` the whole megabyte is the answer: extraction, spraying, normalising."""
    out = time_each(lambda text: accuracy(wrap.format(text), "12"), ADVERSARIAL, limit_s=2.0)
    assert {result for result, _ in out.values()} == {0.0}


def test_spraying_markers_in_adversarial_input():
    sprayed = {name for name, text in adversarial_texts(10_000).items() if is_sprayed(text, "12")}
    assert sprayed == {"box_openers", "closed_boxes", "digit_runs", "commas_and_digits", "thousands"}


BIG = "1" * 10_000


@pytest.mark.parametrize(
    "answer, reference, expected",
    [
        (BIG, "12", 0.0),
        (BIG, BIG, 1.0),
        (BIG, "#### " + BIG, 1.0),
        ("00" + BIG + ".000", BIG, 1.0),
        (BIG + "1", BIG, 0.0),
        ("-" + BIG, BIG, 0.0),
        ("0." + "3" * 10_000, "0." + "3" * 10_000 + "0", 1.0),
        ("0." + "3" * 10_000, "0." + "3" * 9_999, 0.0),
        ("\\frac{" + "2" * 10_000 + "}{2}", BIG, 1.0),
        ("2" * 10_000 + "/2", BIG, 1.0),
        ("\\frac{" + "2" * 10_000 + "}{3}", BIG, 0.0),
        ("\\frac{1}{3}", BIG, 0.0),
        ("-0.0", "0", 1.0),
    ],
)
def test_numbers_of_ten_thousand_digits_get_a_verdict(answer, reference, expected):
    import sys

    before = sys.get_int_max_str_digits()
    assert accuracy(f"\\boxed{{{answer}}}", reference) == expected
    assert sys.get_int_max_str_digits() == before


def test_the_digit_limit_is_the_largest_need_of_the_threads_inside():
    import sys

    from rlvr_r1.answers import _int_digits_at_least

    base = sys.get_int_max_str_digits()
    with _int_digits_at_least(10_000):
        assert sys.get_int_max_str_digits() == 10_000
        with _int_digits_at_least(20_000):
            assert sys.get_int_max_str_digits() == 20_000
            with _int_digits_at_least(100):
                assert sys.get_int_max_str_digits() == 20_000
        assert sys.get_int_max_str_digits() == 10_000
    assert sys.get_int_max_str_digits() == base


def test_huge_fractions_in_threads_all_get_their_verdict():
    import sys
    from concurrent.futures import ThreadPoolExecutor

    base = sys.get_int_max_str_digits()
    cases = [(f"\\boxed{{\\frac{{{'2' * n}}}{{2}}}}", "1" * n, 1.0) for n in (5_000, 8_000, 12_000, 20_000)]
    cases += [(f"\\boxed{{\\frac{{{'2' * n}}}{{3}}}}", "1" * n, 0.0) for n in (6_000, 9_000)]
    with ThreadPoolExecutor(4) as pool:
        verdicts = list(pool.map(lambda case: accuracy(case[0], case[1]), cases * 2))
    assert verdicts == [expected for _, _, expected in cases * 2]
    assert sys.get_int_max_str_digits() == base


def test_a_reference_math_verify_can_never_parse_is_reported_at_load_naming_the_row(caplog):
    from rlvr_r1.answers import MAX_NUMBER_DIGITS, TOO_MANY_DIGITS, UNPARSEABLE, check_references, reference_problem
    from rlvr_r1.plugins import AccuracyPlugin, AccuracyScorer

    huge = "7" * (MAX_NUMBER_DIGITS + 1)
    assert reference_problem("12") is None and reference_problem(BIG) is None
    assert reference_problem(f"so \\boxed{{{huge}}}") == (
        f"the reference answer holds a number of {MAX_NUMBER_DIGITS + 1} digits; numbers of more than "
        f"{MAX_NUMBER_DIGITS} digits are compared only as plain decimals or as plain text"
    )
    broken = "\\frac{1}{"
    references = ["12", huge, None, broken, "#### 1,234", huge, "\\frac{1}{2}", BIG]
    assert check_references(references) == ([(1, TOO_MANY_DIGITS), (3, UNPARSEABLE), (5, TOO_MANY_DIGITS)], 0)
    # no time left: only what needs no math-verify is checked; the rest is counted (distinct references)
    assert check_references([broken, "x^2", broken, huge, "18"], budget_s=0) == ([(3, TOO_MANY_DIGITS)], 2)
    plugin = AccuracyPlugin(AccuracyPlugin.Options(answer_column="gold"))
    rows = [{"prompt": "p", "gold": r} for r in ("12", broken)] + [{"prompt": "p"}]
    assert plugin.rlvr_check_dataset(rows=rows) == [
        (
            1,
            "math-verify cannot parse the reference answer (column 'gold'); it is compared only as a plain "
            "decimal or as text",
        )
    ]
    scorer = AccuracyScorer()
    with caplog.at_level("WARNING", logger="rlvr_r1.plugins"):
        scores = [
            scorer(prompt="p", completion=f"\\boxed{{{answer}}}", example={"answer": huge, "rlvr_index": 7})
            for answer in (huge, "12", huge + "7")
        ]
    assert scores == [1.0, 0.0, 0.0]
    assert caplog.records == []  # reported at load (rlvr_check_dataset), not once per worker


def test_an_answer_too_long_for_math_verify_is_wrong_without_parsing():
    from rlvr_r1.answers import MAX_ANSWER_CHARS, answer_too_long

    long_sum = "+".join(["x"] * (MAX_ANSWER_CHARS // 2 + 1))
    assert answer_too_long(long_sum, "12") and not answer_too_long(long_sum, long_sum)
    assert accuracy(f"\\boxed{{{long_sum}}}", "12") == 0.0
    assert accuracy(f"\\boxed{{{long_sum}}}", long_sum) == 1.0


def test_math_verify_logs_are_cut_to_a_few_hundred_characters(caplog):
    import logging

    from rlvr_r1.answers import MAX_LOG_CHARS, _extraction_config

    _extraction_config()
    names = [n for n in logging.Logger.manager.loggerDict if n.startswith(("math_verify.", "latex2sympy2_extended."))]
    assert "math_verify.parser" in names and "math_verify.grader" in names
    with caplog.at_level("WARNING"):
        for name in names:
            logging.getLogger(name).warning("Timeout during parsing: %s", "x" * 1_000_000)
    expected = f"{('Timeout during parsing: ' + 'x' * MAX_LOG_CHARS)[:MAX_LOG_CHARS]}... [1000024 characters]"
    assert [r.getMessage() for r in caplog.records] == [expected] * len(names)


def test_math_verify_shares_one_time_budget_per_answer():
    """In a fresh interpreter, as in a reward worker (a test suite's earlier tests leave signal
    and timer state behind that can keep math-verify's alarm-based timeouts from firing)."""
    import subprocess
    import sys

    probe = textwrap.dedent(r"""
        import time
        from rlvr_r1.answers import accuracy
        slow = "\\boxed{" + "(" * 60 + "x" + ")" * 60 + " apples}"  # math-verify gives up on it at its 5 s
        start = time.perf_counter()
        assert accuracy(slow, "x+1", time_budget_s=2) == 0.0
        spent = time.perf_counter() - start
        assert accuracy("\\boxed{x+1}", "1+x", time_budget_s=1) == 1.0
        print(spent)
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    # Without the shared budget math-verify's own 5 s parse timeout decides: about 6 s here.
    assert float(done.stdout.split()[-1]) < 4.5


def test_a_math_verify_call_that_timed_out_is_not_cached_as_its_answer():
    """math-verify returns "no parse" when its parse times out; that is not the answer's parse, so a
    later call with time enough gives the real verdict (it was cached as 0.0 for the life of the
    process), while a call with no more time than the one that ran out is refused at once.
    In a fresh interpreter, as above."""
    import subprocess
    import sys

    probe = textwrap.dedent(r"""
        import time
        import rlvr_r1.answers as answers
        from rlvr_r1.answers import accuracy
        slow = "\\boxed{" + "(" * 30 + "x" + ")" * 30 + "}"  # a correct answer math-verify parses in ~2.6 s
        start = time.perf_counter()
        first = accuracy(slow, "x", time_budget_s=1)
        start_again = time.perf_counter()
        again = accuracy(slow, "x", time_budget_s=1)
        done_again = time.perf_counter()
        answers.PARSE_TIMEOUT_S = answers.VERIFY_TIMEOUT_S = 120
        full = accuracy(slow, "x", time_budget_s=None)
        print(first, again, full, start_again - start, done_again - start_again)
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    first, again, full, first_s, again_s = (float(word) for word in done.stdout.split()[-5:])
    assert (first, again, full) == (0.0, 0.0, 1.0)
    assert first_s >= 1.0 and again_s < 0.5  # the first ran out of its 1 s; the second was not run again


def test_a_time_budget_that_does_not_fit_the_engine_deadline_is_refused_at_start_up():
    from rlvr_plugins.errors import ConfigError
    from rlvr_r1.plugins import AccuracyPlugin

    plugin = AccuracyPlugin(AccuracyPlugin.parse_options({}))
    plugin.rlvr_validate_run(engine_timeout_s=10.0)
    plugin.rlvr_validate_run(engine_timeout_s=None)
    plugin.rlvr_validate_run(engine_timeout_s=8.0)
    with pytest.raises(ConfigError, match=r"time_budget_s=5 .* engine.timeout_s=7.5 .* at most 4.5 "):
        plugin.rlvr_validate_run(engine_timeout_s=7.5)
    with pytest.raises(ConfigError, match=r"time_budget_s=0.5 must be at least 1"):
        AccuracyPlugin(AccuracyPlugin.parse_options({"time_budget_s": 0.5})).rlvr_validate_run(engine_timeout_s=None)


# --- decimals against exact references (issue 21, item 4) ---------------------------------------
# Expected values by hand: a decimal answer with d decimals counts against an exact reference r
# iff |answer - r| <= 5 * 10**-(d+1) (it is r rounded to d decimals) and it equals r exactly or
# shows at least 3 significant digits; an integer answer is compared exactly.


@pytest.mark.parametrize(
    "answer,reference",
    [
        ("0.5", "\\frac{1}{2}"),  # exact
        ("0.50", "\\frac12"),  # exact, trailing zero
        ("-0.25", "-\\frac{1}{4}"),  # exact, negative
        ("0.333", "\\frac{1}{3}"),  # 1/3 = 0.3333..., rounded to 3 decimals
        ("0.3333", "\\frac{1}{3}"),
        ("0.667", "\\frac{2}{3}"),  # 0.6666... rounds up
        ("3.14", "\\pi"),  # pi = 3.14159..., rounded to 2 decimals
        ("3.1416", "\\pi"),
        ("3.1415927", "\\pi"),  # pi = 3.14159265358..., correctly rounded to 7 decimals
        ("3.141593", "\\pi"),  # and to 6
        ("1.414", "\\sqrt{2}"),  # sqrt 2 = 1.41421...
        ("0.000000333", "\\frac{1}{3000000}"),  # 3.333...e-7, 3 significant digits
        ("0.5 cm", "\\frac{1}{2}"),
        ("x = 0.333", "\\frac{1}{3}"),
        ("0.333", "x = \\frac{1}{3}"),
        ("2.0", "\\sqrt{4}"),
    ],
)
def test_a_decimal_that_is_the_exact_reference_rounded_to_its_own_decimals_scores_one(answer, reference):
    assert accuracy(wrap(answer), reference) == 1.0


@pytest.mark.parametrize(
    "answer,reference",
    [
        ("0.5000004", "\\frac{1}{2}"),  # off by 4e-7, half a unit of its last digit is 5e-8
        ("0.0000001", "\\frac{1}{3000000}"),  # 1e-7 vs 3.33e-7
        ("0.0000003", "\\frac{1}{3000000}"),  # rounded, but 1 significant digit
        ("3.1415929", "\\pi"),  # math-verify rounds both to 3.141593
        ("3.1415926", "\\pi"),  # truncated, not rounded: off by 5.4e-8 > 5e-8
        ("12.000001", "12"),
        ("0.5000004 cm", "\\frac{1}{2}"),
        ("x = 0.5000004", "\\frac{1}{2}"),
        ("0.5000004", "x = \\frac{1}{2}"),
        ("0.3", "\\frac{1}{3}"),  # rounded, but 1 significant digit
        ("0.33", "\\frac{1}{3}"),  # rounded, but 2 significant digits
        ("0.0", "\\frac{1}{3000000}"),
        ("3", "\\pi"),  # an integer is compared exactly
        ("0.666", "\\frac{2}{3}"),  # truncated
    ],
)
def test_a_decimal_that_is_not_the_exact_reference_rounded_scores_zero(answer, reference):
    assert accuracy(wrap(answer), reference) == 0.0


@pytest.mark.parametrize(
    "answer,reference",
    [
        ("1.2e1", "12"),
        ("1.2E1", "12"),
        ("-1.5e-2", "-0.015"),
        ("2.5e0", "\\frac{5}{2}"),
        ("$1.2e1$", "12"),
        ("\\log_2 8", "3"),
        ("$\\log_{2} 8$", "3"),
        ("\\boxed{१२}", "12"),  # Devanagari
        ("\\boxed{๑๒}", "12"),  # Thai
        ("\\boxed{১২.৫}", "12.5"),  # Bengali
        ("\\boxed{𝟏𝟐}", "12"),  # mathematical bold digits
    ],
)
def test_scientific_notation_logarithms_and_every_decimal_digit_are_read(answer, reference):
    assert accuracy(wrap(answer), reference) == 1.0


@pytest.mark.parametrize(
    "answer,reference",
    [("1.2e1", "13"), ("1.2e-1", "12"), ("\\log_2 8", "4"), ("\\boxed{१३}", "12"), ("12 13", "13")],
)
def test_scientific_notation_logarithms_and_other_digits_are_not_loopholes(answer, reference):
    assert accuracy(wrap(answer), reference) == 0.0


@pytest.mark.parametrize(
    "reference", ["\\frac{1}{10^{10^{8}}}", "\\sqrt{2}^{10^{9}}", "2^{2^{2^{2^{2^{100}}}}}", "10^{10^{10}}"]
)
def test_a_decimal_against_a_huge_exact_reference_is_decided_within_the_time_budget(reference):
    """The decimal rule evaluates the reference numerically only: no exact power of 10**(10**8) digits."""
    from rlvr_r1.answers import TIME_BUDGET_S

    start = time.monotonic()
    assert accuracy(wrap("1.5"), reference) == 0.0
    assert time.monotonic() - start < TIME_BUDGET_S + 3
