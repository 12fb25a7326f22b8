"""The exact rendered prompts: plain text and chat templates (with and without ``enable_thinking``), and fusion."""

from __future__ import annotations

import pytest

from rlvr_plugins.demo.task import split_train_eval
from rlvr_plugins.errors import ConfigError, PluginOptionError
from rlvr_plugins.manager import build_plugin_set
from rlvr_plugins.train.data import render
from rlvr_qwen_thinking.modes import fused_no_think, render_prompt, rendered_mode

BLOCK = "<think>\n\n</think>\n\n"

# Like Qwen3's template: non-thinking mode puts the empty think block after the assistant header.
QWEN_LIKE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}"
    "{% endif %}"
)
# A template that knows nothing of thinking modes.
PLAIN_CHAT = (
    "{% for m in messages %}{{ m.role | capitalize }}: {{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}"
)


def render_one(tokenizer, prompt, index=0, seed=0, **options):
    plugin_set = build_plugin_set({"qwen-thinking": options})
    return plugin_set.one(
        "rlvr_render_prompt",
        example={"prompt": prompt, "answer": "4"},
        index=index,
        seed=seed,
        tokenizer=tokenizer,
        multi_turn=False,
    )


@pytest.mark.parametrize(
    "prompt, expected",
    [
        ("57+68=", "57+68="),
        ("57+68= /think", "57+68= /think"),
        ("57+68= /no_think", "57+68= /no_think<think>\n\n</think>\n\n"),
        ("/no_think 57+68= /think", "/no_think 57+68= /think"),
    ],
)
def test_plain_text_prompts_get_the_empty_block_in_non_thinking_mode(tokenizer, prompt, expected):
    assert tokenizer.chat_template is None
    assert render_one(tokenizer, prompt) == expected


def test_plain_text_chat_messages_are_refused(tokenizer):
    with pytest.raises(ValueError, match="no chat template"):
        render_one(tokenizer, [{"role": "user", "content": "2+2?"}])


def test_template_with_enable_thinking_renders_both_modes(tokenizer):
    tokenizer.chat_template = QWEN_LIKE
    assert render_one(tokenizer, "What is 2+2?") == (
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert render_one(tokenizer, "What is 2+2? /no_think") == (
        "<|im_start|>user\nWhat is 2+2? /no_think<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    conversation = [{"role": "system", "content": "Be brief. /no_think"}, {"role": "user", "content": "2+2?"}]
    assert render_one(tokenizer, conversation) == (
        "<|im_start|>system\nBe brief. /no_think<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


def test_template_with_enable_thinking_gets_it_from_the_plugin_not_from_an_append(tokenizer):
    # the template decides what non-thinking mode looks like; the plugin adds nothing itself
    tokenizer.chat_template = QWEN_LIKE.replace("<think>\n\n</think>\n\n", "[direct]")
    header = "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"
    assert render_prompt("2+2?", tokenizer, thinking=False) == header + "[direct]"
    assert render_prompt("2+2?", tokenizer, thinking=True) == header


def test_template_without_enable_thinking_gets_the_block_appended(tokenizer):
    tokenizer.chat_template = PLAIN_CHAT
    assert render_one(tokenizer, "What is 2+2?") == "User: What is 2+2?\nAssistant:"
    assert render_one(tokenizer, "What is 2+2? /no_think") == (
        "User: What is 2+2? /no_think\nAssistant:<think>\n\n</think>\n\n"
    )


def test_fusion_flags_the_chosen_unflagged_prompts_and_leaves_explicit_flags_alone(tokenizer):
    share, seed = 0.5, 11
    chosen = [i for i in range(40) if fused_no_think(seed, i, share)]
    kept = [i for i in range(40) if not fused_no_think(seed, i, share)]
    assert chosen and kept
    assert render_one(tokenizer, "57+68=", index=chosen[0], seed=seed, no_think_share=share) == (
        "57+68= /no_think<think>\n\n</think>\n\n"
    )
    assert render_one(tokenizer, "57+68=", index=kept[0], seed=seed, no_think_share=share) == "57+68="
    # explicit flags win over the fusion draw
    assert render_one(tokenizer, "57+68= /think", index=chosen[0], seed=seed, no_think_share=share) == "57+68= /think"
    assert render_one(tokenizer, "57+68= /no_think", index=kept[0], seed=seed, no_think_share=share) == (
        "57+68= /no_think<think>\n\n</think>\n\n"
    )
    tokenizer.chat_template = QWEN_LIKE
    assert render_one(tokenizer, "2+2?", index=chosen[0], seed=seed, no_think_share=share) == (
        "<|im_start|>user\n2+2? /no_think<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


def test_rendering_a_split_through_the_core_is_reproducible_and_keeps_the_share(tokenizer):
    rows, _ = split_train_eval(600, 0, 0, max_digits=3)
    plugin_set = build_plugin_set({"qwen-thinking": {"no_think_share": 0.25}})
    first = render(rows, plugin_set, tokenizer, seed=5)
    again = render(rows, plugin_set, tokenizer, seed=5)
    assert [r["prompt"] for r in first] == [r["prompt"] for r in again]
    for row in first:
        non_thinking = fused_no_think(5, row["rlvr_index"], 0.25)
        expected = row["raw_prompt"] + (" /no_think" + BLOCK if non_thinking else "")
        assert row["prompt"] == expected
        assert rendered_mode(row["prompt"]) == (not non_thinking, non_thinking)
    share = sum(r["prompt"].endswith(BLOCK) for r in first) / len(first)
    assert 0.25 - 0.07 < share < 0.25 + 0.07  # 4 binomial standard deviations (0.0177 each)
    other = render(rows, plugin_set, tokenizer, seed=6)
    assert [r["prompt"] for r in other] != [r["prompt"] for r in first]


def test_rendered_mode_reads_the_block_then_the_last_flag():
    assert rendered_mode("2+2= /no_think" + BLOCK) == (False, True)
    assert rendered_mode("2+2= /no_think") == (False, False)
    assert rendered_mode("2+2=") == (True, False)
    assert rendered_mode("<|im_start|>user\n2+2? /no_think<|im_end|>\n<|im_start|>assistant\n") == (False, False)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"no_think_share": 1.5}, "no_think_share must be in"),
        ({"thinking_budget": 0}, "thinking_budget must be >= 1"),
        ({"compliance_weight": -1.0}, "compliance_weight must be"),
        ({"no_think_shar": 0.1}, "did you mean 'no_think_share'"),
    ],
)
def test_bad_options_name_the_plugin(options, message):
    with pytest.raises(PluginOptionError, match=message) as err:
        build_plugin_set({"qwen-thinking": options})
    assert "qwen-thinking" in str(err.value)


