"""Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical Perspective") for rlvr-plugins."""

from .plugins import REQUIRED_TRAINER_SETTINGS, DrGRPO, trainer_contradictions

__all__ = ["REQUIRED_TRAINER_SETTINGS", "DrGRPO", "trainer_contradictions"]
