"""The code-repair environment end to end: two GRPO steps of ``RLVRTrainer`` on the tiny model, with TRL's tool
loop calling the environment's tools. The tiny model emits no tool calls, so its turns are scripted: the
transformers generation (``_generate_single_turn``) is replaced by fixed replies; everything else (parsing the
calls, running the tools, the tool suffix, the environment's reward, the loss) is the trainer's own."""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
from functools import partial

import pytest

from rlvr_code.repair import CodeRepairEnv, CodeRepairOptions

EXAMPLES = pathlib.Path(__file__).parents[1] / "examples" / "repair.jsonl"
FIXES = {"add": "def add(a, b):\n    return a + b\n", "is_even": "def is_even(n):\n    return n % 2 == 0\n"}


def tool_call(name: str, **arguments) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def scripted_turns(tokenizer, replies: list[str]):
    """A stand-in for ``GRPOTrainer._generate_single_turn``: in the first turn, even rollouts read the module and
    odd ones run the tests as they are; after a tool result, the even ones replace the module with its fix, then
    run the tests; every rollout ends with "Done."."""

    def generate(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        out = []
        for k, ids in enumerate(prompt_ids):
            text = tokenizer.decode(ids)
            last_result = text.rsplit("<tool_response>", 1)[-1].lstrip() if "<tool_response>" in text else ""
            function = next(name for name in FIXES if f"The function {name} " in text)
            if num_generations > 1:  # the first turn of the whole group
                reply = tool_call("read_file", path="solution.py") if k % 2 == 0 else tool_call("run_tests")
            elif last_result.startswith("def "):
                reply = tool_call("replace_file", path="solution.py", content=FIXES[function])
            elif last_result.startswith("wrote "):
                reply = tool_call("run_tests")
            else:
                reply = "Done."
            replies.append(reply)
            out.append(tokenizer(reply, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])
        return out, None

    return generate


@pytest.mark.slow
def test_two_grpo_steps_run_the_tools_in_trls_loop_and_reward_the_final_tests(tmp_path, monkeypatch):
    import trl
    from datasets import Dataset

    from rlvr_plugins.demo.tokenizer import ALPHABET, build_char_tokenizer
    from rlvr_plugins.testing import grpo_args, tiny_model
    from rlvr_plugins.trainer import RLVRTrainer

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    tokenizer = build_char_tokenizer(ALPHABET + "{}[]|#%\\")  # JSON tool calls and Qwen3's <|im_start|>
    tokenizer.chat_template = (pathlib.Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
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
    monkeypatch.setattr(trainer, "_generate_single_turn", scripted_turns(tokenizer, replies))
    trainer.train()

    logs = [h for h in trainer.state.log_history if "rewards/CodeRepairEnv/mean" in h]
    assert len(logs) == 2
    for h in logs:
        # per group: two rollouts fixed the module (1.0), two left it (0.0); 3 tool calls and 1, no failures
        assert h["rewards/CodeRepairEnv/mean"] == 0.5 and h["rewards/CodeRepairEnv/std"] > 0
        assert h["tools/call_frequency"] == 2.0 and h["tools/failure_frequency"] == 0.0
        assert h["rlvr/frac_zero_variance_groups"] == 0.0 and h["loss"] != 0.0
    assert sum('"replace_file"' in r for r in replies) == 4 and replies.count("Done.") == 8
    workdirs = [name for name in os.listdir(tmp_path) if "-repair-" in name]
    assert len(workdirs) == 4  # one per pooled environment: each episode's reset removed the previous one's
