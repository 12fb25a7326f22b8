"""``qwen-thinking`` in a run with tools: its prompts are text, rendered per row in the row's thinking mode, and
TRL's tool loop needs chat messages, so such a run is refused at start-up naming the plugin (instead of failing at
the first generation). The token-prefix check of the chat template, in both thinking modes, is tests/test_turns.py."""

from __future__ import annotations

import pathlib

import pytest

from rlvr_plugins.errors import ConfigError
from rlvr_plugins.manager import build_plugin_set


def ping() -> str:
    """Answer.

    Returns:
        pong.
    """
    return "pong"


def test_a_run_with_tools_refuses_the_text_prompts_qwen_thinking_renders(tmp_path, tiny_model, tokenizer):
    import trl
    from datasets import Dataset

    from rlvr_plugins.testing import grpo_args
    from rlvr_plugins.trainer import RLVRTrainer

    tokenizer.chat_template = (pathlib.Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    plugins = {"qwen-thinking": {"no_think_share": 0.5, "compliance_weight": 1.0}}
    render = build_plugin_set(plugins)
    rows = [
        {"prompt": render.one("rlvr_render_prompt", example={"prompt": p}, index=i, seed=0, tokenizer=tokenizer)}
        for i, p in enumerate(["1+1", "2+2", "3+3", "4+4"])
    ]
    assert all(isinstance(r["prompt"], str) for r in rows)
    with pytest.raises(ConfigError, match=r"the prompts are text, .* rendered by plugin 'qwen-thinking'"):
        RLVRTrainer(
            tiny_model,
            plugins=plugins,
            tools=[ping],
            args=grpo_args(tmp_path, per_device_train_batch_size=4),
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
            engine_options={"in_process": True},
        )
