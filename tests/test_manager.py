"""Plugin discovery, enabling, options, and every start-up error naming its culprit."""

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
import torch

from rlvr_plugins import Plugin, RewardFunction, hookimpl, manager
from rlvr_plugins.errors import (
    ConfigError,
    PluginConflictError,
    PluginImportError,
    PluginOptionError,
    PluginValidationError,
    UnknownPluginError,
)
from rlvr_plugins.manager import PluginEntry, build_plugin_set, temporary_plugin

REPO = Path(__file__).resolve().parents[1]


class HalfEstimator(Plugin):
    name = "half-estimator"

    @hookimpl
    def rlvr_compute_advantages(self, rewards):
        return rewards / 2


class OtherEstimator(Plugin):
    name = "other-estimator"

    @hookimpl
    def rlvr_compute_advantages(self, rewards):
        return rewards


class Typed(Plugin):
    name = "typed"

    @dataclass
    class Options:
        weight: float = 1.0
        warmup_steps: int = 0
        mode: Literal["a", "b"] = "a"
        target: str | None = None


def constant_one(*, prompt, completion, example):
    return 1.0


class RewardA(Plugin):
    name = "reward-a"

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(RewardFunction("shared-name", constant_one))


class RewardB(Plugin):
    name = "reward-b"

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(RewardFunction("shared-name", constant_one))


def test_defaults_answer_the_one_winner_hooks():
    ps = build_plugin_set({})
    assert ps.names == ["grpo", "repeat-sampler", "plain-template"]
    assert ps.winner("rlvr_compute_advantages") == "grpo"
    assert all(p.default for p in ps.enabled)


def test_enabled_estimator_replaces_the_default_and_is_called():
    with temporary_plugin(HalfEstimator):
        ps = build_plugin_set({"half-estimator": {}})
    assert "grpo" not in ps.names
    out = ps.one(
        "rlvr_compute_advantages",
        rewards=torch.tensor([2.0, 4.0]),
        num_generations=2,
        valid=torch.tensor([True, True]),
        rewards_per_func=None,
        reward_names=[],
    )
    assert out.tolist() == [1.0, 2.0]


def test_builtin_rloo_is_enabled_by_name():
    ps = build_plugin_set({"rloo": {}})
    assert ps.winner("rlvr_compute_advantages") == "rloo"


def test_unknown_plugin_lists_installed():
    with pytest.raises(UnknownPluginError) as exc:
        build_plugin_set({"r1-acuracy": {}})
    assert "'r1-acuracy'" in str(exc.value) and "grpo" in str(exc.value) and "rloo" in str(exc.value)
    assert str(exc.value).endswith("'r1-acuracy': did you mean 'r1-accuracy'?")
    assert "pip install" not in str(exc.value)


def test_unknown_plugin_hints_pip_only_for_a_name_a_known_distribution_provides():
    from rlvr_plugins.errors import unknown_plugin_hint

    assert (
        unknown_plugin_hint("code-tests", ["grpo"])
        == "'code-tests' is provided by rlvr-code: pip install rlvr-code (or pip install -e plugins/rlvr-code)."
    )
    assert (
        unknown_plugin_hint("zzzz", ["grpo", "rloo"])
        == "'zzzz': no installed or known plugin has a similar name; check the spelling (rlvr plugins lists them)."
    )


def test_known_distributions_match_the_plugins_folder():
    import tomllib

    from rlvr_plugins.errors import KNOWN_DISTRIBUTIONS

    found = {}
    for path in sorted((REPO / "plugins").glob("*/pyproject.toml")):
        project = tomllib.loads(path.read_text(encoding="utf-8"))["project"]
        found[project["name"]] = tuple(project["entry-points"]["rlvr_plugins"])
    assert found == KNOWN_DISTRIBUTIONS


def test_two_one_winner_plugins_conflict_naming_both():
    with temporary_plugin(HalfEstimator), temporary_plugin(OtherEstimator):
        with pytest.raises(PluginConflictError) as exc:
            build_plugin_set({"half-estimator": {}, "other-estimator": {}})
    msg = str(exc.value)
    assert "half-estimator" in msg and "other-estimator" in msg and "rlvr_compute_advantages" in msg


