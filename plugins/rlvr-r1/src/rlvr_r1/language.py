"""The language consistency reward of DeepSeek-R1.

DeepSeek-R1 (2025, section 2.3.2): "we introduce a language consistency reward during RL
training, which is calculated as the proportion of target language words in the CoT":

    reward = (# words of the chain of thought in the target language) / (# words in it)

Words are split by script with ``unicodedata`` only (offline, no dependency); see
``count_words`` for what counts as a word and what is neutral.
"""

from __future__ import annotations

import html
import re
import unicodedata
from bisect import bisect_right
from collections import Counter
from functools import lru_cache

from rlvr_plugins.text import visible_text

from .answers import split_completion

__all__ = [
    "TARGET_SCRIPTS",
    "TEXT_COMMANDS",
    "script_of",
    "count_words",
    "language_consistency",
    "thinking_text",
    "decode_escapes",
    "reader_text",
]

TARGET_SCRIPTS: dict[str, frozenset[str]] = {
    "en": frozenset({"Latin"}),
    "zh": frozenset({"Han"}),
    "ja": frozenset({"Han", "Hiragana", "Katakana"}),
    "ko": frozenset({"Hangul"}),
    "ru": frozenset({"Cyrillic"}),
    "el": frozenset({"Greek"}),
    "ar": frozenset({"Arabic"}),
    "he": frozenset({"Hebrew"}),
    "hi": frozenset({"Devanagari"}),
    "th": frozenset({"Thai"}),
}

_PER_CHARACTER = frozenset({"Han", "Hiragana", "Katakana", "Hangul"})

_NAME_PREFIXES = (
    ("CJK ", "Han"),
    ("KATAKANA-HIRAGANA", "Katakana"),
    ("HALFWIDTH KATAKANA", "Katakana"),
    ("HALFWIDTH HANGUL", "Hangul"),
    ("FULLWIDTH LATIN", "Latin"),
    ("IDEOGRAPHIC", "Han"),
)

_DELIMITER = re.compile(r"\\\$|\$\$|\$|\\\[|\\\]|\\\(|\\\)|\n")
_CLOSER = {"$$": "$$", "$": "$", "\\[": "\\]", "\\(": "\\)"}
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
TEXT_COMMANDS = (
    "text",
    "textbf",
    "textit",
    "textrm",
    "textsf",
    "texttt",
    "textnormal",
    "textup",
    "textsl",
    "emph",
    "mbox",
    "hbox",
    "intertext",
)
_TEXT_ARGUMENT_TOKEN = re.compile(r"\\(?:" + "|".join(TEXT_COMMANDS) + r")\s*\{|\\.|[{}]", re.DOTALL)
_LETTER_RUN = re.compile(r"[^\W\d_]+")
MATH_SCRIPTS = frozenset({"Latin", "Greek"})


@lru_cache(maxsize=65536)
def script_of(char: str) -> str | None:
    """Script of a letter from its Unicode name ("LATIN SMALL LETTER A" → "Latin",
    "CJK UNIFIED IDEOGRAPH-4E2D" → "Han"); None for non-letters and unnamed characters."""
    if not unicodedata.category(char).startswith("L"):
        return None
    name = unicodedata.name(char, "")
    for prefix, script in _NAME_PREFIXES:
        if name.startswith(prefix):
            return script
    first = name.split(" ", 1)[0]
    return first.capitalize() if first else None


def _words_in_run(run: str):
    if run.isascii():
        yield "Latin", run
        return
    start, current = 0, None
    for i, char in enumerate(run):
        script = script_of(char)
        if script in _PER_CHARACTER or script != current:
            if current is not None and current not in _PER_CHARACTER:
                yield current, run[start:i]
            if script in _PER_CHARACTER:
                yield script, char
                current = None
                continue
            start, current = i, script
    if current is not None:
        yield current, run[start:]


def _math_spans(text: str) -> list[tuple[int, int]]:
    r"""Spans ``$$…$$``, ``\[…\]``, ``\(…\)`` and one-line ``$…$`` (``\$`` is not a delimiter),
    matched left to right; an opener without its closer is plain text. The next token of each
    closing kind is found by bisection in the list of its positions (n log n at worst)."""
    tokens = [(m.start(), m.end(), m.group()) for m in _DELIMITER.finditer(text)]
    n = len(tokens)
    at: dict[str, list[int]] = {kind: [] for kind in ("$$", "$", "\\]", "\\)", "\n")}
    for index, (_, _, kind) in enumerate(tokens):
        if kind in at:
            at[kind].append(index)

    def following(kind: str, index: int) -> int:
        place = bisect_right(at[kind], index)
        return at[kind][place] if place < len(at[kind]) else n

    spans, index = [], 0
    while index < n:
        closer = _CLOSER.get(tokens[index][2])
        end = following(closer, index) if closer else n
        if closer == "$" and following("\n", index) < end:
            end = n
        if end < n:
            spans.append((tokens[index][0], tokens[end][1]))
            index = end + 1
        else:
            index += 1
    return spans


def _text_arguments(math: str) -> tuple[list[str], list[str]]:
    r"""The arguments of the outermost text commands (``\text{…}``, ``\textbf{…}``, … see
    ``TEXT_COMMANDS``) in a math span, braces balanced (``\{`` ``\}`` do not count), and the
    pieces of the span outside them; an argument never closed runs to the end of the span. One
    pass over the span."""
    arguments, outside, depth, opened_at, previous = [], [], 0, None, 0
    for token in _TEXT_ARGUMENT_TOKEN.finditer(math):
        kind = token.group()
        if kind == "}":
            depth = max(depth - 1, 0)
            if opened_at is not None and depth == 0:
                arguments.append(math[opened_at : token.start()])
                opened_at, previous = None, token.end()
        elif kind == "{" or kind.endswith("{"):
            if opened_at is None and kind != "{":
                outside.append(math[previous : token.start()])
                opened_at = token.end()
                depth = 0
            depth += 1
    if opened_at is not None:
        arguments.append(math[opened_at:])
    else:
        outside.append(math[previous:])
    return arguments, outside


