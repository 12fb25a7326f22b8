"""Where the rules decide and where the judge must: every case of ``rule_verdict``, by hand."""

import pytest

from rlvr_judge.rules import is_plain_math, prose_words, rule_verdict

DECIDED = [
    # (completion, reference, value, reason)
    ("<answer>5</answer>", "5", 1.0, "rules-equal"),
    ("<answer>\\frac{1}{2}</answer>", "0.5", 1.0, "rules-equal"),
    ("<answer>5 \\text{cm}</answer>", "5", 1.0, "rules-equal"),  # math-verify drops the unit
    ("<answer>Yes.</answer>", "yes", 1.0, "rules-equal"),  # plain-string reference
    ("The total is \\boxed{18}.", "Natalia sold 18. #### 18", 1.0, "rules-equal"),
    ("<answer>6</answer>", "5", 0.0, "rules-differ"),
    ("<answer>x^2+1</answer>", "x^2-1", 0.0, "rules-differ"),
    ("<answer>\\sqrt{3}</answer>", "sqrt(2)", 0.0, "rules-differ"),  # function names are not prose
    ("<think>the answer is 5</think>", "5", 0.0, "format-only"),  # only inside the thinking
    ("I am not sure.", "5", 0.0, "format-only"),
    ("<answer>4 or 5</answer>", "5", 0.0, "sprayed"),
    ("\\boxed{4} and then \\boxed{five}", "5", 0.0, "sprayed"),  # two boxes in the answer part
    ("\\boxed{4} <answer>\\boxed{five}", "5", 0.0, "sprayed"),  # an unclosed block decides nothing
]

UNDECIDED = [
    ("<answer>five</answer> (not \\boxed{4})", "5", "five"),  # the block decides: boxes around it do not count
    ("<answer>0.5 metres</answer>", "50 cm", "0.5 metres"),  # units in words on both sides
    ("<answer>one half</answer>", "\\frac{1}{2}", "one half"),  # words against math
    ("<answer>6</answer>", "five apples", "6"),  # math against words
    ("<answer>\\frac{1}{</answer>", "1/2", "\\frac{1}{"),  # the answer does not parse
    ("<answer>3</answer>", "\\frac{1}{", "3"),  # the reference does not parse
    ("<answer>the set of all even numbers</answer>", "2\\mathbb{Z}", "the set of all even numbers"),
    ("<answer>2xy</answer>", "4xy", "2xy"),  # juxtaposed variables read as a word: judged
]


@pytest.mark.parametrize("completion, reference, value, reason", DECIDED)
def test_rules_decide(completion, reference, value, reason):
    verdict = rule_verdict(completion, reference)
    assert (verdict.value, verdict.reason) == (value, reason)


@pytest.mark.parametrize("completion, reference, answer", UNDECIDED)
def test_rules_cannot_decide(completion, reference, answer):
    verdict = rule_verdict(completion, reference)
    assert (verdict.value, verdict.reason, verdict.answer) == (None, "judge", answer)


def test_plain_math_is_no_prose_word_and_a_parse():
    assert prose_words("5 \\text{ cm}") == ["cm"]
    assert prose_words("\\sqrt{2} + \\sin(x) + ln(2) + pi") == []
    assert is_plain_math("2^{10}") and is_plain_math("x = 3") and is_plain_math("\\infty")
    assert not is_plain_math("one half")  # math-verify would "parse" it to a product of letters
    assert not is_plain_math("\\frac{1}{")  # math-verify gives only the string back
    assert not is_plain_math("   ")


def test_think_opened_and_fallback_are_passed_to_the_extractor():
    assert rule_verdict("5</think> #### 5", "5", think_opened=True).value == 1.0
    assert rule_verdict("#### 5", "5", fallback=None).reason == "format-only"


@pytest.mark.slow
def test_rules_are_linear_on_a_megabyte_of_adversarial_input():
    from rlvr_plugins.testing import adversarial_texts, time_each

    texts = adversarial_texts(1_000_000)
    plain = time_each(lambda text: rule_verdict(text, "12"), texts, limit_s=2.0)
    assert {name: (r.value, r.reason) for name, (r, _) in plain.items() if r.reason != "format-only"} == {
        "closed_boxes": (0.0, "sprayed")
    }
    boxed = time_each(lambda text: rule_verdict(f"\\boxed{{{text}}}", "12"), texts, limit_s=2.0)
    reasons = {name: result.reason for name, (result, _) in boxed.items()}
    assert reasons["letters"] == reasons["digits"] == reasons["math_openers"] == "too-long"
    assert {result.value for result, _ in boxed.values()} == {0.0}
