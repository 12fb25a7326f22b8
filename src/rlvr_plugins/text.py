r"""Reading completions and messages: one function per job, shared by rewards, evaluation and plugins.

The final answer of a completion is read from its answer part (:func:`answer_part`): exactly one
``<answer>…</answer>`` block (:func:`answer_block`), else the last ``\boxed{…}``
(:func:`last_boxed`), else the number after the last ``####`` (:func:`gsm8k_final`).
:func:`final_answer` composes them; rlvr-r1's accuracy reward and ``lab.metrics`` (maj@k) both
read answers this way.
"""

from __future__ import annotations

import collections
import re
import sys
import unicodedata
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

__all__ = [
    "BOXED",
    "split_think",
    "answer_part",
    "answer_block",
    "last_boxed",
    "matching_brace",
    "gsm8k_final",
    "final_answer",
    "message_text",
    "BLANK_LETTERS",
    "visible_text",
]

_THINK_OPEN = re.compile(re.escape("<think>"), re.IGNORECASE)
_THINK_CLOSE = re.compile(re.escape("</think>"), re.IGNORECASE)
_ANSWER_OPEN = re.compile(re.escape("<answer>"), re.IGNORECASE)
_ANSWER_CLOSE = re.compile(re.escape("</answer>"), re.IGNORECASE)
BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
"""The opening of a ``\\boxed{`` or ``\\fbox{`` (the brace included)."""
_BRACE_TOKEN = re.compile(r"\\.|[{}]", re.DOTALL)
_GSM8K_NUMBER = re.compile(r"\s*(?:\\\$?\s*|\$\s*)?(-?\d[\d,]*(?:\.\d+)?|-?\.\d+)")


def _last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    found = collections.deque(pattern.finditer(text), maxlen=1)
    return found[0] if found else None


def split_think(completion: str, *, think_opened: bool = False) -> tuple[str | None, str]:
    """Split a completion into (thinking part, answer part).

    Tags are matched case-insensitively. The thinking part ends at the LAST ``</think>``; it starts
    after the first ``<think>`` if that comes before, else at the start of the completion (the
    ``think_opened`` template, or a stray closer). Without any ``</think>``: if thinking was opened
    (``think_opened`` or a ``<think>`` tag) the whole remainder is unfinished thinking and the
    answer part is ``""``; otherwise there is no thinking (``None``) and the whole completion is
    the answer part. A ``<think>`` re-opened after the last ``</think>`` ends the answer part.

    >>> split_think("<think>a</think>b<think>c"), split_think("a</think>b"), split_think("<think>a")
    (('a', 'b'), ('a', 'b'), ('a', ''))
    """
    close = _last_match(_THINK_CLOSE, completion)
    opener = None if think_opened else _THINK_OPEN.search(completion)
    if close is None:
        if think_opened:
            return completion, ""
        if opener is None:
            return None, completion
        return completion[opener.end() :], ""
    start = opener.end() if opener is not None and opener.start() < close.start() else 0
    rest = completion[close.end() :]
    reopened = _THINK_OPEN.search(rest)
    if reopened is not None:
        rest = rest[: reopened.start()]
    return completion[start : close.start()], rest


def answer_part(completion: str, *, think_opened: bool = False) -> str:
    """The part of a completion after its thinking: the second half of :func:`split_think`.

    >>> answer_part("<think>x</think> 42"), answer_part("no tags"), answer_part("<think>unfinished")
    (' 42', 'no tags', '')
    """
    return split_think(completion, think_opened=think_opened)[1]


def answer_block(text: str) -> tuple[bool, str | None]:
    """(whether an ``<answer>…</answer>`` block decides the answer, its stripped content or None).

    A complete block decides. Its content is None when it is empty or when ``text`` has a second
    ``<answer>`` or ``</answer>`` (the answer is ambiguous).

    >>> answer_block("<answer> 5 </answer>"), answer_block("<answer>5</answer><answer>6</answer>"), answer_block("5")
    ((True, '5'), (True, None), (False, None))
    """
    opener = _ANSWER_OPEN.search(text)
    if opener is None:
        return False, None
    close = _ANSWER_CLOSE.search(text, opener.end())
    if close is None:
        return False, None
    if _ANSWER_OPEN.search(text, opener.end()) or _ANSWER_CLOSE.search(text, close.end()):
        return True, None
    return True, text[opener.end() : close.start()].strip() or None


def matching_brace(text: str, open_pos: int) -> int | None:
    r"""Index of the ``}`` that closes the ``{`` at ``open_pos`` (``\{ \}`` escapes ignored); None if unclosed."""
    if text.find("}", open_pos) < 0:  # no closer at all: answered without visiting every opener
        return None
    depth = 0
    for token in _BRACE_TOKEN.finditer(text, open_pos):
        if token.group() == "{":
            depth += 1
        elif token.group() == "}":
            depth -= 1
            if depth == 0:
                return token.start()
    return None


