"""Data hygiene for RL with verifiable rewards: drop guessable problems and decontaminate.

Two kinds of training prompt give rewards that say nothing about reasoning:

* **Multiple-choice and true/false problems** (Kimi k1.5 §2.2: "multiple-choice, true/false
  and proof-based questions … are excluded"): a policy that guesses a letter or a truth value
  is rewarded 1/4 to 1/2 of the time, so the reward has false positives.
  :func:`multiple_choice_rule` and :func:`true_false_rule` are the detectors; each returns a
  :class:`Verdict` naming the rule that fired and the text it matched, or None.
* **Prompts that overlap an evaluation set** (Qwen3 §4.1 and the GPT-3 paper's 13-gram
  decontamination): :class:`EvalIndex` holds every word n-gram of the eval prompts and
  :meth:`EvalIndex.overlap` measures each training prompt against it.

Everything here is a pure function of the text: no model, no config.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..text import last_boxed, message_text

MULTIPLE_CHOICE = "multiple_choice"
TRUE_FALSE = "true_false"
CONTAMINATED = "contaminated"

_WRAPPER_OR_BRACE = re.compile(r"\\(?:text|textbf|mathrm|mathbf|textit|mbox|fbox|boxed)\s*\{|[{}]")
_LATEX_COMMAND = re.compile(r"\\[a-zA-Z]+")
_NOT_WORD = re.compile(r"[\W_]+")
_GSM8K_MARK = "####"


def final_answer(answer: Any) -> str | None:
    r"""The final answer a reference gives, as bare text; None when there is no reference.

    The content of the last ``\boxed{…}`` if there is one, else the text after the last
    ``####`` (GSM8K), else the whole value (the first element of a list); then LaTeX text
    wrappers (``\text{…}``, ``\textbf{…}``, ``\mathrm{…}``), ``$`` and surrounding spaces and
    final punctuation are removed.

    >>> [final_answer(r"so \boxed{\text{Yes}}."), final_answer("2+2=4\n#### 4"), final_answer(["$(C)$"])]
    ['Yes', '4', '(C)']
    """
    if answer is None:
        return None
    if isinstance(answer, (list, tuple)):
        if not answer:
            return None
        answer = answer[0]
    text = str(answer)
    boxed = last_boxed(text)
    if boxed is not None:
        text = boxed
    elif _GSM8K_MARK in text:
        text = text.rsplit(_GSM8K_MARK, 1)[1]
    return _unwrap_text_commands(text).replace("$", "").strip().rstrip(".").strip()


def _unwrap_text_commands(text: str) -> str:
    r"""``text`` with every ``\text{X}`` (``\textbf``, ``\mathrm``, ``\mathbf``, ``\textit``,
    ``\mbox``, ``\fbox``, ``\boxed``) replaced by ``X`` when ``X`` holds no brace once its own
    wrappers are unwrapped (innermost first), in one pass with a stack of open braces. A wrapper
    that only appears once another is removed (``\\te\\text{}xt{a}``) stays.

    >>> _unwrap_text_commands(r"\textbf{\text{(B)}} or \text{\frac{1}{2}}")
    '(B) or \\text{\\frac{1}{2}}'
    """
    starts: list[int] = []  # per open brace: where its wrapper command starts, -1 for a plain brace
    ends: list[int] = []
    braced: list[bool] = []  # whether a brace inside it stays
    removed: list[tuple[int, int]] = []
    for token in _WRAPPER_OR_BRACE.finditer(text):
        if token.group() != "}":
            starts.append(token.start() if token.group() != "{" else -1)
            ends.append(token.end())
            braced.append(False)
        elif starts:
            start, end, kept_inside = starts.pop(), ends.pop(), braced.pop()
            if start >= 0 and not kept_inside:
                removed += [(start, end), (token.start(), token.end())]
            elif braced:
                braced[-1] = True
    pieces, previous = [], 0
    for start, end in sorted(removed):
        pieces.append(text[previous:start])
        previous = end
    pieces.append(text[previous:])
    return "".join(pieces)


@dataclass(frozen=True)
class Verdict:
    """Why a detector flagged a row: its ``category`` (``multiple_choice`` or ``true_false``),
    the ``rule`` that fired, and ``evidence``, the text that rule matched."""

    category: str
    rule: str
    evidence: str


def _first_phrase(category: str, text: str, rules: Sequence[tuple[str, re.Pattern]]) -> Verdict | None:
    """The verdict of the first ``(rule, pattern)`` whose pattern occurs in ``text``."""
    for rule, pattern in rules:
        match = pattern.search(text)
        if match is not None:
            return Verdict(category, rule, match.group(0).strip()[:120])
    return None


_WHICH_OF_THE_FOLLOWING = re.compile(r"\bwhich\s+(?:one\s+)?of\s+the\s+following\b", re.IGNORECASE)
_CHOICE_WORDS = re.compile(
    r"\banswer\s+(?:choices|options)\b|\b(?:choices|options)\s*:"
    r"|\b(?:choose|select|pick)\s+(?:the\s+|one\s+)?(?:correct|right|best)\s+(?:answer|option|choice)s?\b",
    re.IGNORECASE,
)
# A line that starts with an option label: "(A) 5", "A) 5", "A. 5", "**A.** 5", "$\textbf{(A)}".
_OPTION_LINE = re.compile(
    r"^[ \t>*$-]*(?:\\(?:textbf|text|mathrm)\s*\{\s*)?\*{0,2}\(?([A-J])\s*(?:\)|\.|．)(?=[\s}*$]|$)", re.MULTILINE
)
_LATEX_OPTION = re.compile(r"\\(?:textbf|text|mathrm|mathbf)\s*\{\s*\(([A-E])\)")
_INLINE_OPTION = re.compile(r"(?:^|(?<=[\s$:]))(?:\(([A-E])\)|([A-E])[.)．])\s*(?=\S)")
_LETTER_ANSWER = re.compile(r"\(?[A-E]\)?")
_LETTER_ANSWER_LABELLED = re.compile(r"\(([A-E])\)\s+\S.*", re.DOTALL)


def _in_order(found: Iterable[str], count: int) -> bool:
    """Whether the labels ``A, B, …`` (the first ``count`` letters) occur in ``found`` in that order."""
    wanted, position = "ABCDEFGHIJ"[:count], 0
    for label in found:
        if position < count and label == wanted[position]:
            position += 1
    return position == count


def multiple_choice_rule(prompt: Any, answer: Any = None) -> Verdict | None:
    r"""The first multiple-choice rule that fires on a row, or None.

    Rules, in the order they are tried (case-insensitive where a phrase):

    * ``which_of_the_following``: the phrase "which (one) of the following".
    * ``answer_choices``: "answer choices", "answer options", "choices:", "options:", "choose /
      select / pick the correct / right / best answer / option / choice".
    * ``option_lines``: lines that *start* with the option labels ``A`` and then ``B`` (in that
      order), each written ``(A)``, ``A)``, ``A.`` (optionally in ``**…**`` or ``\textbf{…}``).
      One labelled line alone ("A. 5" as a point) does not fire; ``A:`` is not a label
      (``A: (0, 0)`` lists points).
    * ``latex_options``: the AMC typesetting ``\textbf{(A)}`` … ``\textbf{(B)}`` (also ``\text``,
      ``\mathrm``, ``\mathbf``).
    * ``inline_options``: the four labels ``A``–``D`` in order on any line, each ``(A)`` or
      ``A.``/``A)`` after a space and before text (``(A) 3 (B) 4 (C) 5 (D) 6``). Fewer than four
      do not fire: a pre-exponential "(A)" and boron "(B)" in one chemistry problem are labels.
    * ``answer_is_option_letter``: the reference's final answer (:func:`final_answer`) is a
      bare letter ``A``–``E``, optionally in parentheses, or starts with ``(A)`` followed by the
      option's text.

    >>> multiple_choice_rule("Which of the following is prime?").rule
    'which_of_the_following'
    >>> multiple_choice_rule("What is 2+3?\n(A) 4\n(B) 5\n(C) 6").rule
    'option_lines'
    >>> multiple_choice_rule("Point\nA. 5 units from the origin. How far is it?") is None
    True
    """
    text = message_text(prompt)
    category = MULTIPLE_CHOICE
    found = _first_phrase(
        category, text, (("which_of_the_following", _WHICH_OF_THE_FOLLOWING), ("answer_choices", _CHOICE_WORDS))
    )
    if found is not None:
        return found
    lines = list(_OPTION_LINE.finditer(text))
    if _in_order((m.group(1) for m in lines), 2):
        first = next(m for m in lines if m.group(1) == "A")
        return Verdict(category, "option_lines", text[first.start() :].strip()[:120])
    latex = list(_LATEX_OPTION.finditer(text))
    if _in_order((m.group(1) for m in latex), 2):
        return Verdict(category, "latex_options", text[latex[0].start() :].strip()[:120])
    for line in text.splitlines():
        inline = list(_INLINE_OPTION.finditer(line))
        if _in_order((m.group(1) or m.group(2) for m in inline), 4):
            return Verdict(category, "inline_options", line.strip()[:120])
    final = final_answer(answer)
    if final is not None and (_LETTER_ANSWER.fullmatch(final) or _LETTER_ANSWER_LABELLED.fullmatch(final)):
        return Verdict(category, "answer_is_option_letter", final[:120])
    return None


TRUTH_VALUES = ("true", "false", "yes", "no")
_TRUE_OR_FALSE = re.compile(
    r"(?:^|[\n(\[])[^\S\n]*(?:true\s*(?:or|/)\s*false|t\s*/\s*f)\b"  # no \n in the run: one start per run
    r"|\btrue\s*(?:or|/)\s*false\s*[?:)\]]"
    r"|\b(?:answer|state|determine|decide|indicate|say|mark|write|whether)\b[^.?!\n]{0,80}"
    r"\btrue\s+or\s+false\b(?!\s+(?:questions?|statements?|items?)\b)",
    re.IGNORECASE,
)
_IS_IT_TRUE = re.compile(
    r"\bis\s+it\s+(?:true|false)\s+that\b"
    r"|\bis\s+(?:the\s+following|this|that|the|each)\s+(?:statement|claim|assertion|proposition)s?\s+"
    r"(?:true|false|correct|valid)\b",
    re.IGNORECASE,
)
_YES_OR_NO = re.compile(
    r"\b(?:answer|respond|reply)\s+(?:with\s+)?[\"'“]?yes[\"'”]?\s+or\s+[\"'“]?no\b"
    r"|\(\s*yes\s*/\s*no\s*\)|\byes\s+or\s+no\s*[?:)]",
    re.IGNORECASE,
)


def true_false_rule(prompt: Any, answer: Any = None) -> Verdict | None:
    r"""The first true/false or yes/no rule that fires on a row, or None.

    Rules, in the order they are tried (case-insensitive):

    * ``answer_is_truth_value``: the reference's final answer (:func:`final_answer`: the last
      ``\boxed{…}``, the GSM8K ``####`` part, or the whole answer) is exactly one of
      ``True``, ``False``, ``Yes``, ``No``. A "Yes" inside a worked solution or inside the
      prompt (a sub-problem answered earlier) is not the final answer and does not count.
    * ``true_or_false_phrase``: "true or false" / "true/false" / "T/F" as the instruction: at
      the start of the prompt, a line or a parenthesis, followed by ``?``, ``:`` or ``)``, or
      after a verb such as "answer", "state", "determine whether" on the same sentence.
      "true/false questions" as a thing counted in a word problem does not fire.
    * ``is_it_true_that``: "is it true that", "is it false that", "is the following / this
      statement (claim, assertion) true / false / correct / valid".
    * ``yes_or_no_phrase``: "answer yes or no", "(yes/no)", "yes or no?".

    >>> [true_false_rule(p, a).rule for p, a in [("Is 7 prime?", "Yes"), ("True or false: 2 is odd.", None)]]
    ['answer_is_truth_value', 'true_or_false_phrase']
    >>> print(true_false_rule("Bo got 7 true/false questions right. How many true/false questions were there?"))
    None
    """
    final = final_answer(answer)
    if final is not None and final.lower() in TRUTH_VALUES:
        return Verdict(TRUE_FALSE, "answer_is_truth_value", final)
    return _first_phrase(
        TRUE_FALSE,
        message_text(prompt),
        (("true_or_false_phrase", _TRUE_OR_FALSE), ("is_it_true_that", _IS_IT_TRUE), ("yes_or_no_phrase", _YES_OR_NO)),
    )


def normalise_words(text: Any) -> list[str]:
    r"""The words of a prompt for n-gram matching: lowercase, LaTeX commands (``\frac``,
    ``\mathrm``) removed, every run of characters other than letters and digits a separator.

    >>> normalise_words(r"Janet’s ducks lay $\frac{16}{2}$ eggs,  per DAY!")
    ['janet', 's', 'ducks', 'lay', '16', '2', 'eggs', 'per', 'day']
    """
    text = _LATEX_COMMAND.sub(" ", message_text(text)).lower()
    return _NOT_WORD.sub(" ", text).split()


def ngrams(words: Sequence[str], n: int) -> set[tuple[str, ...]]:
    """The distinct word ``n``-grams of ``words``; empty when there are fewer than ``n`` words.

    >>> sorted(ngrams(["a", "b", "c", "a", "b"], 2))
    [('a', 'b'), ('b', 'c'), ('c', 'a')]
    """
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@dataclass(frozen=True)
class Overlap:
    """How much of one training prompt an eval set contains.

    ``overlap = shared / grams``: ``grams`` is the number of distinct ``n``-grams of the
    training prompt, ``shared`` how many of them occur in at least one eval prompt (any set).
    ``eval_set`` / ``eval_row`` name the eval prompt that shares the most n-grams with it
    (``eval_shared`` of them; the first such prompt on a tie); None when nothing is shared.
    """

    overlap: float
    grams: int
    shared: int
    n: int
    eval_set: str | None = None
    eval_row: int | None = None
    eval_shared: int = 0


class EvalIndex:
    """Every word ``n``-gram (and ``short_n``-gram) of the eval prompts, each mapped to the
    ``(set, row)`` pairs it occurs in: one hash lookup per training n-gram.

    A training prompt with at least ``n`` words is measured by its ``n``-grams; one with fewer
    words but at least ``short_n`` by its ``short_n``-grams; a shorter one has no n-grams and
    an overlap of 0 (``Overlap.grams == 0``).
    """

    def __init__(self, eval_sets: Mapping[str, Sequence[Any]], n: int = 13, short_n: int | None = None):
        if n < 1 or (short_n is not None and not 1 <= short_n < n):
            raise ValueError(f"need n >= 1 and 1 <= short_n < n, got n={n}, short_n={short_n}")
        self.n, self.short_n = n, short_n
        self.names = list(eval_sets)
        self.prompts = {name: list(rows) for name, rows in eval_sets.items()}
        self.index: dict[int, dict[tuple[str, ...], list[tuple[str, int]]]] = {}
        for size in {n, short_n} - {None}:
            table: dict[tuple[str, ...], list[tuple[str, int]]] = {}
            for name, prompts in self.prompts.items():
                for row, prompt in enumerate(prompts):
                    for gram in ngrams(normalise_words(prompt), size):
                        table.setdefault(gram, []).append((name, row))
            self.index[size] = table

    def __len__(self) -> int:
        return len(self.index[self.n])

    def overlap(self, prompt: Any) -> Overlap:
        """The :class:`Overlap` of one training prompt with the eval prompts."""
        words = normalise_words(prompt)
        size = self.n if len(words) >= self.n or self.short_n is None else self.short_n
        grams = ngrams(words, size)
        table = self.index[size]
        hits = [table[g] for g in grams if g in table]
        if not hits:
            return Overlap(0.0, len(grams), 0, size)
        per_row = Counter(place for places in hits for place in set(places))
        order = {name: i for i, name in enumerate(self.names)}
        (eval_set, eval_row), eval_shared = min(per_row.items(), key=lambda kv: (-kv[1], order[kv[0][0]], kv[0][1]))
        return Overlap(len(hits) / len(grams), len(grams), len(hits), size, eval_set, eval_row, eval_shared)


CATEGORIES = (MULTIPLE_CHOICE, TRUE_FALSE, CONTAMINATED)


def screen(
    rows: Sequence[Mapping[str, Any]],
    *,
    multiple_choice: bool = True,
    true_false: bool = True,
    index: EvalIndex | None = None,
    threshold: float = 0.0,
) -> tuple[list[dict[str, Any] | None], list[Overlap | None]]:
    """``(records, overlaps)``: the drop record of every row (None for a row that is kept) and
    its :class:`Overlap` (None where it was not measured: no ``index``, or dropped by a detector).

    Each row's ``prompt`` (and ``answer``, when it has one) is checked in this order, and the
    first check that fires drops it: :func:`multiple_choice_rule` (if ``multiple_choice``),
    :func:`true_false_rule` (if ``true_false``), then, given an ``index``, contamination:
    ``EvalIndex.overlap(prompt).overlap > threshold``. A record is ``{reason, rule, evidence}``
    for a detector and ``{reason: "contaminated", rule: "ngram_overlap", overlap, n, grams,
    shared, eval_set, eval_row, eval_shared}`` (see :class:`Overlap`) for an overlap.

    >>> screen([{"prompt": "Is 9 prime?", "answer": "No"}, {"prompt": "What is 2+2?", "answer": "4"}])[0]
    [{'reason': 'true_false', 'rule': 'answer_is_truth_value', 'evidence': 'No'}, None]
    """
    records: list[dict[str, Any] | None] = []
    overlaps: list[Overlap | None] = []
    for row in rows:
        prompt, answer = row.get("prompt"), row.get("answer")
        verdict = (
            multiple_choice
            and multiple_choice_rule(prompt, answer)
            or true_false
            and true_false_rule(prompt, answer)
            or None
        )
        if verdict is not None:
            records.append({"reason": verdict.category, "rule": verdict.rule, "evidence": verdict.evidence})
            overlaps.append(None)
            continue
        found = index.overlap(prompt) if index is not None else None
        overlaps.append(found)
        if found is not None and found.overlap > threshold:
            records.append(
                {
                    "reason": CONTAMINATED,
                    "rule": "ngram_overlap",
                    "overlap": round(found.overlap, 4),
                    "n": found.n,
                    "grams": found.grams,
                    "shared": found.shared,
                    "eval_set": found.eval_set,
                    "eval_row": found.eval_row,
                    "eval_shared": found.eval_shared,
                }
            )
        else:
            records.append(None)
    return records, overlaps


def excerpt(text: Any, limit: int = 200) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis.

    >>> excerpt("a\\n b   c", 4)
    'a b…'
    """
    flat = " ".join(message_text(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def summarise(
    rows: Sequence[Mapping[str, Any]], records: Sequence[Mapping[str, Any] | None], examples: int = 3
) -> dict[str, Any]:
    """Counts of a :func:`screen`: ``dropped`` per reason, ``by_rule`` per rule that dropped a
    row, and up to ``examples`` rows per rule (``row`` is the index in ``rows``).
    """
    dropped = Counter(r["reason"] for r in records if r is not None)
    by_rule = Counter(r["rule"] for r in records if r is not None)
    shown: dict[str, list[dict[str, Any]]] = {}
    for i, record in enumerate(records):
        if record is None or len(shown.setdefault(record["rule"], [])) >= examples:
            continue
        answer = rows[i].get("answer")
        shown[record["rule"]].append(
            {
                "row": i,
                "prompt": excerpt(rows[i].get("prompt")),
                **({"answer": excerpt(answer, 80)} if answer is not None else {}),
                **{k: v for k, v in record.items() if k not in ("reason", "rule")},
            }
        )
    return {
        "kept": sum(r is None for r in records),
        "dropped": {c: dropped[c] for c in CATEGORIES},
        "by_rule": dict(sorted(by_rule.items())),
        "examples": {k: v for k, v in shown.items() if v},
    }
