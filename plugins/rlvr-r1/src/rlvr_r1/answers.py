"""Answer extraction and the accuracy reward of DeepSeek-R1 (rule-based, math-verify backed).

DeepSeek-R1 (2025, section 2.2.2): "Accuracy rewards: the accuracy reward model evaluates whether
the response is correct ... the model is required to provide the final answer in a specified
format (e.g., within a box), enabling reliable rule-based verification of correctness."

Here the final answer is read only from outside the thinking part, an answer that sprays several
candidates scores 0, and equivalence is decided by math-verify. See the plugin README for the full rules.
"""

from __future__ import annotations

import logging
import math
import re
import signal
import sys
import threading
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from fractions import Fraction
from functools import lru_cache
from itertools import islice

from rlvr_plugins.text import BOXED, answer_block, gsm8k_final, last_boxed, matching_brace, split_think

__all__ = [
    "split_completion",
    "extract_answer",
    "is_sprayed",
    "reference_answer",
    "parse_reference",
    "accuracy",
    "last_boxed",
    "FALLBACKS",
    "reference_problem",
    "check_references",
    "CHECK_BUDGET_S",
    "TOO_MANY_DIGITS",
    "UNPARSEABLE",
    "answer_too_long",
    "PARSE_TIMEOUT_S",
    "VERIFY_TIMEOUT_S",
    "TIME_BUDGET_S",
    "DEADLINE_MARGIN_S",
    "time_budget",
    "OutOfTime",
    "MAX_ANSWER_CHARS",
    "MAX_NUMBER_DIGITS",
    "MAX_LOG_CHARS",
    "bound_library_logs",
    "plain_decimal",
    "rounds_to",
    "MIN_SIGNIFICANT_DIGITS",
    "MAX_DECIMALS",
    "graded_statement",
]

PARSE_TIMEOUT_S = 5
VERIFY_TIMEOUT_S = 5
TIME_BUDGET_S = 5.0
DEADLINE_MARGIN_S = (
    3.0  # under an engine deadline: 1 s for math-verify's whole-second timeouts, 2 s for importing sympy
)
MAX_ANSWER_CHARS = 1000
MAX_NUMBER_DIGITS = 100_000
CHECK_BUDGET_S = 3.0

_BOX = BOXED
split_completion = split_think
"""Split a completion into (thinking part, answer part): :func:`rlvr_plugins.text.split_think`."""

_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?:(?:,|\{,\}|\\,)\d{3})+(?![\d])")
_THOUSANDS_SEP = re.compile(r",|\{,\}|\\,")
_LATEX_SPACING = re.compile(r"\\[,;:! ]|~")
_MATH_DELIMITERS = re.compile(r"\$|\\\(|\\\[|\\boxed")
_PROSE_WORD = re.compile(r"[^\W\d_]{2,}")

_EITHER = re.compile(r"\beither\b", re.IGNORECASE)
_OR = re.compile(r"\bor\b", re.IGNORECASE)
_ALTERNATIVE = re.compile(r"\bor\b|\\lor\b|\\vee\b|或", re.IGNORECASE)
_PLUS_MINUS = re.compile(r"\\pm\b|\\mp\b|±|∓")
_LIST = re.compile(
    r"(?<=[0-9)\]}])\s*(?:[,;，；、]|\band\b|(?<=\d)(?<![_^]\d)\s(?=\s*\d))\s*"
    r"(?=[-+0-9(\[{\\.]|[^\W\d_]\s*[=<>])",
    re.IGNORECASE,
)


def _count_boxes(text: str, limit: int = 2) -> int:
    return sum(1 for _ in islice(_BOX.finditer(text), limit))


FALLBACKS: dict[str, Callable[[str], str | None]] = {"gsm8k": gsm8k_final}


def _locate_answer(completion: str, think_opened: bool, fallback: str | None) -> tuple[str | None, str]:
    """(answer, region the answer was read from)."""
    if fallback is not None and fallback not in FALLBACKS:
        raise ValueError(f"unknown fallback {fallback!r}; choose from {sorted(FALLBACKS)} or None")
    _, rest = split_completion(completion, think_opened=think_opened)
    decided, block = answer_block(rest)
    if decided:
        return block, block or ""
    boxed = last_boxed(rest)
    if boxed is not None:
        return boxed.strip() or None, rest
    if fallback is None:
        return None, ""
    answer = FALLBACKS[fallback](rest)
    return answer, answer or ""


def extract_answer(completion: str, *, think_opened: bool = False, fallback: str | None = "gsm8k") -> str | None:
    r"""The final answer, read only from the part after the thinking (see ``split_completion``).

    1. exactly one complete ``<answer>…</answer>`` block → its stripped content (None if empty;
       several ``<answer>`` or ``</answer>`` tags → None, the answer is ambiguous);
    2. else the content of the last ``\boxed{…}`` / ``\fbox{…}`` (balanced braces);
    3. else the configured fallback: ``"gsm8k"`` = the number after the last ``####``;
       ``None`` = no fallback.

    An answer that appears only inside the thinking part is not an answer (None).
    """
    return _locate_answer(completion, think_opened, fallback)[0]


