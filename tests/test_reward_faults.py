"""Rewards that hang, raise or return garbage during training: masked and counted, or a clear error."""

from __future__ import annotations

import math
import time

import pytest
from datasets import Dataset

from fault_rewards import always_raises, half_failing, hang_on_odd_rows, returns_nan, returns_text
from rlvr_plugins import Plugin, hookimpl
from rlvr_plugins.engine import RewardContractError, RewardPluginFailing
from rlvr_plugins.manager import build_plugin_set, temporary_plugin
from rlvr_plugins.rewards import Engines
from rlvr_plugins.testing import grpo_args, reward_plugin_class, tiny_model, tiny_rows
from rlvr_plugins.trainer import RLVRTrainer


class Observer(Plugin):
    name = "observer"

    def __init__(self, options=None):
        super().__init__(options)
        self.seen: list = []

    @hookimpl
    def rlvr_on_rewards(self, example_indices, rewards, advantages, valid):
        self.seen.append((list(example_indices), rewards.clone(), advantages.clone(), valid.clone()))


def trainer_for(tmp_path, tokenizer, fn, **engine):
    plugin = reward_plugin_class(f"fault-{fn.__name__}", fn, reward_name=fn.__name__)
    with temporary_plugin(plugin), temporary_plugin(Observer):
        ps = build_plugin_set({plugin.name: {}, "observer": {}})
    engines = Engines(num_workers=2, timeout_s=engine.pop("timeout_s", 2.0), **engine)
    return RLVRTrainer(
        plugin_set=ps,
        engines=engines,
        model=tiny_model(tokenizer),
        args=grpo_args(tmp_path),
        train_dataset=Dataset.from_list(tiny_rows()),
        processing_class=tokenizer,
    )


@pytest.mark.slow
def test_hanging_reward_is_killed_masked_and_counted(tmp_path, tokenizer):
    trainer = trainer_for(tmp_path, tokenizer, hang_on_odd_rows, timeout_s=1.0)
    started = time.perf_counter()
    trainer.train()
    assert time.perf_counter() - started < 120
    seen = trainer.plugin_set.get("observer").seen
    for indices, rewards, adv, valid in seen:
        for i, idx in enumerate(indices):
            assert bool(valid[i]) == (idx % 2 == 0)
            if idx % 2:
                assert math.isnan(rewards[i]) and adv[i] == 0
    failed = [
        h["rlvr/failed/hang_on_odd_rows"] for h in trainer.state.log_history if "rlvr/failed/hang_on_odd_rows" in h
    ]
    odd = [sum(idx % 2 for idx in s[0]) for s in seen]
    assert failed == odd and sum(odd) > 0


def test_reward_failing_every_call_stops_the_run(tmp_path, tokenizer):
    trainer = trainer_for(tmp_path, tokenizer, always_raises, max_consecutive_failures=5)
    with pytest.raises(RewardPluginFailing, match="always_raises"):
        trainer.train()


@pytest.mark.parametrize("fn, message", [(returns_text, "'0.5'"), (returns_nan, "nan")])
def test_reward_returning_garbage_is_an_error_naming_it(tmp_path, tokenizer, fn, message):
    trainer = trainer_for(tmp_path, tokenizer, fn)
    with pytest.raises(RewardContractError) as exc:
        trainer.train()
    assert fn.__name__ in str(exc.value) and message in str(exc.value)


def test_engines_count_each_rewards_failures_for_the_summary(caplog):
    from rlvr_plugins import RewardFunction
    from rlvr_plugins.rewards import Engines
    from rlvr_plugins.train.run import failure_line

    engines = Engines(in_process=True)
    items = [{"prompt": "p", "completion": "c", "example": {"i": i}} for i in range(5)]
    engines.score(RewardFunction("half", half_failing, isolated=False), items)
    engines.score(RewardFunction("half", half_failing, isolated=False), items[:2])
    engines.score(RewardFunction("fine", lambda **kw: 0.5, isolated=False), items)
    assert engines.failures() == {"half": {"items": 7, "failed": 3}, "fine": {"items": 5, "failed": 0}}
    assert (
        failure_line(engines.failures()) == "reward failures (no score, masked): half 3 of 7 items, fine 0 of 5 items"
    )
    assert "reward half failed on item 1: ValueError: odd row 1" in caplog.text
    engines.close()


@pytest.mark.parametrize("in_process", [True, False])
def test_a_failing_items_traceback_is_logged_at_debug_from_where_the_reward_ran(caplog, in_process):
    import logging

    from rlvr_plugins import RewardFunction
    from rlvr_plugins.rewards import Engines

    caplog.set_level(logging.DEBUG, logger="rlvr_plugins.engine.traceback")
    engines = Engines(in_process=in_process, num_workers=1)
    items = [{"prompt": "p", "completion": "c", "example": {"i": i}} for i in range(2)]
    try:
        result = engines.score(RewardFunction("half", half_failing), items)
    finally:
        engines.close()
    assert result.errors == [None, "ValueError: odd row 1"]
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith("reward half failed on item 1: ValueError: odd row 1; item: ")
    [trace] = [r.getMessage() for r in caplog.records if r.name == "rlvr_plugins.engine.traceback"]
    assert trace.startswith("reward half, item 1: Traceback (most recent call last):")
    assert 'in half_failing\n    raise ValueError(f"odd row {example[\'i\']}")' in trace
    assert trace.endswith("ValueError: odd row 1")


def test_verbose_flag_turns_the_traceback_log_on():
    import logging

    from rlvr_plugins import cli

    logger = logging.getLogger("rlvr_plugins.engine.traceback")
    before = logger.level
    try:
        cli.main(["-v", "plugins", "--json"])
        assert logger.level == logging.DEBUG
    finally:
        logger.setLevel(before)
