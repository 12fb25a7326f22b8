"""The mode-compliance reward: does the response follow the mode its prompt asked for?"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlvr_plugins.text import visible_text

from .modes import rendered_mode, thinking_mode

_OPEN = re.compile(r"\s*<think>")
_EMPTY_BLOCK = re.compile(r"\s*<think>\s*</think>")


def readable(text: str) -> bool:
    """Whether ``text`` has something a reader would read: a letter or digit among the characters a reader
    sees (:func:`rlvr_plugins.text.visible_text`). Zero-width characters, NUL, whitespace and placeholder
    punctuation (``...``, ``---``) are not.

    >>> readable("let me add"), readable("\u200b\u2060 ..."), readable("---")
    (True, False, False)
    """
    return any(ch.isalnum() for ch in visible_text(text))


def mode_compliance(prompt: Any, completion: str) -> float:
    """1.0 when ``completion`` follows the mode of the rendered ``prompt``, else 0.0.

    The mode comes from the rendered prompt (:func:`rlvr_qwen_thinking.modes.rendered_mode`):
    it ends with the empty think block (non-thinking, block in the prompt), or its last
    flag decides (no flag: thinking).

    * Thinking: the completion opens ``<think>`` (leading whitespace allowed; not needed
      when the prompt itself ends with ``<think>``), and closes it with ``</think>`` after
      :func:`readable` thinking, with no second ``<think>`` inside.
    * Non-thinking, block in the prompt: the completion contains no ``<think>`` or
      ``</think>`` and a :func:`readable` answer.
    * Non-thinking, block not in the prompt: the completion opens with an empty think block
      (``<think>``, whitespace only, ``</think>``), followed by a :func:`readable` answer with no
      think tag.

    >>> mode_compliance("2+2=", "<think>4</think><answer>4</answer>")
    1.0
    >>> mode_compliance("2+2= /no_think", "<think>4</think><answer>4</answer>")
    0.0
    >>> mode_compliance("2+2= /no_think<think>\\n\\n</think>\\n\\n", "<answer>4</answer>")
    1.0
    """
    thinking, block_in_prompt = rendered_mode(prompt)
    text = completion
    if thinking:
        if not (isinstance(prompt, str) and prompt.rstrip().endswith("<think>")):
            opened = _OPEN.match(text)
            if opened is None:
                return 0.0
            text = text[opened.end() :]
        thought, closed, _ = text.partition("</think>")
        return 1.0 if closed and readable(thought) and "<think>" not in thought else 0.0
    if not block_in_prompt:
        block = _EMPTY_BLOCK.match(text)
        if block is None:
            return 0.0
        text = text[block.end() :]
    return 1.0 if readable(text) and "<think>" not in text and "</think>" not in text else 0.0


def turn_compliance(thinking: bool, turn: Mapping[str, Any]) -> bool:
    """Whether one assistant turn of a multi-turn episode, as TRL's response parser returns it, follows the mode.

    Qwen's parser moves a think block's text to ``reasoning_content`` (an empty block leaves none) and keeps
    what follows in ``content`` (and the calls in ``tool_calls``). Thinking: the turn thinks readably
    (:func:`mode_compliance` on the block put back), no think tag left in ``content``. Non-thinking: no
    reasoning, no think tag, and a readable answer or a tool call. An empty think block and none at all
    parse alike, so a non-thinking turn is not required to open with the empty block.

    >>> turn_compliance(True, {"role": "assistant", "reasoning_content": "add", "content": "", "tool_calls": [{}]})
    True
    >>> turn_compliance(False, {"role": "assistant", "reasoning_content": "add", "content": "5"})
    False
    """
    reasoning = str(turn.get("reasoning_content") or "")
    content = str(turn.get("content") or "")
    if thinking:
        text = f"<think>{reasoning}</think>{content}" if reasoning.strip() else content
        return mode_compliance("", text) == 1.0 and "<think>" not in text.partition("</think>")[2]
    no_tags = "<think>" not in content and "</think>" not in content
    return not reasoning.strip() and no_tags and (readable(content) or bool(turn.get("tool_calls")))


def episode_compliance(prompt: Any, completion: Sequence[Mapping[str, Any]]) -> float:
    """1.0 when every assistant turn of a multi-turn episode (TRL's messages) follows the mode of ``prompt``
    (its last flag; no flag means thinking), else 0.0 (also for an episode without an assistant turn)."""
    thinking = thinking_mode(prompt)
    turns = [m for m in completion if isinstance(m, Mapping) and m.get("role") == "assistant"]
    return 1.0 if turns and all(turn_compliance(thinking, t) for t in turns) else 0.0


@dataclass(frozen=True)
class ModeComplianceScorer:
    """The reward function registered as ``qwen-mode-compliance`` (picklable): :func:`mode_compliance` on a
    text completion, :func:`episode_compliance` on an episode of a run with tools (TRL's messages)."""

    def __call__(self, *, prompt, completion, example):
        if isinstance(completion, list):
            return episode_compliance(prompt, completion)
        return mode_compliance(prompt, completion)
