"""``qwen-thinking`` in a run with tools (an environment enabled): the prompts stay chat messages, each row's mode
carried by Qwen3's soft switch (``/no_think`` in the user turn) since TRL's tool loop renders every row with one
``chat_template_kwargs``; every turn stays a token prefix of the next (TRL appends the tool's tokens, the policy's
think blocks stay as written); the compliance reward judges every turn of an episode. The thinking budget is
refused with tools, with the reason. The token-prefix check of the template in both modes is tests/test_turns.py."""

from __future__ import annotations

import re

import pytest
from datasets import Dataset

from rlvr_plugins.errors import ConfigError
from rlvr_plugins.manager import build_plugin_set, temporary_plugin
from rlvr_plugins.rewards import Engines
from rlvr_plugins.testing import (
    grpo_args,
    reward_plugin_class,
    scripted_turns,
    tool_call,
    tool_tokenizer,
    trl_chat_template,
)
from rlvr_plugins.testing import (
    tiny_model as new_tiny_model,
)
from rlvr_plugins.train.data import render
from rlvr_plugins.trainer import RLVRTrainer

THOUGHT = "<think>\nI add with the tool.\n</think>\n\n"
EMPTY = "<think>\n\n</think>\n\n"
ANSWER = "<answer>5</answer><|im_end|>"
QUESTIONS = ["What is 2+3?", "What is 1+4?", "Sum 2 and 3. /think", "Sum 1 and 4. /no_think", "rude /think"]
QUESTIONS += ["chatty /no_think"]


def block_of(user: str) -> str:
    """The think block the scripted policy opens each turn with: in the mode the user turn asks for (``/no_think``:
    empty), except "rude", which never thinks, and "chatty", which always does."""
    if "rude" in user:
        return ""
    return EMPTY if re.search(r"/no_think\b", user) and "chatty" not in user else THOUGHT


def reply(text: str) -> str:
    """The scripted policy: one calculator call, then the answer, each turn opened by :func:`block_of`."""
    Seen.contexts.append(text)
    user = text.split("<|im_start|>user\n")[1].split("<|im_end|>")[0]  # the row's (tool results are user turns too)
    if "<tool_response>" not in text:
        return block_of(user) + tool_call("calculate", expression="2 + 3")
    return block_of(user) + ANSWER


class Seen:
    contexts: list[str] = []
    episodes: list = []


def keep(*, prompt, completion, example):
    Seen.episodes.append((prompt, completion))
    return 0.0


@pytest.fixture
def qwen_tool_run(tmp_path):
    Seen.contexts, Seen.episodes = [], []
    tok = tool_tokenizer(trl_chat_template("qwen3"))
    tok.add_tokens(["<think>", "</think>"])

    def build(**qwen):
        plugins = {"qwen-thinking": {"no_think_share": 0.5, "compliance_weight": 1.0, **qwen}, "calculator": {}}
        rows = render([{"prompt": q, "answer": "5"} for q in QUESTIONS] * 2, build_plugin_set(plugins), tok, 0)
        return rows, RLVRTrainer(
            model=new_tiny_model(tok, max_position_embeddings=2048),
            args=grpo_args(tmp_path, max_completion_length=384, per_device_train_batch_size=4, num_generations=2),
            plugins={**plugins, "keep": {}},
            train_dataset=Dataset.from_list(rows),
            processing_class=tok,
            engines=Engines(in_process=True),
        )

    with temporary_plugin(reward_plugin_class("keep", keep, isolated=False, completion_format="messages")):
        yield tok, build


def test_a_run_with_tools_gets_messages_with_each_rows_mode_and_keeps_every_turn_a_prefix(qwen_tool_run):
    tok, build = qwen_tool_run
    rows, trainer = build()
    prompts = [r["prompt"] for r in rows]
    assert all(isinstance(p, list) for p in prompts)  # messages for TRL's tool loop, not a pre-rendered text
    flagged = [p[-1]["content"].endswith(" /no_think") for p in prompts]
    fused = [f and "/" not in q for f, q in zip(flagged, QUESTIONS * 2)]
    assert 0 < sum(fused) < 4  # no_think_share 0.5 put some unflagged rows in non-thinking mode, by the flag
    assert [p[-1]["content"] for p in prompts][2:4] == ["Sum 2 and 3. /think", "Sum 1 and 4. /no_think"]

    scripted_turns(trainer, reply)
    batch = trainer._generate_and_score_completions(rows)
    assert len(Seen.episodes) == 12
    first_turns = [c for c in Seen.contexts if "<tool_response>" not in c]
    assert all(c.endswith("<|im_start|>assistant\n") for c in first_turns)  # one rendering, the mode in the flag
    for context in (c for c in Seen.contexts if "<tool_response>" in c):  # a later turn: what the policy reads
        user = context.split("<|im_start|>user\n")[1].split("<|im_end|>")[0]
        first = block_of(user) + tool_call("calculate", expression="2 + 3")  # think block included, as written
        assert first in context

    # the token prefix: each episode's ids are the prompt, the first turn, the tool's tokens (mask 0), the answer
    for i, (prompt, episode) in enumerate(Seen.episodes):
        block = block_of(prompt[-1]["content"])
        kept = batch["completion_mask"][i].bool()
        ids, policy = batch["completion_ids"][i][kept].tolist(), batch["tool_mask"][i][kept].tolist()
        first = block + tool_call("calculate", expression="2 + 3")
        text = tok.decode(ids)
        assert text.startswith(first) and text.endswith(block + ANSWER), text
        tool = text[len(first) : -len(block + ANSWER)]
        assert tool == "\n<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
        assert tok.decode([t for t, m in zip(ids, policy) if m]) == first + block + ANSWER  # the tool's: mask 0
        turns = [m for m in episode if m["role"] == "assistant"]
        assert len(turns) == 2 and episode[1] == {"role": "tool", "name": "calculate", "content": "5"}

    compliance = trainer._metrics["train"]["rewards/qwen-mode-compliance/mean"][-1]
    assert compliance == pytest.approx(8 / 12)  # every row complies in both turns but "rude" and "chatty"


def test_the_thinking_budget_is_refused_with_tools_naming_why(qwen_tool_run):
    _, build = qwen_tool_run
    with pytest.raises(ConfigError, match=r"plugins\.qwen-thinking: thinking_budget=50 cannot apply with tools"):
        build(thinking_budget=50)
