"""The ``qwen-thinking`` plugin: Qwen3's thinking-mode fusion as a template, a reward and a rollout."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlvr_plugins import Plugin, RewardFunction, hookimpl
from rlvr_plugins.errors import ConfigError

from .budget import EARLY_STOP_TEXT, THINK_END, ThinkingBudgetRollout, single_token_id
from .compliance import ModeComplianceScorer
from .modes import explicit_flag, flagged_messages, fused_no_think, render_prompt, with_no_think_flag
from .sft import sft_examples

COMPLIANCE_REWARD = "qwen-mode-compliance"


class QwenThinkingPlugin(Plugin):
    """Renders prompts in thinking or non-thinking mode (``/think``, ``/no_think``; fusion by
    ``no_think_share``), optionally rewards mode compliance and enforces a thinking budget."""

    name = "qwen-thinking"
    description = (
        "Qwen3 thinking-mode fusion: /think and /no_think flags, a share of unflagged prompts in "
        "non-thinking mode, a mode-compliance reward and a thinking budget"
    )

    @dataclass
    class Options:
        no_think_share: float = 0.0
        compliance_weight: float = 0.0
        thinking_budget: int | None = None

        def __post_init__(self):
            if not 0.0 <= self.no_think_share <= 1.0:
                raise ValueError(f"no_think_share must be in [0, 1], got {self.no_think_share}")
            if not math.isfinite(self.compliance_weight) or self.compliance_weight < 0:
                raise ValueError(f"compliance_weight must be a finite number >= 0, got {self.compliance_weight}")
            if self.thinking_budget is not None and self.thinking_budget < 1:
                raise ValueError(f"thinking_budget must be >= 1 (or null for no budget), got {self.thinking_budget}")

    @hookimpl
    def rlvr_render_prompt(self, example, index, seed, tokenizer, multi_turn):
        prompt = example["prompt"]
        flag = explicit_flag(prompt)
        fused = flag is None and fused_no_think(seed, index, self.options.no_think_share)
        if multi_turn:  # TRL's tool loop renders the messages, in one mode for all: the row's mode is its flag
            return flagged_messages(prompt, no_think=fused)
        if fused:
            return render_prompt(with_no_think_flag(prompt), tokenizer, thinking=False)
        return render_prompt(prompt, tokenizer, thinking=flag is not False)

    @hookimpl
    def rlvr_sft_examples(self, rows, completion_column, seed):
        try:
            return sft_examples(rows, column=completion_column, no_think_share=self.options.no_think_share, seed=seed)
        except ValueError as exc:
            raise ConfigError(f"sft with qwen-thinking fusion: {exc}", source="sft") from exc

    @hookimpl
    def rlvr_reward_functions(self, register):
        if self.options.compliance_weight > 0:
            register(
                RewardFunction(
                    COMPLIANCE_REWARD,
                    ModeComplianceScorer(),
                    self.options.compliance_weight,
                    isolated=False,
                    completion_format="messages",
                )
            )

    @hookimpl
    def rlvr_validate_run(self, grpo_args, multi_turn):
        if "enable_thinking" in (grpo_args.chat_template_kwargs or {}):
            raise ConfigError(
                "trainer.chat_template_kwargs.enable_thinking would set one thinking mode for every row, but "
                "qwen-thinking sets each row's (its /think or /no_think flag, no_think_share); remove it",
                source="plugins.qwen-thinking",
            )
        budget = self.options.thinking_budget
        if budget is None:
            return
        if multi_turn:
            raise ConfigError(
                f"thinking_budget={budget} cannot apply with tools or an environment: TRL 1.16's tool loop generates "
                "only the first turn with the budget's rollout_func and every later turn itself, and builds the tool "
                "mask itself (the early-stop text would be trained on); remove thinking_budget for this run",
                source="plugins.qwen-thinking",
            )
        problems = []
        if grpo_args.use_vllm and grpo_args.vllm_mode != "colocate":
            problems.append(
                f"plugins.qwen-thinking.thinking_budget samples with a colocated vLLM, not "
                f"trainer.vllm_mode={grpo_args.vllm_mode!r}; set trainer.vllm_mode to 'colocate', "
                "trainer.use_vllm to false, or remove thinking_budget"
            )
        if grpo_args.use_vllm and grpo_args.vllm_tensor_parallel_size != 1:
            problems.append(
                f"plugins.qwen-thinking.thinking_budget samples with vLLM on each process's own prompts; "
                f"trainer.vllm_tensor_parallel_size={grpo_args.vllm_tensor_parallel_size} must be 1"
            )
        max_len = grpo_args.max_completion_length
        if max_len is None or budget >= max_len:
            problems.append(
                f"plugins.qwen-thinking.thinking_budget={budget} must be below "
                f"trainer.max_completion_length={max_len}, with room for the early-stop text and "
                "the answer"
            )
        if problems:
            raise ConfigError(problems, source="plugins.qwen-thinking")

    @hookimpl
    def rlvr_rollout_func(self, tokenizer, grpo_args):
        budget = self.options.thinking_budget
        if budget is None:
            return None
        max_len = grpo_args.max_completion_length
        if tokenizer is not None and max_len is not None:
            try:
                single_token_id(tokenizer, THINK_END)
            except ValueError as exc:
                raise ConfigError(str(exc), source="plugins.qwen-thinking") from exc
            stop = len(tokenizer(EARLY_STOP_TEXT, add_special_tokens=False)["input_ids"])
            if budget + stop >= max_len:
                raise ConfigError(
                    f"plugins.qwen-thinking.thinking_budget={budget} + the early-stop text ({stop} tokens) leaves no "
                    f"room for the answer in trainer.max_completion_length={max_len}; raise it above {budget + stop}",
                    source="plugins.qwen-thinking",
                )
        return ThinkingBudgetRollout(budget)
