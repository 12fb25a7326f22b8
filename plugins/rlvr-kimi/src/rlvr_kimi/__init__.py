"""Kimi k1.5 (Kimi Team 2025, "Kimi k1.5: Scaling Reinforcement Learning with LLMs") for rlvr-plugins."""

from .length import is_correct, kimi_length_reward

__all__ = ["is_correct", "kimi_length_reward"]
