"""The pytest plugin ``rlvr_plugins.testing.pytest_plugin``: its fixtures, and what it does around every test."""

from __future__ import annotations

import json
import os

import pytest

from rlvr_plugins.errors import UnknownPluginError
from rlvr_plugins.manager import build_plugin_set
from rlvr_plugins.testing import digit_share
from rlvr_plugins.testing.pytest_plugin import OFFLINE_ENV

pytest_plugins = ["pytester"]


def test_the_plugin_is_loaded_from_its_entry_point(pytestconfig):
    assert pytestconfig.pluginmanager.has_plugin("rlvr_plugins")
    assert all(key in os.environ for key in OFFLINE_ENV)


def test_reward_plugin_registers_one_reward_for_the_test(reward_plugin):
    cls = reward_plugin("digits", digit_share, reward_name="digit-share", weight=0.5, isolated=False)
    [(owner, reward)] = build_plugin_set({"digits": {}}).reward_functions()
    assert (cls.name, owner, reward.name, reward.weight, reward.isolated) == (
        "digits",
        "digits",
        "digit-share",
        0.5,
        False,
    )
    assert reward.fn is digit_share


def test_reward_plugin_is_unregistered_after_the_test(pytester):
    pytester.makepyfile("""
        import pytest
        from rlvr_plugins.errors import UnknownPluginError
        from rlvr_plugins.manager import build_plugin_set
        from rlvr_plugins.testing import digit_share

        def test_registers(reward_plugin):
            reward_plugin("digits", digit_share)
            assert build_plugin_set({"digits": {}}).names[0] == "digits"

        def test_gone_in_the_next_test():
            with pytest.raises(UnknownPluginError, match="'digits'"):
                build_plugin_set({"digits": {}})
    """)
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)
    with pytest.raises(UnknownPluginError):
        build_plugin_set({"digits": {}})


def test_reward_engines_left_open_are_closed_after_their_test(pytester):
    pytester.makepyfile("""
        import pytest
        from rlvr_plugins.engine import RewardEngine

        LEFT_OPEN = []

        def test_leaves_two_engines_open():
            LEFT_OPEN.extend([RewardEngine(in_process=True), RewardEngine(num_workers=1)])
            assert LEFT_OPEN[0].score("r", lambda **item: 1.0, [{}]).values == [1.0]

        def test_they_were_closed():
            for engine in LEFT_OPEN:
                with pytest.raises(RuntimeError, match="RewardEngine is closed"):
                    engine.score("r", lambda **item: 1.0, [])
    """)
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_an_engine_that_an_older_engines_object_builds_stays_open_for_the_next_test(pytester):
    pytester.makepyfile("""
        import pytest
        from rlvr_plugins import RewardFunction
        from rlvr_plugins.rewards import Engines

        REWARD = RewardFunction("r", lambda **item: 1.0, isolated=False)
        ITEMS = [{"prompt": "p", "completion": "c", "example": {}}]
        MADE_HERE = []

        @pytest.fixture(scope="module")
        def engines():
            engines = Engines(in_process=True)
            yield engines
            engines.close()

        def test_builds_its_engine_lazily(engines):
            assert engines.score(REWARD, ITEMS).values == [1.0]
            MADE_HERE.append(Engines(in_process=True))
            assert MADE_HERE[0].score(REWARD, ITEMS).values == [1.0]

        def test_the_engine_is_still_open(engines):
            assert engines.score(REWARD, ITEMS).values == [1.0]
            with pytest.raises(RuntimeError, match="RewardEngine is closed"):
                MADE_HERE[0].score(REWARD, ITEMS)
    """)
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_rlvr_cli_runs_a_command_in_process(rlvr_cli):
    result = rlvr_cli("plugins", "--json")
    assert result.exit_code == 0 and result.err == ""
    assert "grpo" in {row["name"] for row in json.loads(result.out)}


def test_rlvr_cli_gives_an_argparse_error_its_exit_code(rlvr_cli):
    result = rlvr_cli("no-such-command")
    assert result.exit_code == 2 and result.out == "" and "invalid choice: 'no-such-command'" in result.err


def test_tiny_trainer_builds_a_two_step_trainer_on_the_enabled_plugins(tiny_trainer, tokenizer, reward_plugin):
    reward_plugin("digits", digit_share, isolated=False)
    trainer = tiny_trainer({"digits": {}}, max_steps=1)
    assert trainer.args.max_steps == 1 and trainer.args.num_generations == 4
    assert trainer.reward_func_names == ["digits"] and len(trainer.train_dataset) == 16
    assert trainer.processing_class.get_vocab() == tokenizer.get_vocab()
