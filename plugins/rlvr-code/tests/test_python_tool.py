"""The ``python`` environment: every call runs in the sandbox, and a program that fails, hangs, floods its
output or writes bytes that are not UTF-8 gives the policy an error message, within the call's deadline,
also inside TRL's tool loop (the episode goes on)."""

from __future__ import annotations

import re
import time

import pytest

from rlvr_plugins.errors import PluginOptionError
from rlvr_plugins.manager import build_plugin_set


def python_environment(**options):
    [(owner, environment)] = build_plugin_set({"python": {"time_s": 1.0, **options}}).environments()
    assert (owner, environment.name) == ("python", "python")
    return environment


def python_tool(**options):
    return python_environment(**options).factory()


def test_a_program_s_output_is_the_answer():
    tool = python_tool()
    assert tool.reset(prompt="x") is None
    assert tool.run_python("print(123456789 * 987654321)") == f"{123456789 * 987654321}\n"


def test_the_answer_s_length_is_the_environment_s_cut():
    assert python_environment(max_output_chars=10).max_result_chars == 10  # the trainer cuts there


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("raise KeyError('nope')", "the program failed (exit status 1): KeyError: 'nope'"),
        ("while True:\n    pass", "the program ran past its 1 s deadline and was stopped"),
        ("print('x' * (1 << 20))", "the program wrote more than 65536 bytes of output and was stopped"),
        (
            "import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe')",
            "the program's output is not valid UTF-8 (byte 3 of 5)",
        ),
        ("import socket\nsocket.socket()", "the program failed (exit status 1): PermissionError"),
    ],
    ids=["raises", "hangs", "floods-1MB", "invalid-utf8", "no-network"],
)
def test_a_failing_program_is_an_error_message_within_the_deadline(code, message):
    tool = python_tool()
    started = time.perf_counter()
    with pytest.raises(ValueError, match=re.escape(message)):
        tool.run_python(code)
    assert time.perf_counter() - started < 1.0 + 3.0  # the deadline, plus the sandbox's start and clean-up


def test_each_call_runs_in_a_fresh_interpreter_not_a_fork_of_this_process(monkeypatch):
    import rlvr_code.fresh as fresh
    import rlvr_code.tool_run as tool_run

    def forked(*args, **kwargs):
        raise AssertionError("the sandbox was started from the calling process")

    monkeypatch.setattr(tool_run, "run_sandboxed", forked)  # this process's copy: the fresh one has its own
    tool = python_tool()
    assert tool.run_python("print(6 * 7)") == "42\n"
    monkeypatch.setattr(fresh, "GRACE_S", 0.05 - 1.0)  # the interpreter's deadline: 50 ms, never met
    with pytest.raises(ValueError, match=r"the sandbox could not run the program \(not the program's fault\)"):
        tool.run_python("print(1)")


def test_options_are_checked():
    with pytest.raises(PluginOptionError, match="time_s"):
        build_plugin_set({"python": {"time_s": 0}})


def test_a_hanging_program_inside_trl_s_tool_loop_leaves_the_episode_going(tmp_path):
    import torch
    from datasets import Dataset

    from rlvr_plugins.manager import temporary_plugin
    from rlvr_plugins.rewards import Engines
    from rlvr_plugins.testing import (
        grpo_args,
        reward_plugin_class,
        scripted_turns,
        tiny_model,
        tool_call,
        tool_tokenizer,
    )
    from rlvr_plugins.trainer import RLVRTrainer

    def reply(text: str) -> str:
        if "<tool_response>" in text:
            return "<answer>done</answer><|im_end|>"
        return tool_call("run_python", code="while True: pass")

    episodes = []

    def keep(*, prompt, completion, example):
        episodes.append(completion)
        return 0.0

    torch.set_num_threads(1)
    tok = tool_tokenizer()
    rows = [{"prompt": [{"role": "user", "content": "loop"}]}] * 2
    with temporary_plugin(reward_plugin_class("keep", keep, isolated=False, completion_format="messages")):
        trainer = RLVRTrainer(
            model=tiny_model(tok, max_position_embeddings=2048),
            args=grpo_args(tmp_path, max_completion_length=384, per_device_train_batch_size=2, num_generations=2),
            plugins={"python": {"time_s": 0.5}, "keep": {}},
            train_dataset=Dataset.from_list(rows),
            processing_class=tok,
            engines=Engines(in_process=True),
        )
        scripted_turns(trainer, reply)
        started = time.perf_counter()
        trainer._generate_and_score_completions([{**r, "rlvr_index": i} for i, r in enumerate(rows)])
    assert time.perf_counter() - started < 20
    for episode in episodes:
        assert [m["role"] for m in episode] == ["assistant", "tool", "assistant"]
        assert "deadline" in episode[1]["content"] and episode[2]["content"] == "<answer>done</answer>"
    assert trainer._metrics["train"]["tools/errors/run_python"][-1] == 1.0