def last_boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{…}`` / ``\fbox{…}`` in ``text`` (balanced braces, ``\{ \}``
    escapes ignored, not stripped), or None when there is none or the last one is never closed.

    >>> last_boxed(r"so $x=\boxed{\frac{1}{2}}$ cm"), last_boxed(r"\boxed{1} \boxed{2"), last_boxed("x")
    ('\\frac{1}{2}', None, None)
    """
    box = _last_match(BOXED, text)
    if box is None:
        return None
    close = matching_brace(text, box.end() - 1)
    if close is None:
        return None
    return text[box.end() : close]


def gsm8k_final(text: str) -> str | None:
    r"""The number right after the LAST ``####`` (an optional ``$`` or ``\$`` before it), thousands
    commas removed; None when there is no ``####`` or no number follows the last one.

    >>> gsm8k_final("2 + 2 = 4\n#### 1,004"), gsm8k_final("#### $-.5"), gsm8k_final("#### 4\n#### none")
    ('1004', '-.5', None)
    """
    at = text.rfind("####")
    if at < 0:
        return None
    number = _GSM8K_NUMBER.match(text, at + 4)
    return number.group(1).replace(",", "") if number else None


def final_answer(completion: str, *, think_opened: bool = False, gsm8k: bool = True) -> str | None:
    r"""The final answer of a completion, read only from its :func:`answer_part`:

    1. a complete ``<answer>…</answer>`` block decides (:func:`answer_block`; None when it is
       empty or there are several);
    2. else the stripped content of the last ``\boxed{…}`` (None when empty);
    3. else, with ``gsm8k``, :func:`gsm8k_final`; else None.

    >>> final_answer(r"<think>\boxed{3}</think> so $\boxed{\frac{1}{2}}$."), final_answer("#### 7")
    ('\\frac{1}{2}', '7')
    """
    rest = answer_part(completion, think_opened=think_opened)
    decided, block = answer_block(rest)
    if decided:
        return block
    boxed = last_boxed(rest)
    if boxed is not None:
        return boxed.strip() or None
    return gsm8k_final(rest) if gsm8k else None


def message_text(messages: Any, *, roles: Iterable[str] | None = None, sep: str = "\n") -> str:
    """The text of a prompt or completion: a string as it is; a list of chat messages as the
    contents of the messages whose role is in ``roles`` (all when None) joined by ``sep``; a
    message without content counts as ``""``, and an item that is not a message as its ``str``;
    None as ``""``; anything else as its ``str``.

    >>> chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    >>> message_text(chat), message_text(chat, roles=("user",)), message_text("2+2?")
    ('Be brief.\\n2+2?', '2+2?', '2+2?')
    """
    if isinstance(messages, str):
        return messages
    if messages is None:
        return ""
    if not isinstance(messages, (list, tuple)):
        return str(messages)
    wanted = None if roles is None else frozenset(roles)
    parts = []
    for m in messages:
        if not isinstance(m, Mapping):
            if wanted is None:
                parts.append(str(m))
        elif wanted is None or m.get("role") in wanted:
            parts.append(str(m.get("content") or ""))
    return sep.join(parts)


BLANK_LETTERS = "\u115f\u1160\u3164\uffa0\u2800"
"""Characters of visible categories that draw nothing: the Hangul fillers U+115F, U+1160, U+3164,
U+FFA0 (letters) and the Braille blank U+2800 (a symbol)."""
_ASCII_INVISIBLE = re.compile(r"[\x00-\x08\x0e-\x1b\x7f]")


@lru_cache(maxsize=1)
def _invisible() -> re.Pattern[str]:
    """One character class of every invisible character (built once per process, about 0.3 s)."""
    codes = sorted(
        {c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) in ("Cf", "Cc") and not chr(c).isspace()}
        | {ord(c) for c in BLANK_LETTERS}
    )
    ranges: list[list[int]] = []
    for code in codes:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges) + "]")


def visible_text(text: str) -> str:
    r"""``text`` as a reader sees it: without the characters that draw nothing and take no space.

    Removed: format characters (Unicode category Cf: zero-width space U+200B, zero-width
    (non-)joiners, word joiner U+2060, byte-order mark, soft hyphen, bidirectional controls, tag
    characters), control characters that are not whitespace (category Cc: NUL, ESC, DEL, ...) and
    :data:`BLANK_LETTERS`. Whitespace (``str.isspace``: spaces of every width, newlines) is kept, so
    "empty" is ``not visible_text(t).strip()`` and words are not joined across a space.

    >>> visible_text("a\u200bb\x00c\u3164 d"), visible_text("\u2060\ufeff\u00ad").strip() == ""
    ('abc d', True)
    """
    if text.isascii():
        return _ASCII_INVISIBLE.sub("", text)
    return _invisible().sub("", text)
