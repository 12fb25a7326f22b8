"""Multi-turn token consistency: does the run's chat template keep every turn a token prefix of the next?

TRL's tool loop (``GRPOTrainer._tool_call_loop``) never re-renders a conversation: the next turn's
input is ``prompt ids + completion ids + tool-result ids``, so the policy's own tokens, its
``<think>`` blocks included, stay as it generated them. The tool-result ids come from
``GRPOTrainer._get_tool_suffix_ids``: the rendering of a dummy ``[user, assistant(tool call)]``
is cut from that of ``[user, assistant(tool call), tool]``, which is only right when the
template renders the first conversation as a prefix of the second. TRL checks that once at
start-up (``is_chat_template_prefix_preserving``, without the run's ``chat_template_kwargs``)
and swaps in its own training template for the templates it knows
(``get_training_chat_template``); a template it does not know, or one that breaks the prefix
only with ``enable_thinking`` on or off, fails at the first tool call of the run.

:func:`check_turns` runs TRL's own check ahead of time (``_get_tool_suffix_ids`` itself, on the
template TRL will use) with the run's ``chat_template_kwargs``: a break is an error. When the
template reads ``enable_thinking`` (Qwen3's), it checks the other thinking mode too (``qwen-thinking``
renders prompts in both): a break there is a warning. It also renders a two-turn conversation
whose first answer thinks: a template that drops the earlier ``<think>`` block when the
conversation goes on (Qwen3's; verl #6854, prime-rl #1334) does not affect TRL's loop, which
appends tokens, but anything that re-renders the history (a ``rollout_func`` that calls
``apply_chat_template`` per turn, a chat server at inference) gives the policy a context it was
not trained on: a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

from transformers import ProcessorMixin
from trl import GRPOTrainer
from trl.chat_template_utils import (
    get_training_chat_template,
    is_chat_template_prefix_preserving,
    supports_tool_calling,
)
from trl.data_utils import is_conversational

from .errors import ConfigError

__all__ = ["TurnReport", "check_turns", "refuse_text_prompts", "turn_report"]

SOURCE = "the tokenizer's chat template"
_TOOL_CALL = [{"type": "function", "function": {"name": "run_tests", "arguments": {}}}]
_TWO_TURNS = [
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "<think>\nTwo and two make four.\n</think>\n\n4"},
]


@dataclass
class TurnReport:
    """What :func:`turn_report` found: ``errors`` (TRL's tool loop would fail) and ``warnings``
    (a re-rendered history differs from the tokens the policy was trained on)."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _modes(tokenizer: Any, kwargs: dict[str, Any]) -> list[tuple[dict[str, Any], bool]]:
    """``(chat_template_kwargs, is the run's own)`` to render with: the run's, then, when the template reads
    ``enable_thinking``, the same with the other thinking mode."""
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else str(tokenizer.chat_template)
    if "enable_thinking" not in template:
        return [(kwargs, True)]
    return [(kwargs, True), ({**kwargs, "enable_thinking": kwargs.get("enable_thinking", True) is False}, False)]


def _label(kwargs: dict[str, Any], thinking: bool) -> str:
    if not thinking:
        return "as rendered"
    return "with thinking off" if kwargs.get("enable_thinking", True) is False else "with thinking on"


def turn_report(tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None) -> TurnReport:
    """Check ``tokenizer``'s chat template for a run with tools or environments (see the module's docstring).

    The template checked is the one TRL's tool loop will use: the tokenizer's own when TRL finds it
    prefix-preserving, else TRL's training template for it (none: an error naming the reason). VLM
    processors are left to TRL's own start-up check.
    """
    report = TurnReport()
    if isinstance(tokenizer, ProcessorMixin):
        return report  # a VLM processor: TRL's start-up check renders it with an image; not repeated here
    if not getattr(tokenizer, "chat_template", None):
        report.errors.append("the tokenizer has no chat template; tools and environments need one")
        return report
    kwargs = dict(chat_template_kwargs or {})
    template = None
    if not supports_tool_calling(tokenizer):
        report.errors.append("the template cannot render a tool call and its result (TRL's supports_tool_calling)")
        return report
    try:
        preserving = is_chat_template_prefix_preserving(tokenizer)
    except Exception as exc:  # a template error: TRL's start-up check would raise it too
        report.errors.append(f"the template fails on a tool-calling conversation: {type(exc).__name__}: {exc}")
        return report
    if not preserving:
        try:
            template = get_training_chat_template(tokenizer)
        except ValueError as exc:
            report.errors.append(
                "the template renders [user, assistant tool call] differently once a tool result follows, so the "
                f"tool result's tokens cannot be cut from it, and TRL has no training version of it ({exc})"
            )
            return report
    trl_view = SimpleNamespace(
        processing_class=tokenizer,
        _tokenizer=tokenizer,
        _is_vlm=False,
        chat_template=template,
        chat_template_kwargs=kwargs,
    )
    thinking = len(_modes(tokenizer, kwargs)) > 1
    for mode, own in _modes(tokenizer, kwargs):
        label = _label(mode, thinking)
        trl_view.chat_template_kwargs = mode
        try:
            # TRL's own method, on the few attributes it reads: the check is exactly the one the tool loop makes
            tool = [{"role": "tool", "name": "run_tests", "content": "passed"}]
            GRPOTrainer._get_tool_suffix_ids(cast(GRPOTrainer, trl_view), tool)
        except Exception as exc:  # what TRL's tool loop would raise at the first tool call
            problem = f"{label}: a tool result's tokens do not follow the assistant's tool call as a prefix ({exc})"
            if own:
                report.errors.append(f"{problem}; TRL's tool loop would fail at the first tool call")
            else:
                report.warnings.append(
                    f"{problem}; this run's chat_template_kwargs render the other mode, but a run in this one "
                    "would fail at its first tool call"
                )
        try:
            first, both = _two_turns(tokenizer, template, mode)
        except Exception as exc:
            report.warnings.append(f"{label}: a two-turn conversation cannot be rendered ({type(exc).__name__}: {exc})")
            continue
        eos = [i for i, t in enumerate(first) if t == tokenizer.eos_token_id]
        first = first[: eos[-1] + 1] if eos else first
        if both[: len(first)] != first:
            at = next((i for i, (a, b) in enumerate(zip(first, both)) if a != b), min(len(first), len(both)))
            report.warnings.append(
                f"{label}: an earlier assistant turn is rendered differently once the conversation goes on "
                f"(token {at}: {tokenizer.decode(first[at : at + 12])!r} becomes "
                f"{tokenizer.decode(both[at : at + 12])!r}; Qwen3's template drops earlier <think> blocks). TRL's "
                "tool loop appends tokens and is not affected, but a rollout or a server that re-renders the "
                "history gives the policy a context it was not trained on"
            )
    return report


def _two_turns(tokenizer: Any, template: str | None, kwargs: dict[str, Any]) -> tuple[list[int], list[int]]:
    """The ids of a conversation whose one answer thinks, and of the same once a second question follows."""
    first = tokenizer.apply_chat_template(_TWO_TURNS, tokenize=True, chat_template=template, **kwargs)
    both = tokenizer.apply_chat_template(
        [*_TWO_TURNS, {"role": "user", "content": "And 3 + 3?"}],
        tokenize=True,
        add_generation_prompt=True,
        chat_template=template,
        **kwargs,
    )
    return _ids(first), _ids(both)


def _ids(rendered: Any) -> list[int]:
    """``apply_chat_template(..., tokenize=True)`` as a list of ids (transformers 5 returns a ``BatchEncoding``)."""
    ids = rendered["input_ids"] if hasattr(rendered, "keys") else rendered
    return list(ids)


def check_turns(tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None) -> list[str]:
    """:func:`turn_report`, with its errors raised as one :class:`ConfigError`; returns the warnings."""
    report = turn_report(tokenizer, chat_template_kwargs)
    if report.errors:
        raise ConfigError(report.errors, source=SOURCE)
    return report.warnings


def refuse_text_prompts(dataset: Any, renderer: str) -> None:
    """Refuse a train dataset whose first prompt is text for a run with tools: TRL's tool loop works on
    conversations (its prompt must be chat messages, which it renders with the tools' schemas), and on a
    text prompt it fails at the first generation. ``renderer``: the plugin that answers ``rlvr_render_prompt``
    (the rows of ``rlvr train`` are its output)."""
    if dataset is None or not hasattr(dataset, "__iter__"):
        return
    row = next(iter(dataset), None)
    if isinstance(row, dict) and "prompt" in row and not is_conversational(row):
        raise ConfigError(
            "the prompts are text, but TRL's tool loop needs chat messages (a list of {role, content}) to render "
            f"the tools and parse their calls; in rlvr train they are rendered by plugin {renderer!r} "
            "(rlvr_render_prompt): give chat rows and a template plugin that keeps them as messages",
            source="the train dataset",
        )
