"""The code-repair environment end to end: two GRPO steps of ``RLVRTrainer`` on the tiny model, with TRL's tool
loop calling the environment's tools. The tiny model emits no tool calls, so its turns are scripted: the
transformers generation (``_generate_single_turn``) is replaced by fixed replies; everything else (parsing the
calls, running the tools, the tool suffix, the environment's reward, the loss) is the trainer's own."""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import tempfile
from functools import partial

import pytest

from rlvr_code.repair import CodeRepairEnv, CodeRepairOptions
from rlvr_plugins.testing import tool_call

EXAMPLES = pathlib.Path(__file__).parents[1] / "examples" / "repair.jsonl"
FIXES = {"add": "def add(a, b):\n    return a + b\n", "is_even": "def is_even(n):\n    return n % 2 == 0\n"}


def scripted_policy(replies: list[str]):
    """The policy's turns (for :func:`rlvr_plugins.testing.scripted_turns`): in the first turn, every other
    rollout reads the module and the others run the tests as they are; after a tool result, the readers replace
    the module with its fix, then run the tests; every rollout ends with "Done."."""
    first_turns = itertools.count()

    def reply(text: str) -> str:
        last_result = text.rsplit("<tool_response>", 1)[-1].lstrip() if "<tool_response>" in text else None
        function = next(name for name in FIXES if f"The function {name} " in text)
        if last_result is None:
            turn = tool_call("read_file", path="solution.py") if next(first_turns) % 2 == 0 else tool_call("run_tests")
        elif last_result.startswith("def "):
            turn = tool_call("replace_file", path="solution.py", content=FIXES[function])
        elif last_result.startswith("wrote "):
            turn = tool_call("run_tests")
        else:
            turn = "Done.<|im_end|>"
        replies.append(turn)
        return turn

    return reply


@pytest.mark.slow
def test_two_grpo_steps_run_the_tools_in_trls_loop_and_reward_the_final_tests(tmp_path, monkeypatch):
    from datasets import Dataset

    from rlvr_plugins.testing import grpo_args, scripted_turns, tiny_model, tool_tokenizer, trl_chat_template
    from rlvr_plugins.trainer import RLVRTrainer

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    tokenizer = tool_tokenizer(trl_chat_template("qwen3"))
    rows = [json.loads(line) for line in EXAMPLES.read_text(encoding="utf-8").splitlines()][:2]
    assert [r["source"].split("(")[0] for r in rows] == ["def add", "def is_even"]
    trainer = RLVRTrainer(
        tiny_model(tokenizer, max_position_embeddings=4096),
        environment_factory=partial(CodeRepairEnv, CodeRepairOptions(total_time_s=5.0)),
        args=grpo_args(tmp_path, per_device_train_batch_size=4, num_generations=4, max_completion_length=1500),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        engine_options={"in_process": True},
    )
    replies: list[str] = []
    scripted_turns(trainer, scripted_policy(replies))
    trainer.train()

    logs = [h for h in trainer.state.log_history if "rewards/CodeRepairEnv/mean" in h]
    assert len(logs) == 2
    for h in logs:
        # per group: two rollouts fixed the module (1.0), two left it (0.0); 3 tool calls and 1, no failures
        assert h["rewards/CodeRepairEnv/mean"] == 0.5 and h["rewards/CodeRepairEnv/std"] > 0
        assert h["tools/call_frequency"] == 2.0 and h["tools/failure_frequency"] == 0.0
        assert h["rlvr/frac_zero_variance_groups"] == 0.0 and h["loss"] != 0.0
    assert sum('"replace_file"' in r for r in replies) == 4 and replies.count("Done.<|im_end|>") == 8
    workdirs = [name for name in os.listdir(tmp_path) if "-repair-" in name]
    assert len(workdirs) == 4  # one per pooled environment: each episode's reset removed the previous one's