def _remove_thousands_separators(text: str) -> str:
    return _THOUSANDS.sub(lambda m: _THOUSANDS_SEP.sub("", m.group()), text)


def _unbox(text: str) -> str:
    r"""``X`` when ``text`` is nothing but one ``\boxed{X}`` (optionally inside ``$…$``)."""
    core = text.strip().strip("$").strip()
    box = _BOX.match(core)
    if box is None or matching_brace(core, box.end() - 1) != len(core) - 1:
        return text
    return core[box.end() : -1]


_ASCII_FORMS = str.maketrans(
    {
        "\u2212": "-",  # minus sign
        "\uff0d": "-",  # full-width hyphen-minus
        "\uff0b": "+",  # full-width plus
        "\uff0f": "/",  # full-width solidus
        "\uff0e": ".",  # full-width full stop
        "\u066b": ".",  # Arabic decimal separator
        "\u066c": ",",  # Arabic thousands separator
    }
)


_OTHER_DIGIT = re.compile(r"(?![0-9])\d")
"""A decimal digit (Unicode category Nd) other than ASCII ``0-9``: full-width, Arabic-Indic,
Devanagari, Bengali, Thai, mathematical bold, ..."""


def _ascii_digit(match: re.Match[str]) -> str:
    return str(unicodedata.decimal(match.group()))


def _ascii_forms(text: str) -> str:
    """Every Unicode decimal digit (``１２``, ``١٢``, ``۱۲``, ``१२``, ``๑๒``, ``𝟏𝟐``) as its ASCII digit
    (``unicodedata.decimal``); the minus sign U+2212 and full-width ``－ ＋ ／ ．`` as ``- + / .``;
    Arabic decimal and thousands separators as ``.`` and ``,``."""
    text = text.translate(_ASCII_FORMS)
    return text if text.isascii() else _OTHER_DIGIT.sub(_ascii_digit, text)


_SCIENTIFIC = re.compile(r"^(\$?\s*)([+-]?)(\d+)(?:\.(\d*))?[eE]([+-]?\d{1,6})(\s*\$?)$")


def plain_decimal(whole: str, fraction: str, exponent: int) -> str:
    """``whole.fraction × 10**exponent`` written as a plain decimal, digit for digit (no rounding).

    >>> plain_decimal("1", "2", 1), plain_decimal("1", "5", -2), plain_decimal("25", "", 2)
    ('12', '0.015', '2500')
    """
    digits, point = whole + fraction, len(whole) + exponent
    if point <= 0:
        return "0." + "0" * -point + digits
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return f"{digits[:point]}.{digits[point:]}"


def _scientific_as_plain(text: str) -> str:
    """A whole answer in scientific notation (``1.2e1``, ``-1.5E-2``, ``$2.5e0$``) as a plain decimal
    (``12``, ``-0.015``, ``$2.5$``); anything else, or an exponent past ``MAX_NUMBER_DIGITS``, as it is."""
    number = _SCIENTIFIC.match(text)
    if number is None or abs(int(number.group(5))) > MAX_NUMBER_DIGITS:
        return text
    before, sign, whole, fraction, exponent, after = number.groups()
    return before + sign + plain_decimal(whole, fraction or "", int(exponent)) + after


_BARE_POINT = re.compile(r"(?<=\d)\.(?=\s*(?:[/*^)\]}]|\\(?:cdot|times|div)\b))")
"""A decimal point with no digit after it, before an operator or a closing bracket: ``-1./3``
(Minerva's references, written as Python floats) is ``-1/3``, not ``-1``."""


def _normalise(text: str) -> str:
    r"""Digits and signs in ASCII form (``_ascii_forms``), currency ``\$`` dropped, ``\fbox`` read as
    ``\boxed``, a lone box unwrapped, thousands separators and a final period removed, a bare
    decimal point before an operator dropped (``-1./3`` is ``-1/3``, ``_BARE_POINT``), a number in
    scientific notation written out (``_scientific_as_plain``)."""
    text = _unbox(_ascii_forms(text).replace("\\$", "").replace("\\fbox", "\\boxed"))
    text = _BARE_POINT.sub("", _remove_thousands_separators(text))
    return _scientific_as_plain(text.strip().rstrip(".").rstrip())


_MATH_DELIMITER = re.compile(r"(?<!\\)(?:\$\$|\$)|\\\(|\\\)|\\\[|\\\]")
_CLOSER = {"$$": "$$", "$": "$", "\\(": "\\)", "\\[": "\\]"}
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_SENTENCE_END = re.compile(r"\n|(?<![.!?])[.!?](?![.!?])(?=\s)")
_HAS_MATH = re.compile(r"\d|\$|\\[A-Za-z(\[]")


def _math_spans(text: str) -> list[tuple[int, int]]:
    r"""(start, end) of each ``$…$``, ``$$…$$``, ``\(…\)``, ``\[…\]`` in ``text``, in one linear scan
    (an unclosed one runs to the end; ``\$``, a currency sign, is no delimiter)."""
    spans, closer, start = [], None, 0
    for token in _MATH_DELIMITER.finditer(text):
        if closer is None and token.group() in _CLOSER:
            closer, start = _CLOSER[token.group()], token.start()
        elif token.group() == closer:
            spans.append((start, token.end()))
            closer = None
    if closer is not None:
        spans.append((start, len(text)))
    return spans