def _non_math_letters(math: str) -> str:
    """``math`` with its Latin and Greek letters (the letters of math notation) blanked: the
    letters of any other script inside a math span are language (``$中文$`` is Chinese)."""
    return "".join(" " if script_of(char) in MATH_SCRIPTS else char for char in math)


def _language_text(text: str) -> str:
    """The text whose words count: everything outside math spans, plus the arguments of text
    commands inside them (``_text_arguments``) and their letters of scripts other than Latin and
    Greek (``_non_math_letters``), with LaTeX command names blanked."""
    pieces, previous = [], 0
    for start, end in _math_spans(text):
        pieces.append(text[previous:start])
        arguments, outside = _text_arguments(text[start:end])
        pieces.extend(arguments)
        pieces.extend(_non_math_letters(_LATEX_COMMAND.sub(" ", piece)) for piece in outside)
        previous = end
    pieces.append(text[previous:])
    return _LATEX_COMMAND.sub(" ", " ".join(pieces))


_ESCAPE = re.compile(
    r"""\\char\s*(?:"([0-9A-Fa-f]{1,6})|'([0-7]{1,8})|([0-9]{1,7}))"""
    r"""|\\symbol\s*\{\s*(?:"([0-9A-Fa-f]{1,6})|'([0-7]{1,8})|([0-9]{1,7}))\s*\}"""
    r"|\^\^\^\^\^\^([0-9a-f]{6})|\^\^\^\^([0-9a-f]{4})"
    r"|\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})"
)
_ESCAPE_BASES = (16, 8, 10, 16, 8, 10, 16, 16, 16, 16)


def _decoded(match: re.Match[str]) -> str:
    index = match.lastindex or 0
    code = int(match.group(index), _ESCAPE_BASES[index - 1])
    if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        return match.group()
    return chr(code)


def decode_escapes(text: str) -> str:
    r"""``text`` with character escapes written as the characters they stand for: HTML character
    references (``&#20013;``, ``&#x4e2d;``, ``&amp;``, ``html.unescape``), TeX ``\char"4E2D``,
    ``\char'47055``, ``\char20013``, ``\symbol{"4E2D}``, ``^^^^4e2d``, ``^^^^^^01f600``, and ``中``,
    ``😀``. One pass: an escape of an escape stays an escape. Codes that are no character
    (0, surrogates, past U+10FFFF) are left as written.

    >>> decode_escapes(r'&#20013;&#x6587; \char"4E2D ^^^^6587 中 &amp;')
    '中文 中 文 中 &'
    """
    if "&" in text:
        text = html.unescape(text)
    if "\\" in text or "^^^^" in text:
        text = _ESCAPE.sub(_decoded, text)
    return text


def reader_text(text: str) -> str:
    """The text a reader would see: escapes decoded (``decode_escapes``), then the characters that
    draw nothing removed (``rlvr_plugins.text.visible_text``: zero-width and other format characters,
    controls, Hangul fillers), so ``a<U+200B>b`` is one word and an invisible letter is none."""
    return visible_text(decode_escapes(text))


def count_words(text: str) -> Counter[str]:
    r"""Number of words per script in ``text``, as a reader sees it (``reader_text``: escapes such as
    ``&#20013;`` or ``\char"4E2D`` decoded, invisible characters removed).

    - A Han ideograph, a hiragana or katakana letter, a hangul syllable/letter is one word each.
    - Other scripts (Latin, Cyrillic, Greek, Arabic, …): a word is a maximal run of letters of
      one script (so "don't" is two words, "x2y" is two words).
    - Neutral (counted nowhere): digits, punctuation, whitespace, math symbols; LaTeX command
      names (``\frac``, ``\boxed``, …); everything inside math spans ``$…$`` (one line),
      ``$$…$$``, ``\(…\)``, ``\[…\]`` except the arguments of text commands there (``\text{…}``,
      ``\textbf{…}``, ``\mbox{…}``, … see ``TEXT_COMMANDS``), which are language, and letters of
      scripts other than Latin and Greek, which are language wherever they are (``$中文$``,
      ``\mathrm{中文}``, ``\tag{中文}``); Latin letters in ``\mathrm{…}``, ``\operatorname{…}``
      and other math-font arguments stay math; a single Greek letter standing alone (a math
      symbol such as π).
    """
    counts: Counter[str] = Counter()
    for run in _LETTER_RUN.findall(_language_text(reader_text(text))):
        for script, word in _words_in_run(run):
            if script == "Greek" and len(word) == 1:
                continue
            counts[script] += 1
    return counts


def language_consistency(text: str, target: str = "en") -> float:
    """Share of the words of ``text`` (a chain of thought) that are in the ``target`` language:
    words in ``TARGET_SCRIPTS[target]`` / all counted words (see ``count_words``).
    0.0 when the text has no countable word (empty, or only numbers/LaTeX/math)."""
    scripts = TARGET_SCRIPTS.get(target)
    if scripts is None:
        raise ValueError(f"unknown target {target!r}; choose from {sorted(TARGET_SCRIPTS)}")
    counts = count_words(text)
    total = sum(counts.values())
    if total == 0:
        return 0.0
    return sum(counts[script] for script in scripts) / total


def thinking_text(completion: str, *, think_opened: bool = False) -> str:
    """The chain of thought: the thinking part of ``split_completion`` ("" when there is none)."""
    thinking, _ = split_completion(completion, think_opened=think_opened)
    return thinking or ""
