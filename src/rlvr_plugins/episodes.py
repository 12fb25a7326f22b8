"""Multi-turn episodes on TRL's tool loop: a call TRL cannot parse, a tool's answer, what the episodes are made of.

TRL's ``parse_response`` falls back to plain text when a completion holds a tool call it cannot
parse, which silently ends the episode. :func:`unparsable_call` turns such a completion into a
call of the reserved tool :data:`UNPARSABLE_TOOL`, whose answer (:func:`refuse_unparsable`) is an
error message: the policy reads it as the tool's turn and may try again, and TRL counts it as a
failed call. :func:`bounded_tool` gives every call a deadline and keeps one tool answer from filling
the episode's budget (:func:`bounded_answer`).
:func:`episode_stats` and :func:`reward_by_turns` give the logged numbers.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

UNPARSABLE_TOOL = "unparsable_tool_call"
MAX_RESULT_CHARS = 2000
"""Default cut of one tool answer (``Environment.max_result_chars``), also for tools not from a plugin."""
TOOL_TIMEOUT_S = 60.0
"""Default deadline of one tool call (``Environment.tool_timeout_s``), also for tools not from a plugin."""
MAX_HUNG_CALLS = 8
"""How many tool calls that ran past their deadline may still be running (in threads nobody waits for) before
further calls are answered with a timeout at once instead of being started."""
TRL_ERROR_PREFIX = "{'error': "
"""How TRL's tool loop writes a tool that raised (``str({"error": message})``) into the tool's turn."""
TIMEOUT_PREFIX = TRL_ERROR_PREFIX + "'timeout: "
"""How a tool turn begins when the call got no answer in time (:func:`bounded_tool`)."""


def tool_call_marker(tokenizer: Any) -> str | None:
    """The added token that opens a tool call in ``tokenizer``'s chat template (``<tool_call>`` for the
    Qwen family), or None when the template marks tool calls with no token of their own (then no call is
    reported as unparsable).

    Found by rendering an assistant turn with a tool call and one without: the first added token that
    only the former holds.
    """
    user = {"role": "user", "content": "x"}
    call = {"type": "function", "function": {"name": "probe_tool", "arguments": {"a": 1}}}
    try:
        with_call = tokenizer.apply_chat_template(
            [user, {"role": "assistant", "content": "", "tool_calls": [call]}], tokenize=False
        )
        plain = tokenizer.apply_chat_template([user, {"role": "assistant", "content": ""}], tokenize=False)
    except Exception:  # noqa: BLE001 - a template that cannot render a call has no marker
        return None
    found = [(with_call.find(t), t) for t in tokenizer.get_added_vocab() if t in with_call and t not in plain]
    return min(found)[1] if found else None


def unparsable_call(parsed: Mapping[str, Any], marker: str | None) -> dict[str, Any] | None:
    """The assistant message to use instead of ``parsed`` (what TRL's ``parse_response`` returned) when it
    holds a tool call that could not be parsed: the text stays, with one call of :data:`UNPARSABLE_TOOL`
    that carries the unparsed call. None when ``parsed`` is fine (it has tool calls, or no marker).

    >>> unparsable_call({"role": "assistant", "content": 'ok <tool_call>{"name": 1'}, "<tool_call>")["tool_calls"]
    [{'type': 'function', 'function': {'name': 'unparsable_tool_call', 'arguments': {'text': '{"name": 1'}}}]
    >>> unparsable_call({"role": "assistant", "content": "42"}, "<tool_call>") is None
    True
    """
    content = parsed.get("content")
    if marker is None or parsed.get("tool_calls") or not isinstance(content, str) or marker not in content:
        return None
    text = content.split(marker, 1)[1].strip()[:200]
    call = {"type": "function", "function": {"name": UNPARSABLE_TOOL, "arguments": {"text": text}}}
    return {**parsed, "tool_calls": [call]}


def refuse_unparsable(text: str = "") -> str:
    """The answer to a call that could not be parsed (the reserved tool :data:`UNPARSABLE_TOOL`): always raises,
    so that TRL writes the message into the tool's turn and counts a failed call."""
    raise ValueError(f'unparsable tool call; write {{"name": ..., "arguments": {{...}}}}: {text[:40]!r}')


def bounded_answer(answer: Any, max_chars: int) -> Any:
    """A tool's answer as the text TRL writes into the tool's turn, at most ``max_chars`` characters (the rest
    replaced by a note of how many were left out); bytes decoded as UTF-8 (``ValueError`` when they are not),
    lone surrogates replaced, anything else written with ``str``. A list of content blocks (TRL's multimodal
    answer: mappings with a ``type``) is passed on as it is; any other list is written as text.

    >>> bounded_answer("x" * 12, 5), bounded_answer(b"ok", 5), bounded_answer(42, 5)
    ('xxxxx\\n... (7 more characters)', 'ok', '42')
    >>> bounded_answer([1, 2], 9), bounded_answer(None, 9)
    ('[1, 2]', 'None')
    >>> bounded_answer(b"\\xff", 5)
    Traceback (most recent call last):
    ValueError: the tool's answer is not valid UTF-8 (byte 0 of 1)
    """
    if isinstance(answer, list) and all(isinstance(part, Mapping) and "type" in part for part in answer):
        return answer
    if isinstance(answer, (bytes, bytearray)):
        try:
            answer = bytes(answer).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"the tool's answer is not valid UTF-8 (byte {exc.start} of {len(answer)})") from None
    text = str(answer).encode("utf-8", "replace").decode("utf-8")
    if len(text) > max_chars:
        text = f"{text[:max_chars]}\n... ({len(text) - max_chars} more characters)"
    return text


