"""The agentic CPU demo: arithmetic too long to do in the head, and a calculator the policy may call.

A problem is ``"<a>*<b>="`` (or ``+``) as one user message; the reference is the exact result.
The policy answers either in its head, ``<answer>N</answer>``, or through the calculator, over
two assistant turns with the tool's result between them (TRL's tool loop runs the call)::

    <bos>37*482=<|assistant|><tool_call>calculate:expression=37*482</tool_call><eos>
    <tool_response>17834</tool_response><|assistant|><answer>17834</answer><eos>

The cold-start teacher (the ``completion`` column, a list of chat messages) calls the calculator on
a share ``tool_rate`` of the problems only; on the rest it answers in its head and slips (one digit
of the result wrong) on a share ``slip`` of them. A tiny model cannot multiply multi-digit numbers
in its head, so the verifiable reward (``r1-accuracy`` on the final answer) prefers the calculator.

The chat template (:data:`CHAT_TEMPLATE`) writes a tool call as ``<tool_call>NAME:KEY=VALUE,...
</tool_call>`` (a compact form of Qwen3's JSON call; values may not hold ``,``), a tool result in a
``tool`` turn as ``<tool_response>…</tool_response>``, and marks each assistant turn with
``{% generation %}`` so that TRL's ``assistant_only_loss`` leaves the prompt and the tool results
out of the SFT loss. :data:`RESPONSE_TEMPLATE` is the transformers response template that parses
the call back (``tokenizer.parse_response``, what TRL's tool loop uses). Every turn is a token
prefix of the next (TRL's ``is_chat_template_prefix_preserving`` holds).

The calculator is the built-in ``calculator`` environment (``rlvr_plugins.builtin.calculator``; this
module imports nothing of the package): its tool ``calculate`` takes one ``expression`` argument (the
tokenizer spells both names as one token each, :data:`TOOL_WORDS`; other names are spelled out character
by character, which still works, only longer).
"""

from __future__ import annotations

import operator
import random
from collections.abc import Sequence
from typing import Any

from transformers import PreTrainedTokenizerFast

from .task import checked_options, distinct_draws, draw_operands
from .tokenizer import MARKER_TOKENS, build_char_tokenizer

ASSISTANT = "<|assistant|>"
TOOL_MARKERS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", ASSISTANT)
TOOL_NAME, TOOL_ARGUMENT = "calculate", "expression"  # the built-in calculator's tool
TOOL_WORDS = (TOOL_NAME, TOOL_ARGUMENT)

CHAT_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- for message in messages -%}"
    "{%- if message.role == 'user' or message.role == 'system' -%}{{ message.content }}"
    "{%- elif message.role == 'assistant' -%}" + ASSISTANT + "{%- generation -%}{{ message.content or '' }}"
    "{%- for call in message.tool_calls or [] -%}"
    "{%- set f = call.function if call.function is defined else call -%}"
    "<tool_call>{{ f.name }}:"
    "{%- if f.arguments is mapping -%}"
    "{%- for key, value in f.arguments.items() -%}{{ key }}={{ value }}{{ ',' if not loop.last }}{%- endfor -%}"
    "{%- else -%}{{ f.arguments }}{%- endif -%}"
    "</tool_call>"
    "{%- endfor -%}"
    "{{ eos_token }}{%- endgeneration -%}"
    "{%- elif message.role == 'tool' -%}<tool_response>{{ message.content }}</tool_response>"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}" + ASSISTANT + "{%- endif -%}"
)

RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": ASSISTANT,
    "fields": {
        "tool_calls": {
            "open_pattern": r"<tool_call>(?P<name>[A-Za-z_][A-Za-z0-9_]*):",
            "close": "</tool_call>",
            "repeats": True,
            "content": "xml-inline",
            "content_args": {"tag_pattern": r"(?P<key>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>[^,]*)"},
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "content": {"close": "<eos>", "content": "text"},
    },
}

OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul}

DEFAULT_AGENT_TASK: dict[str, Any] = {
    "min_digits": 1,
    "max_digits": 3,
    "ops": "*",
    "tool_rate": 0.3,
    "slip": 0.3,
}


def build_agent_tokenizer(words: Sequence[str] = TOOL_WORDS) -> PreTrainedTokenizerFast:
    """The demo's character tokenizer with the tool markers and ``words`` as single tokens, the
    agentic :data:`CHAT_TEMPLATE` and :data:`RESPONSE_TEMPLATE` set."""
    tokenizer = build_char_tokenizer(markers=(*MARKER_TOKENS, *TOOL_MARKERS, *words))
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.response_template = RESPONSE_TEMPLATE
    return tokenizer


