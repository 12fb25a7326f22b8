"""The ``dr-grpo`` plugin: Dr. GRPO's advantage estimator and the TRL loss settings it needs.

Dr. GRPO (Liu et al. 2025) removes the two normalisations of GRPO that bias its gradient:

* the division of the group-centred reward by the group's standard deviation
  (question-level difficulty bias): ``A_i = r_i - mean(r)``;
* the division of each response's summed token loss by its own length ``|o_i|``
  (response-level length bias): the loss is divided by a constant instead, which is
  TRL's ``loss_type="dr_grpo"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlvr_plugins import Plugin, hookimpl
from rlvr_plugins.errors import ConfigError

REQUIRED_TRAINER_SETTINGS: dict[str, str] = {"loss_type": "dr_grpo", "scale_rewards": "none"}

# Values TRL's GRPOConfig treats as equal to the required ones (``scale_rewards=False`` means ``"none"``).
_EQUIVALENT: dict[str, tuple[Any, ...]] = {"loss_type": ("dr_grpo",), "scale_rewards": ("none", False)}

_WHY = {
    "loss_type": "the token losses are divided by a constant, not by each completion's length",
    "scale_rewards": "advantages are r - group mean, not divided by the group's standard deviation",
}


def trainer_contradictions(trainer_section: Mapping[str, Any], plugin: str = "dr-grpo") -> list[str]:
    """One message per key of the user's ``trainer:`` section that contradicts Dr. GRPO's settings.

    A key the user did not write, or wrote with the required value, is no contradiction.

    >>> trainer_contradictions({"loss_type": "dr_grpo", "learning_rate": 1e-6})
    []
    >>> trainer_contradictions({"scale_rewards": "group"})  # doctest: +ELLIPSIS
    ["trainer.scale_rewards='group' contradicts plugin 'dr-grpo', which needs scale_rewards='none' ..."]
    """
    problems = []
    for key, needed in REQUIRED_TRAINER_SETTINGS.items():
        if key not in trainer_section:
            continue
        value = trainer_section[key]
        if any(value is ok or (type(value) is type(ok) and value == ok) for ok in _EQUIVALENT[key]):
            continue
        problems.append(
            f"trainer.{key}={value!r} contradicts plugin {plugin!r}, which needs {key}={needed!r} "
            f"(Dr. GRPO: {_WHY[key]}); remove trainer.{key} or set it to {needed!r}"
        )
    return problems


class DrGRPO(Plugin):
    """``A_i = r_i - mean(r)`` per prompt group and TRL's constant-normalised ``dr_grpo`` loss."""

    name = "dr-grpo"
    trl_scale_rewards = REQUIRED_TRAINER_SETTINGS["scale_rewards"]  # the one place this plugin states it
    description = "Dr. GRPO: advantage r - group mean (no std division), loss divided by a constant (TRL dr_grpo)"

    @hookimpl
    def rlvr_compute_advantages(self, rewards, num_generations, valid):
        from rlvr_plugins.advantages import mean_baseline_advantages  # torch: when the hook runs

        return mean_baseline_advantages(rewards, valid, num_generations)

    @hookimpl
    def rlvr_adjust_grpo_config(self, grpo_kwargs, trainer_section):
        problems = trainer_contradictions(trainer_section, self.name)
        if problems:
            raise ConfigError(problems, source="trainer")
        grpo_kwargs.update(REQUIRED_TRAINER_SETTINGS)
