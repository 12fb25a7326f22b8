"""Switching from TRL: ``RLVRTrainer`` takes ``GRPOTrainer``'s constructor (TRL reward functions beside the
plugins' rewards, ``plugins=`` by name), and Python and YAML build one GRPOConfig: ``RLVRTrainer(plugins=...,
args=GRPOConfig(**trainer))`` ends up with the GRPOConfig that ``rlvr train`` builds from the config, for every
config shipped in ``configs/``; a GRPOConfig that contradicts a plugin is refused naming the plugin, the field, the
given and the required value. Training with the new constructor: ``tests/compat/test_grpo_compat.py``.

No model is loaded: ``GRPOTrainer.__init__`` is replaced by a stub that stops with the arguments it was given, so
what is compared is exactly what ``RLVRTrainer.__init__`` hands to TRL.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from trl import GRPOConfig, GRPOTrainer

from rlvr_plugins import Plugin, hookimpl
from rlvr_plugins.errors import ConfigError, PluginConflictError, PluginError
from rlvr_plugins.manager import build_plugin_set, discover, temporary_plugin
from rlvr_plugins.rewards import TRLReward
from rlvr_plugins.testing import digit_share, reward_plugin_class
from rlvr_plugins.train.config import load_config
from rlvr_plugins.train.modeling import cpu_defaults
from rlvr_plugins.train.run import RUN_DEFAULTS, prepare
from rlvr_plugins.train.runfolder import output_dir
from rlvr_plugins.train.validate import run_config
from rlvr_plugins.trainer import RLVRTrainer, merged_reward_weights

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted(p for p in (REPO / "configs").rglob("*.yaml") if "accelerate" not in p.parts)
"""Every training config (``configs/accelerate/`` holds ``accelerate launch`` files, not training configs)."""


class Handed(Exception):
    """Raised by the stub in place of ``GRPOTrainer.__init__``: what RLVRTrainer handed to TRL."""

    def __init__(self, kwargs):
        super().__init__("GRPOTrainer.__init__ stub")
        self.kwargs = kwargs


@pytest.fixture
def handed_to_trl(monkeypatch):
    """``build(**kwargs)`` → the keyword arguments ``RLVRTrainer(**kwargs)`` passes to ``GRPOTrainer.__init__``."""

    def stub(self, **kwargs):
        raise Handed({**kwargs, "enabled_plugins": list(self.plugin_set.names)})

    monkeypatch.setattr(GRPOTrainer, "__init__", stub)

    def build(**kwargs):
        with pytest.raises(Handed) as handed:
            RLVRTrainer("unused-model", **kwargs)
        return handed.value.kwargs

    return build


def init_fields(args: GRPOConfig) -> dict:
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(args) if f.init}


def python_args(config) -> GRPOConfig:
    """What a script writes: a GRPOConfig from the config's ``trainer:`` section (with the run's output_dir, seed,
    and ``rlvr train``'s own defaults, which are not the plugins')."""
    kwargs = {**RUN_DEFAULTS, **dict(run_config(config).trainer), "output_dir": str(output_dir(config))}
    kwargs.setdefault("seed", run_config(config).seed)
    return GRPOConfig(**cpu_defaults(kwargs))


def test_every_training_config_is_compared():
    names = {p.relative_to(REPO / "configs").as_posix() for p in CONFIGS}
    assert {"demo.yaml", "dr_grpo.yaml", "cpu/kimi.yaml", "homework/rloo.yaml"} <= names and len(names) >= 15


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.relative_to(REPO / "configs").as_posix())
def test_python_and_yaml_give_the_same_grpo_config(path, handed_to_trl, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative output_dirs land here
    config = load_config(path, need_data=False, need_model=False)
    prepared = prepare(config)
    from_yaml = handed_to_trl(plugin_set=prepared.plugin_set, args=prepared.grpo_args)["args"]
    from_python = handed_to_trl(plugins=config.get("plugins") or {}, args=python_args(config))["args"]
    yaml_fields, python_fields = init_fields(from_yaml), init_fields(from_python)
    assert {k: v for k, v in python_fields.items() if yaml_fields[k] != v} == {}
    if "dr-grpo" in (config.get("plugins") or {}):  # the comparison means something: the plugin did adjust
        assert (from_python.loss_type, python_args(config).loss_type) == ("dr_grpo", "dapo")


@pytest.mark.parametrize(
    ("plugins", "given", "required"),
    [
        ({"dr-grpo": {}}, {"loss_type": "bnpo"}, "'dr_grpo'"),
        ({"policy-loss": {"length_normalization": "constant"}}, {"loss_type": "grpo"}, "'dr_grpo'"),
    ],
)
def test_a_grpo_config_contradicting_a_plugin_is_refused_naming_plugin_field_and_values(
    plugins, given, required, handed_to_trl, tmp_path
):
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, **given)
    with pytest.raises((ConfigError, PluginError)) as error:
        handed_to_trl(plugins=plugins, args=args)
    message = str(error.value)
    (field, value), (plugin,) = next(iter(given.items())), plugins
    assert plugin in message and field in message and repr(value) in message and required in message


def completion_length(completions, **kwargs):
    return [float(len(c)) for c in completions]


def test_a_field_left_at_its_default_is_set_by_the_plugin(handed_to_trl, tmp_path):
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, learning_rate=1e-5)
    handed = handed_to_trl(plugins={"dr-grpo": {}}, args=args, reward_funcs=[completion_length])
    assert handed["args"] is args
    assert (args.loss_type, args.scale_rewards, args.learning_rate) == ("dr_grpo", "none", 1e-5)


# -- GRPOTrainer's constructor, plugins by name ------------------------------------------------------------------


DigitReward = reward_plugin_class("digit-reward", digit_share, weight=0.5, isolated=False)


class SeesRewardNames(Plugin):
    name = "sees-reward-names"
    seen: list = []

    @hookimpl
    def rlvr_validate_run(self, reward_names):
        SeesRewardNames.seen.append(list(reward_names))


@pytest.fixture
def digit_reward():
    with temporary_plugin(DigitReward), temporary_plugin(SeesRewardNames):
        SeesRewardNames.seen = []
        yield


def test_trl_functions_come_first_then_the_plugins_rewards_with_their_weights(digit_reward, handed_to_trl, tmp_path):
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, reward_weights=[2.0])
    handed = handed_to_trl(
        reward_funcs=completion_length, args=args, plugins={"digit-reward": {}, "sees-reward-names": {}}
    )
    first, second = handed["reward_funcs"]
    assert first is completion_length and isinstance(second, TRLReward) and second.__name__ == "digit-reward"
    assert args.reward_weights == [2.0, 0.5]
    assert handed["reward_processing_classes"] == [None, None]
    assert SeesRewardNames.seen == [["completion_length", "digit-reward"]]  # rlvr_validate_run sees both kinds


def test_positional_arguments_mean_what_they_mean_for_grpo_trainer(handed_to_trl, monkeypatch, tmp_path):
    args, dataset = GRPOConfig(output_dir=str(tmp_path), use_cpu=True), object()
    with pytest.raises(Handed) as handed:
        RLVRTrainer("m", [completion_length], args, dataset)
    assert handed.value.kwargs["train_dataset"] is dataset and handed.value.kwargs["args"] is args


def test_plugins_and_plugin_set_together_is_an_error_naming_both(handed_to_trl):
    with pytest.raises(TypeError, match=r"plugins=.*plugin_set=.*not both"):
        handed_to_trl(plugins={}, plugin_set=build_plugin_set({}), reward_funcs=[completion_length])


def test_a_trl_function_named_like_a_plugin_reward_is_refused_naming_the_plugin(digit_reward, handed_to_trl, tmp_path):
    def same_name(completions, **kwargs):
        return [0.0] * len(completions)

    same_name.__name__ = "digit-reward"
    with pytest.raises(
        PluginConflictError,
        match="'digit-reward' is both a function of reward_funcs and a reward of plugin 'digit-reward'",
    ):
        handed_to_trl(
            reward_funcs=[same_name], plugins={"digit-reward": {}}, args=GRPOConfig(str(tmp_path), use_cpu=True)
        )


@pytest.mark.parametrize(
    ("given", "trl_count", "plugin_weights", "expected"),
    [
        (None, 2, [0.5], [1.0, 1.0, 0.5]),
        ([2.0, 3.0], 2, [], [2.0, 3.0]),
        ([2.0], 1, [0.5], [2.0, 0.5]),
        ([2.0, 0.5], 1, [0.5], [2.0, 0.5]),  # a GRPOConfig a trainer already completed
        ([0.5], 0, [0.5], [0.5]),
    ],
)
def test_reward_weights_weigh_the_trl_functions_and_the_plugins_weights_follow(
    given, trl_count, plugin_weights, expected
):
    assert merged_reward_weights(given, trl_count, plugin_weights) == expected


def test_reward_weights_of_another_length_are_trls_value_error_then_ours():
    with pytest.raises(
        ValueError, match=r"^Number of reward weights \(3\) must match number of reward functions \(1\); RLVRTrainer"
    ):
        merged_reward_weights([1.0, 2.0, 3.0], 1, [0.5])
    with pytest.raises(PluginError, match=r"reward_weights=\[2.0\] contradicts the plugins' weights \[0.5\]"):
        merged_reward_weights([2.0], 0, [0.5])


def test_plugins_see_trls_names_of_reward_models_and_functions(digit_reward, handed_to_trl, tmp_path):
    from compat.stand_ins import chat_tokenizer, tiny_reward_model

    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True)
    model = tiny_reward_model(chat_tokenizer())  # its id: local/tiny-reward-model
    handed = handed_to_trl(
        reward_funcs=["org/some-rm", model, completion_length], args=args, plugins={"sees-reward-names": {}}
    )
    assert SeesRewardNames.seen == [["some-rm", "tiny-reward-model", "completion_length"]]
    assert handed["reward_funcs"][:2] == ["org/some-rm", model]  # TRL loads the id itself
    assert args.reward_weights == [1.0, 1.0, 1.0]


# -- plugins= with every installed plugin --------------------------------------------------------------------------


def needed_options(name: str) -> dict:
    """Options without which a plugin cannot be enabled (a model, a reward to read), as a script would give them."""
    if name == "judge-equivalence":
        return {"model": "a-judge"}  # loaded at the first score, never here
    if name in ("cosine-length", "prime-length"):
        return {"correctness_reward": "r1-accuracy"}  # required: the reward that says what is correct
    if name == "reward-model":
        from compat.stand_ins import chat_tokenizer, tiny_reward_model

        tokenizer = chat_tokenizer()
        return {"model": tiny_reward_model(tokenizer), "processing_class": tokenizer}
    return {}


@pytest.mark.parametrize("name", sorted(discover()))
def test_plugins_by_name_hand_trl_what_the_built_plugin_set_hands_it(name, handed_to_trl, tmp_path):
    """Every installed plugin, enabled by name from Python (beside r1-accuracy, unless it replaces it), reaches TRL
    exactly as the plugin set ``rlvr train`` builds from the same mapping: the same reward functions, weights and
    GRPOConfig."""
    options = needed_options(name)
    plugins = {name: options} if name == "judge-equivalence" else {"r1-accuracy": {}, name: options}

    def args():
        return GRPOConfig(output_dir=str(tmp_path), use_cpu=True, num_generations=4, per_device_train_batch_size=4)

    by_name = handed_to_trl(plugins=plugins, args=args())
    built = handed_to_trl(plugin_set=build_plugin_set(plugins), args=args())
    assert [f.__name__ for f in by_name["reward_funcs"]] == [f.__name__ for f in built["reward_funcs"]]
    assert init_fields(by_name["args"]) == init_fields(built["args"])
    assert by_name["enabled_plugins"] == built["enabled_plugins"] and name in by_name["enabled_plugins"]
