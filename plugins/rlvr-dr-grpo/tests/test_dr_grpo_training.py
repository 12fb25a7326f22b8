"""Two GRPO steps on a tiny model with ``dr-grpo`` enabled: TRL's loss type, the advantages used, the loss."""

from __future__ import annotations

import pytest

from rlvr_plugins import Plugin, hookimpl
from rlvr_plugins.manager import temporary_plugin
from rlvr_plugins.testing import digit_share


class Observer(Plugin):
    """Records the completion lengths and what ``rlvr_on_rewards`` sees; changes nothing."""

    name = "dr-grpo-test-observer"

    def __init__(self, options=None):
        super().__init__(options)
        self.seen: list = []

    @hookimpl
    def rlvr_length_penalty(self, completion_lengths, step):
        self.seen.append(("lengths", step, completion_lengths.tolist()))

    @hookimpl
    def rlvr_on_rewards(self, rewards, advantages, valid, num_generations, step):
        self.seen.append(("rewards", step, rewards.tolist(), advantages.tolist(), valid.tolist(), num_generations))


def centred(rewards, G):
    """``r_i - mean`` of each group of ``G``, computed in plain Python; equal-reward groups give exactly 0."""
    out = []
    for g in range(0, len(rewards), G):
        group = rewards[g : g + G]
        mean = sum(group) / G
        out += [0.0] * G if max(group) == min(group) else [r - mean for r in group]
    return out


@pytest.mark.slow
def test_two_steps_use_dr_grpo_loss_and_mean_baseline_advantages(tiny_trainer, reward_plugin):
    reward_plugin("dr-grpo-test-digits", digit_share, reward_name="digit_share", isolated=False)
    with temporary_plugin(Observer):
        trainer = tiny_trainer(
            {"dr-grpo-test-digits": {}, "dr-grpo-test-observer": {}, "dr-grpo": {}}, max_completion_length=16
        )
    assert trainer.args.loss_type == "dr_grpo" and trainer.loss_type == "dr_grpo"
    assert trainer.args.scale_rewards == "none"
    trainer.train()
    seen = trainer.plugin_set.get(Observer.name).seen

    lengths = [c for c in seen if c[0] == "lengths"]
    observed = [c for c in seen if c[0] == "rewards"]
    assert [c[1] for c in observed] == [0, 1]
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 2
    batch, max_len = trainer.args.per_device_train_batch_size, trainer.args.max_completion_length
    for (_, _, lens), (_, _, rewards, adv, valid, G), loss in zip(lengths, observed, losses, strict=True):
        assert G == 4 and all(valid)
        assert adv == pytest.approx(centred(rewards, G), abs=1e-6)
        for g in range(0, len(adv), G):
            if max(rewards[g : g + G]) == min(rewards[g : g + G]):
                assert adv[g : g + G] == [0.0] * G
        # on-policy, beta = 0: every token's loss is -A_i, summed and divided by B * max_completion_length
        assert loss == pytest.approx(-sum(a * n for a, n in zip(adv, lens)) / (batch * max_len), abs=1e-6)
    assert any(a != 0 for c in observed for a in c[3])
    # the loss check tells dr_grpo from dapo (which divides by the number of tokens) only if some completion is short
    assert any(sum(c[2]) != batch * max_len for c in lengths)
