"""Two GRPO steps on a tiny model with ``kimi-length``: warm-up, the logged metric, the total reward."""

from __future__ import annotations

import math

import pytest

from rlvr_plugins import Plugin, hookimpl
from rlvr_plugins.manager import temporary_plugin

WEIGHT = 0.5


def has_digit(*, prompt, completion, example):
    return 1.0 if any(c.isdigit() for c in completion) else 0.0


class Observer(Plugin):
    """Records the completion lengths and what ``rlvr_on_rewards`` sees; contributes nothing."""

    name = "kimi-test-observer"

    def __init__(self, options=None):
        super().__init__(options)
        self.seen: list = []

    @hookimpl
    def rlvr_length_penalty(self, completion_lengths, step):
        self.seen.append(("lengths", step, completion_lengths.tolist()))

    @hookimpl
    def rlvr_on_rewards(self, rewards, rewards_per_func, reward_names, valid, num_generations, step):
        self.seen.append(
            (
                "rewards",
                step,
                rewards.tolist(),
                rewards_per_func.tolist(),
                list(reward_names),
                valid.tolist(),
                num_generations,
            )
        )


def length_reward(lengths, correct, G):
    """Kimi k1.5's formula per group of ``G``, in plain Python."""
    out = []
    for g in range(0, len(lengths), G):
        lo, hi = min(lengths[g : g + G]), max(lengths[g : g + G])
        for n, ok in zip(lengths[g : g + G], correct[g : g + G]):
            lam = 0.0 if hi == lo else 0.5 - (n - lo) / (hi - lo)
            out.append(lam if ok else min(0.0, lam))
    return out


@pytest.mark.slow
def test_length_reward_is_added_after_warmup_and_logged(tiny_trainer, reward_plugin):
    reward_plugin("kimi-test-correct", has_digit, isolated=False)
    plugins = {
        "kimi-test-correct": {},
        "kimi-test-observer": {},
        "kimi-length": {"weight": WEIGHT, "warmup_steps": 1, "correctness_reward": "kimi-test-correct"},
    }
    with temporary_plugin(Observer):
        trainer = tiny_trainer(plugins, max_completion_length=16)
    trainer.train()
    seen = trainer.plugin_set.get(Observer.name).seen

    lengths = [c for c in seen if c[0] == "lengths"]
    observed = [c for c in seen if c[0] == "rewards"]
    assert [c[1] for c in lengths] == [0, 1] and [c[1] for c in observed] == [0, 1]
    expected_means = []
    for (_, step, lens), (_, _, total, per_func, names, valid, G) in zip(lengths, observed, strict=True):
        assert names == ["kimi-test-correct"] and G == 4 and all(valid)
        correctness = [row[0] for row in per_func]
        bonus = length_reward(lens, [v >= 1.0 for v in correctness], G) if step >= 1 else [0.0] * len(lens)
        assert total == pytest.approx([r + WEIGHT * b for r, b in zip(correctness, bonus)], abs=1e-6)
        if step >= 1:
            expected_means.append(WEIGHT * sum(bonus) / len(bonus))
            assert any(b != 0 for b in bonus)  # the check is not vacuous: some lengths differ within a group
    logged = [h["penalties/kimi-length/mean"] for h in trainer.state.log_history if "penalties/kimi-length/mean" in h]
    assert logged == pytest.approx(expected_means, abs=1e-6)
    assert len(logged) == 1 and all(math.isfinite(x) for x in logged)
