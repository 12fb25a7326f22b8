"""``rlvr_adjust_grpo_config``: Dr. GRPO's loss settings are applied, and contradictions refused by name."""

from __future__ import annotations

import pytest

from rlvr_plugins.errors import ConfigError, PluginConflictError
from rlvr_plugins.manager import build_plugin_set
from rlvr_plugins.train.run import grpo_kwargs, prepare


def config(**trainer):
    return {"output_dir": "unused", "plugins": {"r1-format": {}, "dr-grpo": {}}, "trainer": trainer}


def test_entry_point_is_installed_and_replaces_the_default_estimator():
    ps = build_plugin_set({"dr-grpo": {}})
    assert ps.winner("rlvr_compute_advantages") == "dr-grpo"
    assert "grpo" not in ps.names
    entry = next(p.entry for p in ps.enabled if p.name == "dr-grpo")
    assert entry.distribution == "rlvr-dr-grpo"


def test_sets_loss_type_and_scale_rewards():
    kwargs = grpo_kwargs(config(learning_rate=1e-6), build_plugin_set({"dr-grpo": {}}))
    assert kwargs["loss_type"] == "dr_grpo" and kwargs["scale_rewards"] == "none"
    assert kwargs["learning_rate"] == 1e-6


def test_grpo_config_built_by_prepare_has_the_settings():
    args = prepare(config(max_steps=1, use_cpu=True)).grpo_args
    assert args.loss_type == "dr_grpo" and args.scale_rewards == "none"


@pytest.mark.parametrize(
    "trainer",
    [
        {"loss_type": "dr_grpo"},
        {"scale_rewards": "none"},
        {"scale_rewards": False},
        {"loss_type": "dr_grpo", "scale_rewards": "none"},
    ],
)
def test_the_same_value_written_explicitly_is_fine(trainer):
    kwargs = grpo_kwargs(config(**trainer), build_plugin_set({"dr-grpo": {}}))
    assert kwargs["loss_type"] == "dr_grpo" and kwargs["scale_rewards"] == "none"


def test_contradicting_loss_type_names_key_value_and_requirement():
    with pytest.raises(ConfigError) as info:
        prepare(config(loss_type="dapo"))
    assert info.value.problems == [
        "trainer.loss_type='dapo' contradicts plugin 'dr-grpo', which needs loss_type='dr_grpo' "
        "(Dr. GRPO: the token losses are divided by a constant, not by each completion's length); "
        "remove trainer.loss_type or set it to 'dr_grpo'"
    ]


@pytest.mark.parametrize("value", ["group", "batch", True])
def test_contradicting_scale_rewards_is_refused(value):
    with pytest.raises(
        ConfigError,
        match=rf"trainer.scale_rewards={value!r} contradicts plugin 'dr-grpo', "
        r"which needs scale_rewards='none'",
    ):
        prepare(config(scale_rewards=value))


def test_both_contradictions_are_reported_at_once():
    with pytest.raises(ConfigError) as info:
        prepare(config(loss_type="grpo", scale_rewards="group"))
    assert [p.split(" contradicts")[0] for p in info.value.problems] == [
        "trainer.loss_type='grpo'",
        "trainer.scale_rewards='group'",
    ]


def test_enabling_another_estimator_too_is_a_conflict():
    with pytest.raises(PluginConflictError, match="'dr-grpo', 'rloo'"):
        build_plugin_set({"dr-grpo": {}, "rloo": {}})


def test_takes_no_options():
    with pytest.raises(Exception, match="unknown option 'eps'"):
        build_plugin_set({"dr-grpo": {"eps": 1e-4}})