_PROSE_TOKEN = re.compile(r"\\(?:text[a-z]*|mbox|mathrm)\s*\{|\\[A-Za-z]+|\\[{}]|[{}]|[^\W\d_]{2,}")
_OPEN_TEXT = re.compile(r"(?:\\[A-Za-z]+\s*\{\s*)+$|(?:\s+(?:and|or))+\s*$", re.IGNORECASE)
_CONNECTIVES = frozenset({"and", "or"})  # list and alternative markers: is_sprayed judges them
_TRAILING = " \t,;:([-\u2013\u2014"


def _first_prose_word(text: str, spans: list[tuple[int, int]]) -> int | None:
    """Where the first prose word of ``text`` starts: a word of two or more letters (not "and"/"or")
    outside the math ``spans``, not a LaTeX command and outside braces, except those of
    ``\\text{…}``, ``\\textbf{…}``, ``\\mbox{…}``, ``\\mathrm{…}``, whose words are prose (``18 \\text{ dollars}``);
    None if there is none. One linear scan."""
    depth, span, texts = 0, 0, []
    for token in _PROSE_TOKEN.finditer(text):
        while span < len(spans) and spans[span][1] <= token.start():
            span += 1
        if span < len(spans) and spans[span][0] <= token.start():
            continue  # inside math
        word = token.group()
        if word[-1] == "{" and word[0] == "\\":
            texts.append(depth)  # the words of \\text{…} are read as prose: its braces do not count
        elif word == "{":
            depth += 1
        elif word == "}":
            if texts and texts[-1] == depth:
                texts.pop()
            else:
                depth = max(depth - 1, 0)
        elif depth == 0 and word[0] != "\\" and word.lower() not in _CONNECTIVES:
            return token.start()
    return None


def _cut_lead(text: str) -> str:
    r"""``text`` less trailing separators, an opened ``\text{`` and a trailing "and"/"or" (looked for
    in its last 200 characters only, so that the search stays linear)."""
    text = text.rstrip(_TRAILING)
    return (text[:-200] + _OPEN_TEXT.sub("", text[-200:])).rstrip(_TRAILING)


def graded_statement(answer: str) -> str:
    r"""The part of an answer that is graded: an answer followed by prose is graded on its first
    statement, and a statement that starts with math on that leading expression.

    When ``answer`` holds prose (a word of two or more letters, other than "and"/"or", outside
    ``$…$``, ``\(…\)``, ``\[…\]``, LaTeX commands and braces other than ``\text{…}``'s:
    ``_first_prose_word``), it is cut into sentences (at a
    newline, or at one ``.``, ``!`` or ``?`` followed by whitespace; not inside math, not a decimal
    point, not an ellipsis) and the first sentence holding math (a digit, ``$``, a LaTeX command)
    is kept; the sentences after it are commentary and are not read. When that sentence starts
    with math before its first prose word (``19 (the reference answer is 18)``, ``18 dollars``),
    only that leading expression is graded (``19``, ``18``); a sentence that starts with words
    (``The answer is 18``) is graded whole. An answer without prose, or whose sentences hold no
    math, is graded whole.

    >>> graded_statement("19. The reference answer is 18."), graded_statement("The answer is 18.")
    ('19', 'The answer is 18.')
    >>> graded_statement("1.6+1\nI am confident in this answer."), graded_statement("$x = 2.5$. So 2.5 m.")
    ('1.6+1', '$x = 2.5$')
    >>> graded_statement("19 (the reference answer is 18)"), graded_statement("18 \\text{ dollars}")
    ('19', '18')
    """
    spans = _math_spans(answer)
    if _first_prose_word(answer, spans) is None:
        return answer
    sentences, begin, span = [], 0, 0
    for end in _SENTENCE_END.finditer(answer):
        while span < len(spans) and spans[span][1] <= end.start():
            span += 1
        if span < len(spans) and spans[span][0] <= end.start():
            continue  # inside math
        sentences.append(answer[begin : end.start()])
        begin = end.end()
    sentences.append(answer[begin:])
    first = next((s.strip() for s in sentences if _HAS_MATH.search(s)), None)
    if first is None:
        return answer
    at = _first_prose_word(first, _math_spans(first))
    lead = _cut_lead(first if at is None else first[:at])
    return lead if _HAS_MATH.search(lead) else first


def _marker_text(text: str) -> str:
    text = _normalise(text).replace("$", "")
    return _LATEX_SPACING.sub(" ", text)


def _either_or(text: str) -> bool:
    either = _EITHER.search(text)
    return either is not None and _OR.search(text, either.end()) is not None


def _has_list(text: str) -> bool:
    return _LIST.search(text) is not None


_MARKERS: tuple[Callable[[str], bool], ...] = (
    lambda t: _ALTERNATIVE.search(t) is not None,
    lambda t: _PLUS_MINUS.search(t) is not None,
    _has_list,
)