def test_builtin_estimators_conflict_too():
    with pytest.raises(PluginConflictError, match="'grpo', 'rloo'"):
        build_plugin_set({"grpo": {}, "rloo": {}})


def test_unknown_and_ill_typed_options_name_plugin_option_and_valid_ones():
    with temporary_plugin(Typed):
        with pytest.raises(PluginOptionError) as exc:
            build_plugin_set({"typed": {"wieght": 2, "warmup_steps": "ten", "mode": "c"}})
        opts = build_plugin_set({"typed": {"weight": 2, "target": "en"}}).get("typed").options
    msg = str(exc.value)
    assert "plugin 'typed'" in msg
    assert "unknown option 'wieght' (did you mean 'weight'?)" in msg
    assert "option 'warmup_steps' must be int, got 'ten'" in msg
    assert "option 'mode' must be one of 'a', 'b'" in msg
    assert "weight (float, default 1.0)" in msg
    assert opts.weight == 2.0 and isinstance(opts.weight, float) and opts.target == "en"


def test_options_must_be_a_mapping():
    with temporary_plugin(Typed):
        with pytest.raises(PluginOptionError, match="options must be a mapping"):
            build_plugin_set({"typed": [1, 2]})


def test_plugin_without_options_rejects_any():
    with pytest.raises(PluginOptionError, match="unknown option 'x'.*takes no options"):
        build_plugin_set({"rloo": {"x": 1}})


def test_misspelled_hook_fails_at_registration():
    class Misspelled(Plugin):
        name = "misspelled"

        @hookimpl
        def rlvr_reward_function(self, register):
            pass

    with temporary_plugin(Misspelled):
        with pytest.raises(PluginValidationError) as exc:
            build_plugin_set({"misspelled": {}})
    assert "rlvr_reward_function matches no hook spec" in str(exc.value)
    assert "did you mean 'rlvr_reward_functions'" in str(exc.value)


def test_undecorated_hook_is_an_error():
    class Undecorated(Plugin):
        name = "undecorated"

        def rlvr_reward_functions(self, register):
            pass

    with temporary_plugin(Undecorated):
        with pytest.raises(PluginValidationError, match="not decorated with @rlvr_plugins.hookimpl"):
            build_plugin_set({"undecorated": {}})


def test_hook_with_unknown_argument_is_an_error():
    class BadArgs(Plugin):
        name = "bad-args"

        @hookimpl
        def rlvr_reward_functions(self, register, nonsense):
            pass

    with temporary_plugin(BadArgs):
        with pytest.raises(PluginValidationError, match="(?s)bad-args.*nonsense"):
            build_plugin_set({"bad-args": {}})


def test_misspelled_hook_argument_gets_our_message_with_the_specs_arguments():
    class Typo(Plugin):
        name = "typo"

        @hookimpl
        def rlvr_length_penalty(self, completion_length, step):
            return None

    with temporary_plugin(Typo):
        with pytest.raises(PluginValidationError) as exc:
            build_plugin_set({"typo": {}})
    assert str(exc.value) == (
        "plugin 'typo': test_misspelled_hook_argument_gets_our_message_with_the_specs_arguments.<locals>.Typo."
        "rlvr_length_penalty takes argument(s) 'completion_length' (did you mean 'completion_lengths'?) that "
        "rlvr_length_penalty does not pass; it passes (take any of them, by name): completion_lengths, "
        "num_generations, rewards_per_func, reward_names, step"
    )


def test_rlvr_plugins_warns_about_a_plugin_that_implements_no_hook_and_reports_a_misspelled_one():
    class Idle(Plugin):
        name = "idle"

        def length_penalty(self, completion_lengths):
            return None

    class Misspelled(Plugin):
        name = "misspelled"

        @hookimpl
        def rlvr_lenght_penalty(self, completion_lengths):
            return None

    with temporary_plugin(Idle), temporary_plugin(Misspelled):
        rows = {r["name"]: r for r in manager.list_plugins()}
    assert rows["idle"]["hooks"] == [] and "implements no hook" in rows["idle"]["warning"]
    assert (
        "rlvr_lenght_penalty matches no hook spec; did you mean 'rlvr_length_penalty'?" in rows["misspelled"]["error"]
    )
    assert "warning" not in rows["grpo"] and "error" not in rows["grpo"]