def tool_call(expression: str) -> dict[str, Any]:
    """One calculator call in the chat-message form TRL and the chat template use."""
    return {"type": "function", "function": {"name": TOOL_NAME, "arguments": {TOOL_ARGUMENT: expression}}}


def slipped(result: int, rng: random.Random) -> int:
    """``result`` with one of its digits (drawn by ``rng``) replaced by another digit, never a leading zero.

    >>> slipped(7, random.Random(0)) != 7
    True
    """
    digits = list(str(result))
    i = rng.randrange(len(digits))
    choices = [d for d in "0123456789" if d != digits[i] and not (i == 0 and d == "0" and len(digits) > 1)]
    digits[i] = rng.choice(choices)
    return int("".join(digits))


def agent_problem(a: int, op: str, b: int, *, use_tool: bool, slip: bool, rng: random.Random) -> dict[str, Any]:
    """One row: ``prompt`` (a user message), ``answer`` (the exact result), ``completion`` (the
    teacher's messages: a calculator episode when ``use_tool``, else an answer in its head, a wrong
    digit in it when ``slip``), ``difficulty`` (digits of the longer operand) and ``teacher_tool``."""
    expression = f"{a}{op}{b}"
    result = OPERATORS[op](a, b)
    if use_tool:
        completion = [
            {"role": "assistant", "content": "", "tool_calls": [tool_call(expression)]},
            {"role": "tool", "name": TOOL_NAME, "content": str(result)},
            {"role": "assistant", "content": f"<answer>{result}</answer>"},
        ]
    else:
        said = slipped(result, rng) if slip else result
        completion = [{"role": "assistant", "content": f"<answer>{said}</answer>"}]
    return {
        "prompt": [{"role": "user", "content": f"{expression}="}],
        "answer": str(result),
        "completion": completion,
        "difficulty": max(len(str(a)), len(str(b))),
        "teacher_tool": use_tool,
    }


def agent_problems(
    n: int, seed: int, *, stream: str = "train", exclude: Sequence[str] = (), unique: bool = False, **options: Any
) -> list[dict[str, Any]]:
    """``n`` rows of :func:`agent_problem`, deterministic in ``seed`` and ``stream``.

    ``options`` (:data:`DEFAULT_AGENT_TASK`): ``min_digits``/``max_digits`` (the longer operand's
    digits, uniform), ``ops`` (the operators drawn from, e.g. ``"*"`` or ``"+*"``), ``tool_rate``
    (share of teacher solutions that call the calculator), ``slip`` (share of in-head teacher
    answers with a wrong digit). Which rows call the tool or slip comes from a stream of its own,
    so the problems do not depend on ``tool_rate`` or ``slip``. ``exclude``: user contents never
    returned; ``unique``: no problem twice.
    """
    opts, levels = checked_options(DEFAULT_AGENT_TASK, options, "agent task")
    ops = str(opts["ops"])
    if not ops or set(ops) - set("+-*"):
        raise ValueError(f"ops must be made of '+', '-' and '*', got {ops!r}")
    for name in ("tool_rate", "slip"):
        value = opts[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be a share in [0, 1], got {value!r}")
    rng = random.Random(f"rlvr-agent-demo/{stream}/{seed}")
    teacher = random.Random(f"rlvr-agent-demo/{stream}/{seed}/teacher")

    def draw() -> tuple[str, tuple[int, str, int]]:
        a, b = draw_operands(rng, levels, None)
        op = rng.choice(ops)
        return f"{a}{op}{b}=", (a, op, b)

    rows = []
    for a, op, b in distinct_draws(n, draw, exclude=exclude, unique=unique):
        use_tool = teacher.random() < opts["tool_rate"]
        slip = teacher.random() < opts["slip"]
        rows.append(agent_problem(a, op, b, use_tool=use_tool, slip=slip, rng=teacher))
    return rows


def agent_train_eval(n_train: int, n_eval: int, seed: int, **options: Any) -> tuple[list[dict], list[dict]]:
    """Train rows and held-out rows, disjoint by problem; the held-out rows (no repeats) do not
    depend on ``n_train``."""
    eval_rows = agent_problems(n_eval, seed, stream="eval", unique=True, **options)
    held_out = [r["prompt"][0]["content"] for r in eval_rows]
    return agent_problems(n_train, seed, stream="train", exclude=held_out, **options), eval_rows


def called_tool(completion: Sequence[dict[str, Any]]) -> bool:
    """Whether an episode's messages (TRL's conversational completion) hold a tool call."""
    return any(m.get("tool_calls") for m in completion if isinstance(m, dict))
