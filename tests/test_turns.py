"""The multi-turn token-prefix check of a run's chat template (``rlvr_plugins.turns``), on Qwen3-style templates
with thinking on and off: TRL's own templates, one that breaks the prefix only with thinking off (which TRL's
start-up check misses), one TRL cannot patch, and one that drops earlier <think> blocks."""

from __future__ import annotations

import logging

import pytest
from trl.chat_template_utils import is_chat_template_prefix_preserving

from rlvr_plugins.demo.tokenizer import build_char_tokenizer
from rlvr_plugins.errors import ConfigError
from rlvr_plugins.testing import grpo_args, tiny_model, tool_tokenizer, trl_chat_template
from rlvr_plugins.trainer import RLVRTrainer
from rlvr_plugins.turns import check_turns, turn_report

THINK_LINE = "{{- '<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}"
# Qwen3 #1826's pattern: in non-thinking mode the empty think block is written for the last assistant turn only
THINK_OFF_BREAKS = (
    "{%- if enable_thinking is defined and enable_thinking is false and not loop.last %}"
    "{{- content.lstrip('\\n') }}{%- else %}" + THINK_LINE + "{%- endif %}"
)
TOOL_CALL = [{"type": "function", "function": {"name": "run_tests", "arguments": {}}}]


def think_off_breaking() -> str:
    text = trl_chat_template("qwen3_training")
    assert THINK_LINE in text
    return text.replace(THINK_LINE, THINK_OFF_BREAKS)


def rendered_tool_turn(tok, **kwargs) -> tuple[str, str]:
    """The two renderings TRL cuts a tool result's tokens from, as text (independent of the code under test)."""
    before = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": TOOL_CALL}]
    after = [*before, {"role": "tool", "name": "run_tests", "content": "passed"}]
    return (
        tok.apply_chat_template(before, tokenize=False, **kwargs),
        tok.apply_chat_template(after, tokenize=False, add_generation_prompt=True, **kwargs),
    )


def test_trls_qwen3_templates_keep_every_turn_a_prefix_with_thinking_on_and_off():
    for name in ("qwen3_training", "qwen3"):  # qwen3 breaks the prefix; TRL swaps in qwen3_training for it
        report = turn_report(tool_tokenizer(trl_chat_template(name)))
        assert report.errors == [] and report.warnings == [], name
    assert not is_chat_template_prefix_preserving(tool_tokenizer(trl_chat_template("qwen3")))
    for thinking in (True, False):
        before, after = rendered_tool_turn(
            tool_tokenizer(trl_chat_template("qwen3_training")), enable_thinking=thinking
        )
        assert after.startswith(before)


def test_a_template_that_breaks_the_prefix_only_with_thinking_off_is_refused_for_a_run_in_that_mode():
    tok = tool_tokenizer(think_off_breaking())
    before, after = rendered_tool_turn(tok, enable_thinking=False)
    assert not after.startswith(before)  # the break, seen on the text
    before_on, after_on = rendered_tool_turn(tok, enable_thinking=True)
    assert after_on.startswith(before_on)
    assert is_chat_template_prefix_preserving(tok)  # TRL's start-up check renders without enable_thinking
    off = turn_report(tok, {"enable_thinking": False})
    assert len(off.errors) == 1 and off.errors[0].startswith("with thinking off: a tool result's tokens")
    with pytest.raises(ConfigError, match=r"invalid config in the tokenizer's chat template: with thinking off"):
        check_turns(tok, {"enable_thinking": False})
    on = turn_report(tok)  # a run in thinking mode: the other mode's break is a warning
    assert on.errors == [] and len(on.warnings) == 2
    assert on.warnings[1].startswith("with thinking off: an earlier assistant turn is rendered differently")
    assert on.warnings[0].startswith("with thinking off: a tool result's tokens do not follow")
    assert "this run's chat_template_kwargs render the other mode" in on.warnings[0]


def test_a_qwen3_style_template_trl_cannot_patch_is_refused_naming_the_reason():
    tok = tool_tokenizer(trl_chat_template("qwen3") + "{#- a local copy #}")
    report = turn_report(tok)
    assert report.errors and "TRL has no training version of it" in report.errors[0]
    assert "without a chat template" not in report.errors[0]
    assert turn_report(build_char_tokenizer()).errors == [
        "the tokenizer has no chat template; tools and environments need one"
    ]


def test_a_template_that_drops_earlier_think_blocks_warns_with_the_reason():
    report = turn_report(tool_tokenizer(trl_chat_template("qwen3_5_think")))
    assert report.errors == []
    assert [w.split(":")[0] for w in report.warnings] == ["with thinking on", "with thinking off"]
    assert "'<think>\\nTwo and tw' becomes '4<|im_end|>\\n<|im_start|>user\\nAnd'" in report.warnings[0]


class OneToolEnv:
    def reset(self, **kwargs):
        return None

    def ping(self) -> str:
        """Answer.

        Returns:
            pong.
        """
        return "pong"

    def get_reward(self) -> float:
        return 0.0


def test_rlvr_trainer_with_an_environment_checks_the_template_in_the_runs_thinking_mode(tmp_path, caplog):
    from datasets import Dataset

    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "hi"}]}] * 4)
    tok = tool_tokenizer(think_off_breaking())

    def build(tokenizer, **args):
        return RLVRTrainer(
            tiny_model(tokenizer, max_position_embeddings=2048),
            environment_factory=OneToolEnv,
            args=grpo_args(tmp_path, per_device_train_batch_size=4, **args),
            train_dataset=data,
            processing_class=tokenizer,
            engine_options={"in_process": True},
        )

    with pytest.raises(ConfigError, match="with thinking off: a tool result's tokens do not follow"):
        build(tok, chat_template_kwargs={"enable_thinking": False})
    with caplog.at_level(logging.WARNING, logger="rlvr_plugins.trainer"):
        build(tool_tokenizer(trl_chat_template("qwen3_5_think")))
    assert "chat template: with thinking on: an earlier assistant turn is rendered differently" in caplog.text


def test_a_template_that_cannot_render_tool_calls_is_refused():
    plain = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    assert turn_report(tool_tokenizer(plain)).errors == [
        "the template cannot render a tool call and its result (TRL's supports_tool_calling)"
    ]
