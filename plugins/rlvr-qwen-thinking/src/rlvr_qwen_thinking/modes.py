"""Thinking and non-thinking modes (Qwen3 technical report, §4.3 thinking-mode fusion).

A prompt asks for a mode with a flag, ``/think`` or ``/no_think``, written in a user turn
or in the system message. The last flag wins; no flag means thinking. A prompt rendered in
non-thinking mode ends with Qwen3's empty think block, so the model answers directly.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

THINK_FLAG = "/think"
NO_THINK_FLAG = "/no_think"
EMPTY_THINK_BLOCK = "<think>\n\n</think>\n\n"
FLAG_ROLES = ("system", "user")

# A flag is a word of its own: not preceded by a word character, "/", "<" or "-", and not
# followed by a word character, "/", ">" or "-" (so "</think>", "/thinking", "a/think" are not flags).
_FLAG = re.compile(r"(?<![\w/<-])/(no_)?think(?![\w/>-])")


def _texts(prompt: str | Sequence[Mapping[str, Any]]) -> list[str]:
    """The texts that can carry a flag, in order: the prompt itself, or each system/user message."""
    if isinstance(prompt, str):
        return [prompt]
    out = []
    for message in prompt:
        if message.get("role") not in FLAG_ROLES:
            continue
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.extend(part.get("text", "") for part in content if isinstance(part, Mapping))
    return out


def explicit_flag(prompt: str | Sequence[Mapping[str, Any]]) -> bool | None:
    """The mode the prompt's flags ask for: True (``/think``), False (``/no_think``), None (no flag).

    Messages are scanned in order (system and user messages only); the last flag wins.

    >>> explicit_flag([{"role": "system", "content": "/no_think"}, {"role": "user", "content": "hi /think"}])
    True
    >>> explicit_flag("a/think /thinking </think>") is None
    True
    """
    last = None
    for text in _texts(prompt):
        for match in _FLAG.finditer(text):
            last = match.group(1) is None
    return last


def thinking_mode(prompt: str | Sequence[Mapping[str, Any]]) -> bool:
    """True unless the last flag of the prompt is ``/no_think`` (no flag means thinking).

    >>> thinking_mode("How many r's in strawberries? /no_think")
    False
    >>> thinking_mode([{"role": "user", "content": "2+2? /no_think"}, {"role": "assistant", "content": "4"},
    ...                {"role": "user", "content": "and 3+3? /think"}])
    True
    """
    return explicit_flag(prompt) is not False


def fused_no_think(seed: int, index: int, share: float) -> bool:
    """Whether row ``index`` (without a flag) is rendered in non-thinking mode, for a given ``share``.

    A pure function of ``(seed, index)``: ``u = sha256("rlvr-qwen-thinking/<seed>/<index>")``
    read as a number in [0, 1) (first 8 bytes, big-endian, / 2**64), and the row is
    non-thinking iff ``u < share``. So the decision does not depend on the order rows are
    rendered in, and the rows chosen at a share are among those chosen at any larger share.
    """
    if share <= 0.0:
        return False
    if share >= 1.0:
        return True
    digest = hashlib.sha256(f"rlvr-qwen-thinking/{seed}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def with_no_think_flag(prompt: str | Sequence[Mapping[str, Any]]) -> str | list[dict]:
    """The prompt with `` /no_think`` appended to its text (or to its last user message).

    Without a user message the flag goes to the last system message. The input is not modified.
    """
    if isinstance(prompt, str):
        return f"{prompt} {NO_THINK_FLAG}"
    messages = [dict(m) for m in prompt]
    for role in FLAG_ROLES[::-1]:
        for message in reversed(messages):
            if message.get("role") != role:
                continue
            content = message.get("content")
            if isinstance(content, list):
                message["content"] = [*content, {"type": "text", "text": NO_THINK_FLAG}]
            else:
                message["content"] = f"{content or ''} {NO_THINK_FLAG}".lstrip()
            return messages
    raise ValueError(f"cannot add {NO_THINK_FLAG}: the prompt has no user or system message: {prompt!r}")


def flagged_messages(prompt: str | Sequence[Mapping[str, Any]], no_think: bool) -> list[dict]:
    """The prompt as chat messages for a multi-turn run (TRL's tool loop renders them, in one mode for every
    row), its mode carried by Qwen3's soft switch: `` /no_think`` appended to the last user message when
    ``no_think`` (:func:`with_no_think_flag`); otherwise as written (its own flag, or none: thinking).

    >>> flagged_messages("2+2?", no_think=True)
    [{'role': 'user', 'content': '2+2? /no_think'}]
    >>> flagged_messages([{"role": "user", "content": "2+2? /think"}], no_think=False)
    [{'role': 'user', 'content': '2+2? /think'}]
    """
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
    return with_no_think_flag(messages) if no_think else messages  # type: ignore[return-value]


def template_understands_thinking(tokenizer: Any) -> bool:
    """True when the tokenizer's chat template reads ``enable_thinking`` (Qwen3's does)."""
    return "enable_thinking" in str(getattr(tokenizer, "chat_template", None) or "")


def render_prompt(prompt: str | Sequence[Mapping[str, Any]], tokenizer: Any, thinking: bool) -> str:
    """The prompt text the policy sees, in the given mode.

    * Tokenizer with a chat template: a string prompt becomes one user message; the
      messages are rendered with ``apply_chat_template(..., tokenize=False,
      add_generation_prompt=True)``, passing ``enable_thinking=thinking`` when the template
      mentions ``enable_thinking``; otherwise :data:`EMPTY_THINK_BLOCK` is appended to the
      rendered text in non-thinking mode.
    * No chat template (plain text): the prompt text, followed by :data:`EMPTY_THINK_BLOCK`
      in non-thinking mode. Chat messages without a chat template are an error.

    >>> render_prompt("2+2= /no_think", None, thinking=False)
    '2+2= /no_think<think>\\n\\n</think>\\n\\n'
    """
    if not getattr(tokenizer, "chat_template", None):
        if not isinstance(prompt, str):
            raise ValueError(
                "qwen-thinking: the prompt is a list of chat messages but the tokenizer has no chat "
                "template; give plain-text prompts or a tokenizer with a chat template"
            )
        return prompt if thinking else prompt + EMPTY_THINK_BLOCK
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
    if template_understands_thinking(tokenizer):
        return tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, enable_thinking=thinking
        )
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return text if thinking else text + EMPTY_THINK_BLOCK


def rendered_mode(prompt: str | Sequence[Mapping[str, Any]]) -> tuple[bool, bool]:
    """``(thinking, block_in_prompt)`` of a prompt rendered by :func:`render_prompt`.

    A prompt text that ends with :data:`EMPTY_THINK_BLOCK` is non-thinking with the block
    already in the prompt; otherwise the mode is :func:`thinking_mode` of the text (its last
    flag) and the block, if any, is the model's to write.
    """
    if isinstance(prompt, str) and prompt.endswith(EMPTY_THINK_BLOCK):
        return False, True
    return thinking_mode(prompt), False