def is_sprayed(answer: str, reference: str | None = None) -> bool:
    r"""Whether ``answer`` sprays several candidate answers (which then scores 0).

    Always spraying: two or more ``\boxed``/``\fbox``; "either … or".
    Spraying unless the (normalised) reference shows the same kind of marker itself:
      - alternatives: the word "or", ``\lor``, ``\vee``, "或";
      - plus-minus: ``\pm``, ``\mp``, "±", "∓";
      - lists: two values separated by ``,`` ``;`` "and" (or full-width ``，；、``), or two
        numbers separated only by whitespace — e.g. "12, 13", "{11,12,13}", "x=1, y=2".
    So a reference that is itself a tuple/interval/set/list (``(1, 2)``, ``\{1,2\}``, "5,15")
    allows lists, while a scalar reference (or ``reference=None``) does not.
    Thousands separators (``1,000``, ``1{,}000``, ``1\,000``) and LaTeX spacing are not lists.
    """
    if _count_boxes(answer) > 1:
        return True
    text = _marker_text(answer)
    if _either_or(text):
        return True
    ref = _marker_text(reference_answer(reference)) if reference is not None else ""
    return any(marker(text) and not marker(ref) for marker in _MARKERS)


def reference_answer(reference: str) -> str:
    r"""Normalise a reference: GSM8K worked solution (``…#### 18``) → ``"18"`` (thousands commas
    removed); MATH solution (contains ``\boxed{…}``) → the content of its last box; otherwise the
    stripped string itself."""
    if "####" in reference:
        number = gsm8k_final(reference)
        if number is not None:
            return number
    boxed = last_boxed(reference)
    if boxed is not None:
        return boxed.strip()
    return reference.strip()