def check_run(tmp_path, plugin_set, **trainer):
    from rlvr_plugins.train.run import build_grpo_config

    args = build_grpo_config({"output_dir": str(tmp_path), "report_to": "none", "use_cpu": True, **trainer})
    plugin_set.validate_run(args)


def test_budget_options_are_checked_against_the_trainer_section(tmp_path):
    plugin_set = build_plugin_set({"qwen-thinking": {"thinking_budget": 64, "compliance_weight": 1.0}})
    refused = "thinking_budget samples with a colocated vLLM, not trainer.vllm_mode='server'; set trainer.vllm_mode"
    with pytest.raises(ConfigError, match=refused):
        check_run(tmp_path, plugin_set, use_vllm=True, vllm_mode="server", max_completion_length=256)
    with pytest.raises(ConfigError, match="trainer.vllm_tensor_parallel_size=2 must be 1"):
        check_run(
            tmp_path,
            plugin_set,
            use_vllm=True,
            vllm_mode="colocate",
            vllm_tensor_parallel_size=2,
            max_completion_length=256,
        )
    check_run(tmp_path, plugin_set, use_vllm=True, vllm_mode="colocate", max_completion_length=256)
    with pytest.raises(ConfigError, match="thinking_budget=64 must be below trainer.max_completion_length=64"):
        check_run(tmp_path, plugin_set, max_completion_length=64)
    check_run(tmp_path, plugin_set, max_completion_length=256)
    check_run(tmp_path, plugin_set)  # TRL's default (512) leaves room
    check_run(
        tmp_path,
        build_plugin_set({"qwen-thinking": {"compliance_weight": 1.0}}),
        use_vllm=True,
        max_completion_length=8,
    )


@pytest.mark.parametrize("thinking", [True, False])
def test_a_run_wide_thinking_mode_is_refused(tmp_path, thinking):
    """TRL renders a run with tools with one chat_template_kwargs: enable_thinking there would override each row's
    mode (false: Qwen3's hard switch, every row non-thinking)."""
    with pytest.raises(ConfigError, match=r"chat_template_kwargs.enable_thinking would set one thinking mode"):
        check_run(
            tmp_path,
            build_plugin_set({"qwen-thinking": {"compliance_weight": 1.0}}),
            chat_template_kwargs={"enable_thinking": thinking},
        )
    check_run(
        tmp_path, build_plugin_set({"qwen-thinking": {"compliance_weight": 1.0}}), chat_template_kwargs={"other": 1}
    )


def test_a_budget_without_room_for_the_answer_fails_when_the_trainer_asks_for_the_rollout(tmp_path, tokenizer):
    from rlvr_plugins.train.run import build_grpo_config
    from rlvr_qwen_thinking.budget import ThinkingBudgetRollout

    def args(n):
        return build_grpo_config(
            {"output_dir": str(tmp_path), "report_to": "none", "use_cpu": True, "max_completion_length": n}
        )

    plugin_set = build_plugin_set({"qwen-thinking": {"thinking_budget": 3, "compliance_weight": 1.0}})
    check_run(tmp_path, plugin_set, max_completion_length=113)  # 3 < 113: fine before the tokenizer is known
    with pytest.raises(ConfigError, match=r"early-stop text \(110 tokens\) leaves no room .* raise it above 113"):
        plugin_set.one("rlvr_rollout_func", tokenizer=tokenizer, num_generations=4, grpo_args=args(113))
    assert plugin_set.one(
        "rlvr_rollout_func", tokenizer=tokenizer, num_generations=4, grpo_args=args(114)
    ) == ThinkingBudgetRollout(3)
    assert (
        build_plugin_set({"qwen-thinking": {}}).one(
            "rlvr_rollout_func", tokenizer=tokenizer, num_generations=4, grpo_args=args(114)
        )
        is None
    )
