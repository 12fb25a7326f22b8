"""rlvr-plugins: reinforcement learning with verifiable rewards, as plugins on TRL's GRPOTrainer."""

import pluggy

__version__ = "0.1.0"

PROJECT = "rlvr_plugins"
ENTRY_POINT_GROUP = "rlvr_plugins"

hookimpl = pluggy.HookimplMarker(PROJECT)

from .plugin import Environment, Plugin, RewardExploit, RewardFunction  # noqa: E402

__all__ = ["ENTRY_POINT_GROUP", "Environment", "Plugin", "RewardExploit", "RewardFunction", "hookimpl", "__version__"]
