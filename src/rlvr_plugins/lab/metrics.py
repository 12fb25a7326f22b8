"""Evaluation metrics as pure functions: pass@k, maj@k, format rate, lengths, breakdowns.

A problem is sampled ``n`` times; each sample is *correct* when the evaluation reward
(``eval.reward``, e.g. ``r1-accuracy``) reaches its threshold, *formatted* when the format
reward does (or, without one, when a final answer can be extracted), and has a final
*answer key* (:func:`answer_key`) used for majority voting.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..text import final_answer

BREAKDOWN_COLUMNS = ("subject", "level", "difficulty", "type", "subfield", "answer_type")


def pass_at_k(n: int, c: int, k: int) -> float:
    r"""Unbiased pass@k of one problem (Chen et al. 2021, eq. 1): ``1 - C(n-c, k) / C(n, k)``.

    The probability that at least one of ``k`` samples drawn without replacement from the
    ``n`` generated ones is correct, given that ``c`` of them are.

    >>> pass_at_k(n=4, c=1, k=2)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    0.5
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mathbf|operatorname)\s*\{([^{}]*)\}")
_SPACING = re.compile(r"\\[,;:! ]|\\left|\\right|~|\s+")
_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?![\d])")
_FRAC = re.compile(r"^(-?)\\[dt]?frac\{(-?\d+)\}\{(-?\d+)\}$")
_NUMBER = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:/\d+)?$")


def answer_key(answer: str | None) -> str | None:
    r"""The form in which two final answers are *equal* for majority voting.

    Two answers are the same vote when their keys are equal. The key drops ``$``, LaTeX
    spacing (``\,``, ``\!``, ``\left``, ``\right``, ``~``), whitespace, a final period and
    ``\text{…}``-style wrappers, reads ``\dfrac``/``\tfrac`` as ``\frac``, removes thousands
    separators and writes every plain number (integer, decimal, ``a/b``, ``\frac{a}{b}``)
    as a reduced fraction, so ``0.5``, ``1/2`` and ``$\dfrac{1}{2}$`` are one vote (but
    ``\frac12``, without braces, is compared as text; so is a number of more digits than Python
    converts, 4300). Letters are lower-cased. ``None`` or an empty answer has no key (it is
    not a vote). Linear in the answer's length.

    >>> [answer_key(a) for a in ["0.5", r"\frac{1}{2}", "1/2", " 1,200. ", r"\text{Yes}", ""]]
    ['1/2', '1/2', '1/2', '1200', 'yes', None]
    """
    if answer is None:
        return None
    text = str(answer).replace("$", "")
    text = _TEXT_WRAPPER.sub(r"\1", text)
    text = _SPACING.sub("", text).rstrip(".")
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = _THOUSANDS.sub(lambda m: m.group().replace(",", ""), text)
    if not text:
        return None
    try:
        frac = _FRAC.match(text)
        if frac and int(frac.group(3)) != 0:
            value = Fraction(int(frac.group(2)), int(frac.group(3))) * (-1 if frac.group(1) else 1)
            return _fraction_text(value)
        if _NUMBER.match(text):
            return _fraction_text(Fraction(text))
    except (ValueError, ZeroDivisionError):  # x/0, or more digits than Python converts (4300)
        pass
    return text.lower()


def _fraction_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def majority_answer(keys: Sequence[str | None]) -> str | None:
    """The most frequent answer key (``None`` is no vote); a tie goes to the key seen first.

    >>> majority_answer(["3", None, "4", "4", "3", None, None])
    '3'
    """
    counts = Counter(k for k in keys if k is not None)
    if not counts:
        return None
    best = max(counts.values())
    return next(k for k in keys if k is not None and counts[k] == best)


def maj_at_k(keys: Sequence[str | None], correct: Sequence[bool], k: int) -> float:
    """maj@k of one problem: 1.0 when the majority answer of the first ``k`` samples is correct.

    The majority answer is :func:`majority_answer` of the first ``k`` answer keys; it is
    correct when the first of those samples that gave it was scored correct by the reward.
    No answer at all is wrong.

    >>> maj_at_k(["7", "8", "8", "7"], [True, False, False, True], k=3)
    0.0
    """
    if not 1 <= k <= len(keys) or len(keys) != len(correct):
        raise ValueError(f"maj_at_k needs 1 <= k <= {len(keys)} samples and one flag per sample, got k={k}")
    winner = majority_answer(keys[:k])
    if winner is None:
        return 0.0
    first = next(i for i in range(k) if keys[i] == winner)
    return float(bool(correct[first]))


def mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


@dataclass
class ProblemSamples:
    """The ``n`` scored samples of one problem.

    :param correct: ``(n,)`` bool, the evaluation reward reached its threshold.
    :param formatted: ``(n,)`` bool, the format check passed.
    :param keys: ``(n,)`` answer keys (:func:`answer_key`), ``None`` where no answer was found.
    :param lengths: ``(n,)`` completion lengths in tokens.
    :param groups: the problem's breakdown values, ``{column: value}``.
    """

    correct: list[bool]
    formatted: list[bool]
    keys: list[str | None]
    lengths: list[int]
    groups: dict[str, Any] = field(default_factory=dict)


def summarise(problems: Sequence[ProblemSamples], ks: Sequence[int]) -> dict[str, Any]:
    """The metrics of a set of problems sampled ``n`` times each (``n`` equal for all).

    * ``accuracy``: mean over problems of ``c / n`` (greedy accuracy when ``n = 1``, mean@n otherwise);
    * ``pass@k``: mean over problems of :func:`pass_at_k` ``(n, c, k)``;
    * ``maj@k``: mean over problems of :func:`maj_at_k` (first ``k`` samples);
    * ``format_rate``: share of all samples that are formatted;
    * ``answer_rate``: share of all samples with a final answer (an answer key);
    * ``mean_length``: mean completion length over all samples, correct ones, wrong ones
      (``None`` when there is no such sample).
    """
    if not problems:
        return {"problems": 0}
    n = len(problems[0].correct)
    if any(len(p.correct) != n for p in problems):
        raise ValueError("every problem needs the same number of samples")
    samples = [
        (c, f, key, length)
        for p in problems
        for c, f, key, length in zip(p.correct, p.formatted, p.keys, p.lengths, strict=True)
    ]
    out: dict[str, Any] = {
        "problems": len(problems),
        "samples_per_problem": n,
        "accuracy": mean(sum(p.correct) / n for p in problems),
    }
    for k in ks:
        out[f"pass@{k}"] = mean(pass_at_k(n, sum(p.correct), k) for p in problems)
    for k in ks:
        out[f"maj@{k}"] = mean(maj_at_k(p.keys, p.correct, k) for p in problems)
    out["format_rate"] = mean(float(f) for _, f, _, _ in samples)
    out["answer_rate"] = mean(float(key is not None) for _, _, key, _ in samples)
    out["mean_length"] = {
        "all": mean(length for *_, length in samples),
        "correct": mean(length for c, _, _, length in samples if c),
        "wrong": mean(length for c, _, _, length in samples if not c),
    }
    return out


def breakdown(problems: Sequence[ProblemSamples], column: str, ks: Sequence[int]) -> dict[str, dict[str, Any]]:
    """:func:`summarise` per value of ``column`` (values as text, sorted)."""
    groups: dict[str, list[ProblemSamples]] = {}
    for p in problems:
        groups.setdefault(str(p.groups.get(column)), []).append(p)
    return {value: summarise(members, ks) for value, members in sorted(groups.items(), key=lambda kv: _sort_key(kv[0]))}


def _sort_key(value: str) -> tuple:
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


def breakdown_columns(
    rows: Sequence[Mapping[str, Any]], requested: Sequence[str] | None = None, max_values: int = 50
) -> list[str]:
    """The columns to break results down by: ``requested`` (each must exist), or else every
    column of :data:`BREAKDOWN_COLUMNS` that every row has with at most ``max_values`` distinct values."""
    if requested is not None:
        missing = [c for c in requested if any(c not in r for r in rows)]
        if missing:
            present = sorted(rows[0]) if rows else []
            raise KeyError(f"breakdown column {missing[0]!r} is not in every row; columns present: {present}")
        return list(requested)
    out = []
    for column in BREAKDOWN_COLUMNS:
        if rows and all(column in r and r[column] is not None for r in rows):
            if len({str(r[column]) for r in rows}) <= max_values:
                out.append(column)
    return out


def extract_final_answer(completion: str) -> str | None:
    r"""The final answer of a completion, for voting: :func:`rlvr_plugins.text.final_answer`, the
    rule of rlvr-r1's accuracy reward (no template opened ``<think>``, GSM8K fallback on).

    >>> extract_final_answer(r"<think>so 3</think> The answer is $\boxed{\frac{1}{2}}$.")
    '\\frac{1}{2}'
    """
    return final_answer(completion)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.4f}" if abs(v) < 10 else f"{v:.1f}"
        return str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
