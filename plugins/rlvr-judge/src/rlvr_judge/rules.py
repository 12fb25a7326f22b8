"""When the rules decide an answer, and when a judge must.

The rules are rlvr-r1's: its answer extraction, its spraying rule and its math-verify
comparison (``rlvr_r1.answers``). They decide in five cases; everything else is
"cannot decide" and goes to the judge model:

1. no final answer outside the thinking → 0 (``"format-only"``);
2. the answer sprays several candidates → 0 (``"sprayed"``);
3. rlvr-r1's accuracy says equal (math-verify, or the plain-string comparison of a
   reference math-verify cannot parse) → 1 (``"rules-equal"``);
4. the answer is too long for math-verify (``rlvr_r1.answers.answer_too_long``: more than
   1000 characters and more than twice the reference answer) and not equal by rule 3
   → 0 (``"too-long"``);
5. both the answer and the reference are *plain math* and both parse to a math object,
   yet they differ → 0 (``"rules-differ"``).

Every math-verify call of one verdict shares ``time_budget_s`` (``RULES_BUDGET_S``, 2 s, by
default; rlvr-r1's ``time_budget``, each call's timeout cut to what is left, rounded up to whole
seconds). Rules that run out of time cannot decide (``"rules-timeout"``): the judge is asked,
unless they already found the answer equal (a proof, however late). An out-of-time "differ"
is never final, because math-verify answers "not equal" when its verify times out.

*Plain math* means no prose word: after removing LaTeX commands (``\\frac``, ``\\text``,
…) no run of two or more letters is left, except the names of common functions and
constants (``sqrt``, ``sin``, ``log``, ``pi``, …). math-verify "parses" prose too (``"one
half"`` becomes the product of its letters, ``"5 cm"`` becomes 5), so a parse alone proves
nothing; units in words, free-form expressions and statements are therefore left to the
judge. *Parses* means math-verify returns at least one math object (not only the input
string back, as it does for broken LaTeX such as ``\\frac{1}{``).

>>> rule_verdict("<answer>5</answer>", "5").value
1.0
>>> rule_verdict("<answer>6</answer>", "5").reason
'rules-differ'
>>> rule_verdict("<answer>0.5 metres</answer>", "50 cm").value is None
True
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from rlvr_plugins.text import BOXED, answer_block, answer_part
from rlvr_r1.answers import (
    OutOfTime,
    accuracy,
    answer_too_long,
    extract_answer,
    is_sprayed,
    parse_reference,
    reference_answer,
    time_budget,
)

RULES_BUDGET_S = 2.0

_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[^\W\d_]{2,}")
MATH_WORDS = frozenset(
    {
        "sqrt",
        "sin",
        "cos",
        "tan",
        "cot",
        "sec",
        "csc",
        "arcsin",
        "arccos",
        "arctan",
        "sinh",
        "cosh",
        "tanh",
        "log",
        "ln",
        "lg",
        "exp",
        "pi",
        "oo",
        "inf",
        "infty",
        "mod",
        "gcd",
        "lcm",
        "max",
        "min",
        "det",
    }
)


@dataclass(frozen=True)
class RuleVerdict:
    """``value`` is 0.0 or 1.0 when the rules decide, ``None`` when the judge must; ``answer`` is
    the extracted final answer (None when there is none); ``reason`` names the case."""

    value: float | None
    answer: str | None
    reason: str


def prose_words(text: str) -> list[str]:
    """Runs of two or more letters outside LaTeX commands, less ``MATH_WORDS``.

    >>> prose_words(r"5\\text{ cm}"), prose_words(r"\\sqrt{2} + sin(x)")
    (['cm'], [])
    """
    return [w for w in _WORD.findall(_LATEX_COMMAND.sub(" ", text)) if w.lower() not in MATH_WORDS]


def is_plain_math(text: str) -> bool:
    """No prose word, and math-verify parses it to at least one math object."""
    if not text.strip() or prose_words(text):
        return False
    return any(not isinstance(parsed, str) for parsed in parse_reference(text))


def _sprayed(completion: str, answer: str, reference: str, think_opened: bool) -> bool:
    """rlvr-r1's spraying rule: ``is_sprayed``, or several boxes in the answer part when no
    complete ``<answer>…</answer>`` block gives the answer."""
    if is_sprayed(answer, reference):
        return True
    rest = answer_part(completion, think_opened=think_opened)
    return not answer_block(rest)[0] and len(BOXED.findall(rest)) > 1


def rule_verdict(
    completion: str,
    reference: str,
    *,
    think_opened: bool = False,
    fallback: str | None = "gsm8k",
    time_budget_s: float | None = RULES_BUDGET_S,
) -> RuleVerdict:
    """The rules' verdict on one completion against one reference (see the module docstring);
    ``time_budget_s``: the math-verify time they share (None: no budget)."""
    answer = extract_answer(completion, think_opened=think_opened, fallback=fallback)
    if answer is None:
        return RuleVerdict(0.0, None, "format-only")
    if _sprayed(completion, answer, reference, think_opened):
        return RuleVerdict(0.0, answer, "sprayed")
    started = time.monotonic()
    if (
        accuracy(completion, reference, think_opened=think_opened, fallback=fallback, time_budget_s=time_budget_s)
        == 1.0
    ):
        return RuleVerdict(1.0, answer, "rules-equal")
    if answer_too_long(answer, reference):
        return RuleVerdict(0.0, answer, "too-long")
    left = None if time_budget_s is None else time_budget_s - (time.monotonic() - started)
    try:
        with time_budget(left):
            both_plain = is_plain_math(answer) and is_plain_math(reference_answer(reference))
    except OutOfTime:
        return RuleVerdict(None, answer, "rules-timeout")
    if left is not None and time.monotonic() - started >= time_budget_s:
        return RuleVerdict(None, answer, "rules-timeout")
    if both_plain:
        return RuleVerdict(0.0, answer, "rules-differ")
    return RuleVerdict(None, answer, "judge")
