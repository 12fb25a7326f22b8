"""Qwen3's thinking-mode fusion for rlvr-plugins: /think and /no_think, a compliance reward, a thinking budget."""

from .budget import EARLY_STOP_TEXT, ThinkingBudgetRollout, generate_with_budget
from .compliance import mode_compliance
from .modes import EMPTY_THINK_BLOCK, explicit_flag, fused_no_think, render_prompt, rendered_mode, thinking_mode
from .sft import build_fusion_sft

__all__ = [
    "EARLY_STOP_TEXT",
    "EMPTY_THINK_BLOCK",
    "ThinkingBudgetRollout",
    "build_fusion_sft",
    "explicit_flag",
    "fused_no_think",
    "generate_with_budget",
    "mode_compliance",
    "render_prompt",
    "rendered_mode",
    "thinking_mode",
]
