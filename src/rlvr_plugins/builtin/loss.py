"""The built-in ``policy-loss`` plugin: the surrogate's clipping and length normalisation, by name.

TRL implements every variant; this plugin only names them and refuses contradictions, so
a homework run says ``clip: false`` or ``length_normalization: constant`` instead of
folklore values in ``trainer:``.

With ``ρ_t = π_θ(o_t) / π_old(o_t)`` and advantage ``A``, the per-token surrogate is

* clipped (PPO, GRPO; ``clip: true``, TRL's code): ``-min(ρ_t A, clip(ρ_t, 1-ε_low, 1+ε_high) A)``;
* unclipped (``clip: false``): ``-ρ_t A``. Implemented by setting ``ε_low = ε_high = +∞``:
  ``clip(ρ, -∞, +∞) = ρ`` exactly (no large-but-finite ε that a ratio could still reach),
  so ``min(ρA, ρA) = ρA`` and the clipped branch is gone; TRL's clip-ratio metrics then
  read 0.

The per-token losses ``l_{i,t}`` of the ``B`` completions (lengths ``|o_i|``) are reduced by
``length_normalization``:

* ``per-response`` (original GRPO, TRL ``grpo``): ``(1/B) Σ_i (1/|o_i|) Σ_t l_{i,t}``. Biased:
  a wrong (negative-advantage) answer's push-down is divided by its own length, so long
  wrong answers are penalised less per token and responses drift longer.
* ``constant`` (Dr. GRPO, TRL ``dr_grpo``): ``Σ_i Σ_t l_{i,t} / (B · L_max)``. Unbiased: every
  token weighs the same, whatever the length of its response.
* ``token-mean`` (DAPO, TRL ``dapo``, TRL's default): ``Σ_i Σ_t l_{i,t} / Σ_i |o_i|`` over the
  generation batch. Every token weighs the same within a batch, but the normaliser
  depends on the batch's total length, so the step size varies with it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .. import hookimpl
from ..errors import ConfigError
from ..plugin import Plugin

LENGTH_NORMALIZATION = {"per-response": "grpo", "constant": "dr_grpo", "token-mean": "dapo"}
CLIPPED_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")
CLIP_KEYS = ("epsilon", "epsilon_high", "delta")


def loss_settings(clip: bool, length_normalization: str | None) -> dict[str, Any]:
    """The ``GRPOConfig`` fields that implement the named choices.

    >>> loss_settings(False, "constant")
    {'epsilon': inf, 'epsilon_high': inf, 'loss_type': 'dr_grpo'}
    >>> loss_settings(True, None)
    {}
    """
    settings: dict[str, Any] = {}
    if not clip:
        settings.update(epsilon=math.inf, epsilon_high=math.inf)
    if length_normalization is not None:
        settings["loss_type"] = LENGTH_NORMALIZATION[length_normalization]
    return settings


def contradictions(
    trainer_section: Mapping[str, Any], clip: bool, length_normalization: str | None, plugin: str = "policy-loss"
) -> list[str]:
    """One message per ``trainer:`` key that contradicts the plugin's options."""
    problems = []
    if not clip:
        for key in CLIP_KEYS:
            if trainer_section.get(key) is not None:
                problems.append(
                    f"trainer.{key}={trainer_section[key]!r} contradicts plugin {plugin!r} option "
                    f"clip: false (the surrogate is not clipped); remove trainer.{key}"
                )
        loss_type = trainer_section.get("loss_type", LENGTH_NORMALIZATION.get(length_normalization or "", "dapo"))
        if loss_type not in CLIPPED_LOSS_TYPES:
            problems.append(
                f"trainer.loss_type={loss_type!r} has no clipped PPO surrogate to switch off "
                f"(plugin {plugin!r} option clip: false works with {list(CLIPPED_LOSS_TYPES)})"
            )
    if length_normalization is not None and "loss_type" in trainer_section:
        needed = LENGTH_NORMALIZATION[length_normalization]
        if trainer_section["loss_type"] != needed:
            problems.append(
                f"trainer.loss_type={trainer_section['loss_type']!r} contradicts plugin {plugin!r} "
                f"option length_normalization: {length_normalization} (= loss_type {needed!r}); "
                "remove trainer.loss_type"
            )
    return problems


class PolicyLoss(Plugin):
    """Clipping on/off and the length normalisation of the GRPO surrogate, by name."""

    name = "policy-loss"
    description = (
        "the surrogate by name: clip on/off; length normalisation per-response (GRPO), "
        "constant (Dr. GRPO) or token-mean (DAPO)"
    )

    @dataclass
    class Options:
        clip: bool = True
        length_normalization: Literal["per-response", "constant", "token-mean"] | None = None

    @hookimpl
    def rlvr_adjust_grpo_config(self, grpo_kwargs, trainer_section):
        options = self.options
        problems = contradictions(trainer_section, options.clip, options.length_normalization, self.name)
        if problems:
            raise ConfigError(problems, source="trainer")
        grpo_kwargs.update(loss_settings(options.clip, options.length_normalization))