class ToolTimeout(Exception):
    """A tool call that got no answer within its deadline (its message becomes the tool's turn)."""


_hung: set[threading.Thread] = set()
_hung_lock = threading.Lock()


def hung_calls() -> int:
    """How many tool calls that ran past their deadline are still running."""
    with _hung_lock:
        _hung.difference_update([t for t in _hung if not t.is_alive()])
        return len(_hung)


def call_with_deadline(tool: Callable[..., Any], arguments: Mapping[str, Any], timeout_s: float, name: str) -> Any:
    """``tool(**arguments)``, run in a daemon thread and waited for at most ``timeout_s`` seconds.

    A thread cannot be killed: a call past its deadline raises :class:`ToolTimeout` here and its thread
    runs on, unwaited, until the tool returns (its answer is dropped; a daemon thread does not hold the
    process at exit). At most :data:`MAX_HUNG_CALLS` such threads are let run at once: while that many are
    still running, a call raises :class:`ToolTimeout` without being started.
    """
    if hung_calls() >= MAX_HUNG_CALLS:
        raise ToolTimeout(
            f"timeout: {name} was not called: {MAX_HUNG_CALLS} earlier tool calls ran past their deadline and "
            "are still running"
        )
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["answer"] = tool(**arguments)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
            outcome["error"] = exc

    thread = threading.Thread(target=run, name=f"rlvr-tool-{name}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        with _hung_lock:
            _hung.add(thread)
        raise ToolTimeout(f"timeout: {name} did not answer within {timeout_s:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("answer")


def bounded_tool(tool: Callable[..., Any], max_chars: int, timeout_s: float = TOOL_TIMEOUT_S) -> Callable[..., Any]:
    """``tool`` whose calls have a deadline of ``timeout_s`` seconds (:func:`call_with_deadline`; an ``async``
    tool is cancelled at its deadline with ``asyncio.wait_for``) and whose answers go through
    :func:`bounded_answer`. Sync tools stay sync, async ones async, as TRL sorts them."""
    name = getattr(tool, "__name__", "tool")
    if inspect.iscoroutinefunction(tool):

        @functools.wraps(tool)
        async def bounded_async(**arguments: Any) -> Any:
            try:
                answer = await asyncio.wait_for(tool(**arguments), timeout_s)
            except asyncio.TimeoutError:
                raise ToolTimeout(f"timeout: {name} did not answer within {timeout_s:g} s") from None
            return bounded_answer(answer, max_chars)

        return bounded_async

    @functools.wraps(tool)
    def bounded(**arguments: Any) -> Any:
        return bounded_answer(call_with_deadline(tool, arguments, timeout_s, name), max_chars)

    return bounded


@dataclass
class EpisodeStats:
    """What one generation batch's episodes are made of (this process's completions)."""

    turns: list[int] = field(default_factory=list)
    policy_tokens: list[int] = field(default_factory=list)
    tool_tokens: list[int] = field(default_factory=list)
    calls: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    timeouts: Counter = field(default_factory=Counter)


def episode_stats(completions: Sequence[Any], tool_mask: Sequence[Sequence[int]] | None) -> EpisodeStats:
    """Per episode: its assistant turns, the tokens the policy wrote (tool mask 1) and those the tools did
    (mask 0); over the batch: the calls, the failed calls (a tool turn that TRL wrote as an error,
    :data:`TRL_ERROR_PREFIX`) and among them those past their deadline (:data:`TIMEOUT_PREFIX`) of each tool.

    >>> done = [{"role": "assistant", "content": "", "tool_calls": [{}]},
    ...         {"role": "tool", "name": "calculate", "content": "5"},
    ...         {"role": "assistant", "content": "5"}]
    >>> s = episode_stats([done, [{"role": "assistant", "content": "7"}]], [[1, 1, 0, 0, 0, 1], [1]])
    >>> s.turns, s.policy_tokens, s.tool_tokens, dict(s.calls), dict(s.errors)
    ([2, 1], [3, 1], [3, 0], {'calculate': 1}, {})
    """
    stats = EpisodeStats()
    for i, completion in enumerate(completions):
        messages = completion if isinstance(completion, list) else [{"role": "assistant", "content": completion}]
        stats.turns.append(sum(m.get("role") == "assistant" for m in messages))
        for m in messages:
            if m.get("role") == "tool":
                name = str(m.get("name", "unknown"))
                stats.calls[name] += 1
                content = str(m.get("content", ""))
                if content.startswith(TRL_ERROR_PREFIX):
                    stats.errors[name] += 1
                if content.startswith(TIMEOUT_PREFIX):
                    stats.timeouts[name] += 1
        mask = tool_mask[i] if tool_mask is not None else None
        policy = sum(mask) if mask is not None else 0
        stats.policy_tokens.append(policy)
        stats.tool_tokens.append(len(mask) - policy if mask is not None else 0)
    return stats


def reward_by_turns(turns: Sequence[int], rewards: Sequence[float]) -> dict[int, float]:
    """The mean reward of the episodes with each number of assistant turns (NaN rewards left out).

    >>> reward_by_turns([1, 2, 2, 1], [0.0, 1.0, 0.5, float("nan")])
    {1: 0.0, 2: 0.75}
    """
    sums: dict[int, list[float]] = {}
    for n, reward in zip(turns, rewards, strict=True):
        if reward == reward:
            sums.setdefault(int(n), []).append(float(reward))
    return {n: sum(values) / len(values) for n, values in sorted(sums.items())}