def _signal_timeouts_usable() -> bool:
    """math-verify's timeouts use signal.alarm: only on the main thread, and only when no other
    ITIMER_REAL alarm is pending (math-verify's ``alarm(0)`` would silently cancel it)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if not hasattr(signal, "getitimer"):
        return False
    return signal.getitimer(signal.ITIMER_REAL)[0] == 0.0


class OutOfTime(Exception):
    """math-verify ran out of time: the answer's budget is spent (``time_budget``), or a call reached
    its own timeout. What a timed-out call returns (math-verify's "no parse", "not equal") is not
    its answer, so it is never cached as one (``_ran_out``)."""


_BUDGET = threading.local()


@contextmanager
def time_budget(seconds: float | None):
    """Every math-verify call in the block shares ``seconds`` (this thread only; None: no budget)."""
    previous = getattr(_BUDGET, "deadline", None)
    _BUDGET.deadline = None if seconds is None else time.monotonic() + seconds
    try:
        yield
    finally:
        _BUDGET.deadline = previous


def _timeout(seconds: int) -> int | None:
    """math-verify's timeout for one call: ``seconds``, cut to what is left of the budget
    (``time_budget``) rounded up to whole seconds (math-verify's unit), so the calls end at most
    1 s after the budget; ``OutOfTime`` when nothing is left. None (no timeout inside
    math-verify) where its signal-based timeouts cannot be used."""
    deadline = getattr(_BUDGET, "deadline", None)
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise OutOfTime
        seconds = min(seconds, math.ceil(left))
    return seconds if _signal_timeouts_usable() else None


_TIMED_OUT: dict[tuple, int] = {}
"""The longest timeout each timed-out math-verify call ran out of, by call: the same call with no
longer a timeout is not run again (a GRPO group often repeats a pathological answer); a longer one
(a larger budget) tries again."""
_TIMED_OUT_MAX = 4096


def _known_to_time_out(key: tuple, timeout: int | None) -> None:
    """``OutOfTime`` when ``key``'s call already ran out of a timeout at least as long as ``timeout``."""
    failed = _TIMED_OUT.get(key)
    if failed is not None and timeout is not None and timeout <= failed:
        raise OutOfTime


def _ran_out(key: tuple, started: float, timeout: int | None) -> None:
    """``OutOfTime`` (and the call recorded) when a math-verify call that started at ``started``
    lasted its whole ``timeout``: math-verify then returns "no parse" / "not equal" in place of an
    answer, which must not be cached or scored as one."""
    if timeout is not None and time.monotonic() - started >= timeout:
        if len(_TIMED_OUT) >= _TIMED_OUT_MAX:
            _TIMED_OUT.clear()
        _TIMED_OUT[key] = max(timeout, _TIMED_OUT.get(key, 0))
        raise OutOfTime


def _parse_inputs(text: str) -> tuple[str, ...]:
    r"""How a normalised answer is shown to math-verify: as-is when it has math delimiters or a
    box; as ``$…$`` when it contains LaTeX (``\``) or no word of 2+ letters; otherwise (prose,
    e.g. "18 dollars", "5 and 15") both as plain text and as ``$…$``, results concatenated."""
    if _MATH_DELIMITERS.search(text):
        return (text,)
    if "\\" in text or not _PROSE_WORD.search(text):
        return (f"${text}$",)
    return (text, f"${text}$")


MAX_LOG_CHARS = 300
_VERBOSE_LOGGERS = ("math_verify", "latex2sympy2_extended", "sympy")


class _BoundedRecord(logging.Filter):
    """Cuts a log record's message to ``MAX_LOG_CHARS`` characters, saying how long it was
    (math-verify logs the whole input on a parse timeout: 1 MB on one line)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if len(message) > MAX_LOG_CHARS:
            record.msg, record.args = f"{message[:MAX_LOG_CHARS]}... [{len(message)} characters]", ()
        return True


def bound_library_logs() -> None:
    """Install ``_BoundedRecord`` on every logger of math-verify, latex2sympy and sympy that exists
    (a filter acts only on the logger a record is made on, so each module's logger gets one).
    Called when math-verify is first imported; idempotent."""
    names = [
        name for name in list(logging.Logger.manager.loggerDict) if name.split(".", 1)[0] in _VERBOSE_LOGGERS
    ] + list(_VERBOSE_LOGGERS)
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _BoundedRecord) for f in logger.filters):
            logger.addFilter(_BoundedRecord())


@lru_cache(maxsize=1)
def _extraction_config() -> tuple:
    """LaTeX (boxes first) then plain expressions; math-verify (and sympy) imported on first use
    so that the format and language rewards do not pay for it (and its logs bounded then)."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    bound_library_logs()
    return (LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig())


def _parse_math(text: str) -> list:
    return list(_parse_normalised(_normalise(text)))


@lru_cache(maxsize=16384)
def _parse_normalised(text: str) -> tuple:
    """math-verify parse of a normalised answer, cached per process: ``\\boxed{X}``, ``$\\boxed{X}$``
    and ``X.`` normalise to the same text and are parsed once."""
    from math_verify import parse

    if not text:
        return ()
    config, timeout = _extraction_config(), _timeout(PARSE_TIMEOUT_S)
    found: list = []
    with _int_digits_at_least(min(len(text), MAX_NUMBER_DIGITS)):
        for shown in _parse_inputs(text):
            key = ("parse", shown)
            _known_to_time_out(key, timeout)
            started = time.monotonic()
            found.extend(parse(shown, extraction_config=config, parsing_timeout=timeout))
            _ran_out(key, started, timeout)
    return tuple(found)


@lru_cache(maxsize=4096)
def parse_reference(reference: str) -> tuple:
    """math-verify parse of ``reference_answer(reference)``, cached per process (a GRPO group shares
    one reference, so its gold answer is parsed once). A tuple; pass ``list(...)`` to ``verify``.
    Empty when math-verify extracts nothing."""
    return tuple(_parse_math(reference_answer(reference)))


_PLAIN_STRIP = re.compile(r"\\(?:text|mathrm|textbf|mathbf)\b|[\s${}]|\.$")


def _plain(text: str) -> str:
    return _PLAIN_STRIP.sub("", text).lower()


def accuracy(
    completion: str,
    reference: str,
    *,
    think_opened: bool = False,
    fallback: str | None = "gsm8k",
    time_budget_s: float | None = TIME_BUDGET_S,
) -> float:
    r"""R1 accuracy reward: 1.0 if the final answer is equivalent to the reference, else 0.0.

    0.0 when: no answer outside the thinking (``extract_answer``); the answer is sprayed
    (``is_sprayed(answer, reference)``, or several boxes in the region the answer was read from);
    it is not a plain decimal and is too long for math-verify (``answer_too_long``); math-verify
    finds no answer; a decimal answer against a reference that is one exact number is not that
    number rounded to its own decimals (``rounds_to``); ``math_verify.verify(gold, answer)`` is
    False/times out; or math-verify's
    calls for this answer (parses, verify) would run past ``time_budget_s`` (each call's timeout
    is cut to what is left, see ``_timeout``; None: no budget). Plain decimals are compared exactly, as
    digit strings, whatever their number of digits. An answer followed by prose is graded on its
    first statement (``graded_statement``); spraying is checked on the whole answer.
    A reference math-verify cannot parse (e.g. "yes") is compared as a plain string
    (case, whitespace, ``$``, braces, ``\text`` and a final period ignored).
    """
    answer, region = _locate_answer(completion, think_opened, fallback)
    if answer is None or is_sprayed(answer, reference) or _count_boxes(region) > 1:
        return 0.0
    try:
        with time_budget(time_budget_s):
            return _answer_matches(answer, reference)
    except OutOfTime:
        return 0.0


_PLAIN_NUMBER = re.compile(r"^\$?\s*([+-]?)(?:(\d+)(?:\.(\d*))?|\.(\d+))\s*\$?$")
_DIGIT_RUN = re.compile(r"\d+")


def _decimal_key(number: re.Match[str]) -> tuple[str, str, str]:
    """(sign, integer digits, fraction digits) with leading and trailing zeros dropped: equal keys
    iff equal values, for any number of digits (no ``int``/``Fraction`` conversion)."""
    whole = (number.group(2) or "").lstrip("0")
    fraction = (number.group(3) or number.group(4) or "").rstrip("0")
    sign = "-" if number.group(1) == "-" and (whole or fraction) else ""
    return sign, whole, fraction


def _numeric_verdict(answer: str, reference: str) -> float | None:
    """When both sides are plain decimal numbers (``18``, ``-0.50``, ``$7$``), compare their values
    exactly, without sympy and for any number of digits; ``None`` (ask math-verify) otherwise."""
    a, b = _PLAIN_NUMBER.match(answer), _PLAIN_NUMBER.match(reference)
    if a is None or b is None:
        return None
    return float(_decimal_key(a) == _decimal_key(b))


def _longest_number(text: str) -> int:
    return max((len(run) for run in _DIGIT_RUN.findall(text)), default=0)


def reference_problem(reference: str) -> str | None:
    """Why math-verify can never parse ``reference``, or None when it can be tried: its answer holds
    a number of more than ``MAX_NUMBER_DIGITS`` digits (it is then compared only as a plain decimal
    number or as plain text)."""
    digits = _longest_number(reference_answer(reference))
    if digits > MAX_NUMBER_DIGITS:
        return (
            f"the reference answer holds a number of {digits} digits; numbers of more than "
            f"{MAX_NUMBER_DIGITS} digits are compared only as plain decimals or as plain text"
        )
    return None


TOO_MANY_DIGITS = "too-many-digits"
UNPARSEABLE = "unparseable"


def check_references(
    references: Sequence[str | None], *, budget_s: float = CHECK_BUDGET_S
) -> tuple[list[tuple[int, str]], int]:
    """Which references math-verify can never parse, cheaply, for a dataset check at load.

    Returns ``([(index, kind)], unchecked)``: ``kind`` is :data:`TOO_MANY_DIGITS`
    (``reference_problem``) or :data:`UNPARSEABLE` (math-verify's parse, the one
    ``parse_reference`` caches, finds no math object in the reference answer). ``None`` entries
    are skipped; each distinct reference is checked once; plain decimal numbers (``18``,
    ``-0.5``) are fine without math-verify (they are compared as digit strings). Parsing stops
    once ``budget_s`` seconds have passed (checked between references; each parse keeps its own
    ``PARSE_TIMEOUT_S``, as when scoring): ``unchecked`` counts the references left and those whose
    parse timed out (they are checked when scored)."""
    verdicts: dict[str, str | None] = {}
    found, unchecked = [], 0
    deadline = time.monotonic() + budget_s
    for index, reference in enumerate(references):
        if reference is None:
            continue
        if reference not in verdicts:
            if reference_problem(reference) is not None:
                verdicts[reference] = TOO_MANY_DIGITS
            elif _PLAIN_NUMBER.match(_normalise(reference_answer(reference))):
                verdicts[reference] = None
            elif time.monotonic() >= deadline:
                verdicts[reference] = None
                unchecked += 1
            else:
                try:
                    parsed = parse_reference(reference)
                except OutOfTime:  # slow to parse is not unparseable: checked when scored
                    verdicts[reference] = None
                    unchecked += 1
                else:
                    verdicts[reference] = None if any(not isinstance(p, str) for p in parsed) else UNPARSEABLE
        if verdicts[reference] is not None:
            found.append((index, verdicts[reference]))
    return found, unchecked


def answer_too_long(answer: str, reference: str) -> bool:
    """Whether ``answer`` is too long to show to math-verify: longer than ``MAX_ANSWER_CHARS`` and
    than twice the reference answer (math-verify's parse can take seconds on a few hundred
    characters and grows faster than the length)."""
    return len(answer) > max(MAX_ANSWER_CHARS, 2 * len(reference_answer(reference)))


def _answer_matches(answer: str, reference: str) -> float:
    """The verdict for one extracted answer against one reference: plain decimals compared exactly
    (``_numeric_verdict``); a longer answer is wrong (0.0, math-verify never
    sees it, see ``answer_too_long``); otherwise ``_math_verdict``."""
    answer = graded_statement(answer)
    fast = _numeric_verdict(_normalise(answer), _normalise(reference_answer(reference)))
    if fast is not None:
        return fast
    if answer_too_long(answer, reference):
        return 0.0
    return _math_verdict(answer, reference)


@lru_cache(maxsize=16384)
def _math_verdict(answer: str, reference: str) -> float:
    """math-verify's verdict, cached per process: the completions of a GRPO group often end in the
    same answer, which is then parsed and verified once."""
    gold = parse_reference(reference)
    if not gold:
        expected = _plain(reference_answer(reference))
        return float(bool(expected) and _plain(answer) == expected)
    predicted = _parse_math(answer)
    if not predicted:
        return 0.0
    decimal = _decimal_verdict(reference, gold, predicted)
    if decimal is not None:
        return decimal
    return float(_verify(reference, gold, tuple(predicted)))


MIN_SIGNIFICANT_DIGITS = 3
MAX_DECIMALS = 1000
_DECIMAL_LITERAL = re.compile(r"(\d*)\.(\d+)")


def rounds_to(whole: str, fraction: str, negative: bool, value) -> bool:
    """Whether the decimal ``±whole.fraction`` (``d = len(fraction)`` decimals) counts for the exact real
    number ``value`` (a sympy number): it equals ``value``, or it is ``value`` rounded to ``d`` decimals,
    ``|answer - value| <= 5 * 10**-(d+1)`` (either neighbour at an exact tie), and shows at least
    ``MIN_SIGNIFICANT_DIGITS`` significant digits (``0.333`` for 1/3, not ``0.3``; ``0.0`` for
    ``1/3000000`` has none). Exact (``fractions.Fraction``) for a sympy ``Rational``; any other ``value``
    (``pi``, or an unevaluated ``sqrt(4)``) is evaluated numerically only (``evalf``, ``d + 30`` digits,
    so ``1/10^{10^8}`` costs no exact power), "equal" meaning within ``10**-(d+20)``; more than
    ``MAX_DECIMALS`` decimals, or a value that does not evaluate to a finite real, do not count.

    >>> from sympy import Rational, pi
    >>> rounds_to("0", "333", False, Rational(1, 3)), rounds_to("0", "33", False, Rational(1, 3))
    (True, False)
    >>> rounds_to("3", "1415927", False, pi), rounds_to("3", "1415926", False, pi)
    (True, False)
    """
    decimals = len(fraction)
    answer = Fraction(int(whole + fraction or "0"), 10**decimals) * (-1 if negative else 1)
    if value.is_Rational:
        gap = abs(answer - Fraction(int(value.p), int(value.q)))
        equal, within = gap == 0, gap <= Fraction(5, 10 ** (decimals + 1))
    elif decimals > MAX_DECIMALS:
        return False
    else:
        import mpmath

        try:
            approx = value.evalf(decimals + 30)
            if not (approx.is_Float and approx.is_finite):
                return False
            with mpmath.workdps(decimals + 30):
                gap = abs(mpmath.mpf(answer.numerator) / answer.denominator - approx._to_mpmath(mpmath.mp.prec))
                equal = bool(gap < mpmath.mpf(10) ** -(decimals + 20))
                within = bool(gap <= mpmath.mpf(5) * mpmath.mpf(10) ** -(decimals + 1))
        except (ArithmeticError, ValueError, TypeError):
            return False
    significant = len((whole + fraction).lstrip("0"))
    return equal or (significant >= MIN_SIGNIFICANT_DIGITS and within)


def _value_of(parsed: tuple):
    """The single real number a math-verify parse stands for (``x = v`` read as ``v``), or None."""
    from sympy import Eq, Expr, Symbol

    first = next((p for p in parsed if not isinstance(p, str)), None)
    if isinstance(first, Eq) and isinstance(first.lhs, Symbol):
        first = first.rhs
    if not isinstance(first, Expr) or not first.is_number:
        return None
    return first


def _decimal_verdict(reference: str, gold: tuple, predicted: tuple) -> float | None:
    """The verdict for a decimal answer (``0.5000004``, ``x = 0.333``, ``3.14\\text{ cm}``) against a
    reference that is one exact real number (``\\frac{1}{2}``, ``\\pi``, ``x=\\sqrt{2}``): ``rounds_to``,
    instead of math-verify, which rounds both sides to 6 decimals (``0.5000004`` = 1/2 there).
    None (math-verify decides) when the answer is not one number written with one decimal point
    or the reference is not one exact real number (a decimal reference is compared digit for
    digit, as by ``_numeric_verdict``)."""
    from sympy import Float

    answer = _value_of(predicted)
    if not isinstance(answer, Float):
        return None
    value = _value_of(gold)
    if value is None:
        return None
    literals = {m.groups() for text in predicted if isinstance(text, str) for m in _DECIMAL_LITERAL.finditer(text)}
    if len(literals) != 1:
        return None
    whole, fraction = literals.pop()
    if float(f"{whole or 0}.{fraction}") != abs(float(answer)):
        return None
    if value.has(Float):
        plain = _PLAIN_NUMBER.match(_normalise(reference_answer(reference)))
        if plain is None:
            return None
        return float(_decimal_key(plain) == ("-" if answer < 0 else "", whole.lstrip("0"), fraction.rstrip("0")))
    return float(rounds_to(whole, fraction, bool(answer < 0), value))


_DIGIT_LIMITS_LOCK = threading.Lock()
_DIGIT_LIMITS: Counter[int] = Counter()
_DIGIT_LIMIT_BASE: list[int] = []


@contextmanager
def _int_digits_at_least(needed: int):
    """Python's limit on the digits of an ``int`` <-> ``str`` conversion (4300 by default; sympy and
    math-verify convert numbers that way) raised to at least ``needed`` while the block runs.
    The limit is process-wide: each thread inside such a block registers what it needs, the limit
    is the largest need, and the process's own limit comes back when the last one leaves."""
    if not hasattr(sys, "set_int_max_str_digits"):
        yield
        return
    with _DIGIT_LIMITS_LOCK:
        if not _DIGIT_LIMITS:
            _DIGIT_LIMIT_BASE[:] = [sys.get_int_max_str_digits()]
        base = _DIGIT_LIMIT_BASE[0]
        registered = base != 0 and needed > base
        if registered:
            _DIGIT_LIMITS[needed] += 1
            sys.set_int_max_str_digits(max(_DIGIT_LIMITS))
    try:
        yield
    finally:
        if registered:
            with _DIGIT_LIMITS_LOCK:
                _DIGIT_LIMITS[needed] -= 1
                if not _DIGIT_LIMITS[needed]:
                    del _DIGIT_LIMITS[needed]
                sys.set_int_max_str_digits(max(_DIGIT_LIMITS, default=base))


_VERDICTS: dict[tuple, bool] = {}
_VERDICTS_MAX = 16384


def _parsed_key(parsed: tuple) -> tuple:
    """Exact identity of a parse result: ``srepr`` keeps types, float precision and symbol assumptions."""
    from sympy import srepr

    return tuple(("str", p) if isinstance(p, str) else ("sympy", srepr(p)) for p in parsed)


def _verify(reference: str, gold: tuple, predicted: tuple) -> bool:
    """``math_verify.verify(gold, predicted)``, cached per process on (reference, exact parse of the
    answer): answers written differently that parse identically (``$\\boxed{X}$``, ``The answer is
    $X$``) are verified once. ``simplify`` is skipped where ``_refuted_numerically`` shows that it
    could only say "not equal" (see ``_symbolic_eq_unless_refuted``)."""
    with _int_digits_at_least(MAX_NUMBER_DIGITS):
        try:
            key = (reference, _parsed_key(predicted))
        except ValueError:  # a number of more than MAX_NUMBER_DIGITS digits
            return False
        verdict = _VERDICTS.get(key)
        if verdict is None:
            if len(_VERDICTS) >= _VERDICTS_MAX:
                _VERDICTS.clear()
            grader, symbolic_eq = _math_verify_grader()
            timeout = _timeout(VERIFY_TIMEOUT_S)
            _known_to_time_out(("verify", key), timeout)
            grader.sympy_symbolic_eq = _symbolic_eq_unless_refuted
            started = time.monotonic()
            try:
                verdict = grader.verify(list(gold), list(predicted), timeout_seconds=timeout)
            finally:
                grader.sympy_symbolic_eq = symbolic_eq
            _ran_out(("verify", key), started, timeout)
            _VERDICTS[key] = verdict
    return verdict


@lru_cache(maxsize=1)
def _math_verify_grader() -> tuple:
    """math-verify's grader module and its own ``sympy_symbolic_eq`` (the last step of
    ``sympy_expr_eq``: ``simplify(a - b).is_zero``)."""
    from math_verify import grader

    bound_library_logs()
    return grader, grader.sympy_symbolic_eq


def _symbolic_eq_unless_refuted(a, b) -> bool:
    """math-verify's ``sympy_symbolic_eq(a, b)``, answered ``False`` without ``simplify`` when ``a - b``
    is non-zero at a point (then it is not identically zero, and ``simplify`` could not make it so).
    Installed only while ``_verify`` runs."""
    if _refuted_numerically(a, b):
        return False
    return _math_verify_grader()[1](a, b)


_PROBE_VALUES = tuple(f"{n}/{d}" for n, d in ((7, 10), (11, 9), (13, 17), (19, 14), (23, 29), (31, 25)))
_TOLERANCE = 1e-9


def _probe_point(symbols) -> dict | None:
    """Distinct values for ``symbols``: rationals in (0.5, 1.5), or, for a symbol assumed not real
    (math-verify's complex mode), those plus ``3i/10``; None when a symbol is not a plain ``Symbol``
    or no candidate satisfies its assumptions (integer, negative, …)."""
    from sympy import I, Rational, Symbol

    if len(symbols) > len(_PROBE_VALUES):
        return None
    point = {}
    for symbol, real in zip(sorted(symbols, key=str), _PROBE_VALUES):
        if not isinstance(symbol, Symbol):
            return None
        candidates = (Rational(real), Rational(real) + Rational(3, 10) * I)
        fitting = [value for value in candidates if _satisfies(value, symbol.assumptions0)]
        if not fitting:
            return None
        point[symbol] = fitting[0]
    return point


def _satisfies(value, assumptions: dict) -> bool:
    return all(getattr(value, f"is_{name}") is holds for name, holds in assumptions.items())


def _refuted_numerically(a, b) -> bool:
    """Whether ``a - b`` is certainly not identically zero: both sides evaluate (30 digits) at a probe
    point satisfying every symbol's assumptions to finite numbers that differ by more than
    ``_TOLERANCE`` relative to their size. False (undecided) for anything else: sets, relations,
    matrices, undefined functions, integrals, sums, limits, derivatives, values that are equal or
    too close, or any error."""
    try:
        from sympy import Abs, Derivative, Expr, Integral, Limit, Product, Sum

        if not (isinstance(a, Expr) and isinstance(b, Expr)):
            return False
        if a.has(Integral, Sum, Product, Limit, Derivative) or b.has(Integral, Sum, Product, Limit, Derivative):
            return False
        point = _probe_point(a.free_symbols | b.free_symbols)
        if point is None:
            return False
        left, right = a.evalf(30, subs=point), b.evalf(30, subs=point)
        if not (left.is_number and right.is_number and left.is_finite and right.is_finite):
            return False
        gap, size = Abs(left - right).evalf(30), (1 + Abs(left) + Abs(right)).evalf(30)
        return bool(gap > _TOLERANCE * size)
    except Exception:
        return False
