"""The format reward of DeepSeek-R1.

DeepSeek-R1 (2025, section 2.2.2): "Format rewards: ... enforces the model to put its thinking
process between '<think>' and '</think>' tags." The R1-Zero template asks for
``<think> reasoning process here </think> <answer> answer here </answer>``.

A completion scores 1.0 only if it is exactly that shape (see ``format_score``); the check is
one linear scan for tags, with no backtracking regex.
"""

from __future__ import annotations

import re
from itertools import islice

from rlvr_plugins.text import visible_text

__all__ = ["format_score", "has_extractable_answer"]

_TAG = re.compile(r"</?(?:think|answer)>", re.IGNORECASE)
_EXPECTED = ("<think>", "</think>", "<answer>", "</answer>")
_WRAPPER = re.compile(
    r"\\(?:boxed|fbox|textbf|text|mathrm|mathbf|displaystyle|left|right|qquad|quad)(?![A-Za-z])"
    r"|\\[,;:! ]"
)


def has_extractable_answer(content: str) -> bool:
    r"""Whether an answer block holds something: at least one letter or digit a reader can see
    (``rlvr_plugins.text.visible_text``) once wrapper commands (``\boxed``, ``\fbox``, ``\text``,
    ``\mathrm``, ``\textbf``, ``\mathbf``, ``\displaystyle``, ``\left``, ``\right``, ``\quad``,
    ``\qquad``, spacing) are removed. So ``\pi`` or ``x`` count; ``\boxed{}``, ``$ $``, ``...``,
    a Hangul filler U+3164 do not."""
    return any(ch.isalnum() for ch in _WRAPPER.sub("", visible_text(content)))


def _blank(text: str) -> bool:
    return text == "" or text.isspace()


def _empty(text: str) -> bool:
    """Nothing a reader would read: no letter or digit among the characters a reader sees (``visible_text``)."""
    return not any(ch.isalnum() for ch in visible_text(text))


def format_score(completion: str, *, think_opened: bool = False) -> float:
    """1.0 if the completion is exactly ``<think> R </think> <answer> A </answer>``, else 0.0.

    - Whitespace is allowed before, between and after the blocks; any other text outside the
      blocks (before ``<think>``, between them, after ``</answer>``) scores 0.
    - The tags ``<think>``, ``</think>``, ``<answer>``, ``</answer>`` must each appear exactly
      once, lower-case, in that order; any other occurrence of them in any letter case
      (duplicated, nested, reordered, ``<THINK>``) scores 0.
    - With ``think_opened`` (the prompt template already opened ``<think>``) the completion
      starts inside the thinking: the leading ``<think>`` must be absent.
    - R must hold something a reader would read: at least one letter or digit among the characters
      a reader sees (``rlvr_plugins.text.visible_text`` removes zero-width and other format
      characters, NUL and other controls, Hangul fillers, the Braille blank), so a thinking of
      only ``\u200b``, NUL, whitespace or punctuation (``...``, ``---``) is empty; A must pass
      ``has_extractable_answer``.
    """
    expected = _EXPECTED[1:] if think_opened else _EXPECTED
    tags = list(islice(_TAG.finditer(completion), len(expected) + 1))
    if [tag.group() for tag in tags] != list(expected):
        return 0.0
    if think_opened:
        think_close, answer_open, answer_close = tags
        think = completion[: think_close.start()]
    else:
        think_open, think_close, answer_open, answer_close = tags
        if not _blank(completion[: think_open.start()]):
            return 0.0
        think = completion[think_open.end() : think_close.start()]
    between = completion[think_close.end() : answer_open.start()]
    answer = completion[answer_open.end() : answer_close.start()]
    tail = completion[answer_close.end() :]
    ok = not _empty(think) and _blank(between) and _blank(tail) and has_extractable_answer(answer)
    return float(ok)
