"""Kimi k1.5 (Kimi Team 2025, "Kimi k1.5: Scaling Reinforcement Learning with LLMs") for rlvr-plugins."""

from __future__ import annotations

from typing import Any

__all__ = ["is_correct", "kimi_length_reward"]


def __getattr__(name: str) -> Any:
    """The tensor functions, imported on first use (they import torch; the plugins are listed without it)."""
    if name in __all__:
        from . import length

        return getattr(length, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