def test_import_failure_names_plugin_and_chains(monkeypatch):
    monkeypatch.setitem(
        manager._temporary, "broken", PluginEntry("broken", "rlvr_no_such_module.sub:Plugin", "rlvr-broken", "1.0")
    )
    with pytest.raises(PluginImportError) as exc:
        build_plugin_set({"broken": {}})
    assert "plugin 'broken' (distribution rlvr-broken) failed to import" in str(exc.value)
    assert isinstance(exc.value.__cause__, ModuleNotFoundError)


def test_duplicate_plugin_name_from_two_distributions(monkeypatch):
    monkeypatch.setitem(manager._temporary, "rloo", PluginEntry("rloo", "x:Y", "rlvr-impostor", "1.0"))
    with pytest.raises(PluginValidationError, match="duplicate plugin name 'rloo'.*rlvr-plugins.*rlvr-impostor"):
        build_plugin_set({})


def test_entry_point_class_must_match_its_name(monkeypatch):
    monkeypatch.setitem(manager._temporary, "alias", PluginEntry("alias", HalfEstimator, "d", "1"))
    with pytest.raises(PluginValidationError, match="declares name 'half-estimator'"):
        build_plugin_set({"alias": {}})


def test_two_rewards_with_one_name_conflict():
    with temporary_plugin(RewardA), temporary_plugin(RewardB):
        ps = build_plugin_set({"reward-a": {}, "reward-b": {}})
        with pytest.raises(PluginConflictError, match="registered by plugin 'reward-a' and by plugin 'reward-b'"):
            ps.reward_functions()


def test_register_rejects_non_reward_objects():
    class Wrong(Plugin):
        name = "wrong"

        @hookimpl
        def rlvr_reward_functions(self, register):
            register(constant_one)

    with temporary_plugin(Wrong):
        ps = build_plugin_set({"wrong": {}})
        with pytest.raises(PluginValidationError, match="plugin 'wrong' registered function"):
            ps.reward_functions()


def test_several_problems_are_reported_together():
    with temporary_plugin(Typed):
        with pytest.raises(ConfigError) as exc:
            build_plugin_set({"typed": {"bad": 1}, "rloo": {"also_bad": 2}})
    assert len(exc.value.problems) == 2


def test_list_plugins_reports_hooks_versions_and_enabled():
    rows = {r["name"]: r for r in manager.list_plugins({"rloo"})}
    assert rows["rloo"]["enabled"] is True and rows["grpo"]["enabled"] is False
    assert rows["rloo"]["hooks"] == ["rlvr_compute_advantages"]
    assert rows["repeat-sampler"]["hooks"] == ["rlvr_pool_prompts", "rlvr_train_sampler"]
    assert rows["grpo"]["distribution"] == "rlvr-plugins"


def test_call_attributes_results_to_plugins():
    class PenaltyA(Plugin):
        name = "penalty-a"

        @hookimpl
        def rlvr_length_penalty(self, completion_lengths):
            return completion_lengths * 0.0 + 1

    class PenaltyB(Plugin):
        name = "penalty-b"

        @hookimpl
        def rlvr_length_penalty(self, step):
            return None

    with temporary_plugin(PenaltyA), temporary_plugin(PenaltyB):
        ps = build_plugin_set({"penalty-a": {}, "penalty-b": {}})
    out = dict(
        ps.call(
            "rlvr_length_penalty",
            completion_lengths=torch.tensor([3, 4]),
            num_generations=2,
            rewards_per_func=None,
            reward_names=[],
            step=0,
        )
    )
    assert out["penalty-a"].tolist() == [1, 1] and out["penalty-b"] is None
