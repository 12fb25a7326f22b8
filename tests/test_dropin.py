"""RLVRTrainer as a drop-in for GRPOTrainer: one focused test per behaviour of issue 12 (see also tests/compat/)."""

from __future__ import annotations

import asyncio
import logging
import math
import pathlib

import pytest
import torch
import trl
from transformers import TrainerState

import dropin_fixtures as fx
from compat.stand_ins import (
    TRAINERS,
    CPUConfig,
    chat_tokenizer,
    conversational_dataset,
    small_args,
    standard_dataset,
    tiny_causal_lm,
    tiny_reward_model,
)
from rlvr_plugins import RewardFunction
from rlvr_plugins.advantages import mean_baseline_advantages, normalize_then_sum_advantages
from rlvr_plugins.engine import RewardEngine, RewardFunctionError
from rlvr_plugins.errors import ConfigError, PluginContractError, PluginError
from rlvr_plugins.manager import build_plugin_set, temporary_plugin
from rlvr_plugins.rewards import Engines, TRLReward
from rlvr_plugins.testing import grpo_args, reward_plugin_class
from rlvr_plugins.train.config import validate
from rlvr_plugins.train.run import engine_options
from rlvr_plugins.trainer import RLVRTrainer, with_trl_estimator


def reward(fn, **kwargs) -> RewardFunction:
    return RewardFunction(getattr(fn, "__name__", "r"), fn, **kwargs)


def call(trl_reward: TRLReward, prompts, completions, **trl_kwargs):
    return trl_reward(prompts=prompts, completions=completions, **trl_kwargs)


# -- 1. no args ----------------------------------------------------------------------------------------------


def test_without_args_the_trainer_builds_trls_default_config(tmp_path, monkeypatch):
    import rlvr_plugins.trainer

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rlvr_plugins.trainer, "GRPOConfig", CPUConfig)
    tok = chat_tokenizer()
    with temporary_plugin(DigitShare):
        trainer = RLVRTrainer(
            tiny_causal_lm(tok),
            plugin_set=build_plugin_set({"digit-share": {}}),
            train_dataset=standard_dataset(),
            processing_class=tok,
        )
    assert pathlib.Path(trainer.args.output_dir).name == "tiny-qwen3-GRPO"
    assert trainer.args.learning_rate == CPUConfig("x").learning_rate


DigitShare = reward_plugin_class("digit-share", fx.completion_kind, isolated=False)


# -- 2. errors are the built-in exceptions a TRL user catches ---------------------------------------------------


def test_project_errors_are_value_errors_where_trl_raises_value_errors(tmp_path):
    assert issubclass(PluginError, ValueError) and issubclass(ConfigError, ValueError)
    assert issubclass(PluginContractError, ValueError)
    tok = chat_tokenizer()
    with pytest.raises(ValueError, match="^No reward source provided.* no reward function is enabled"):
        RLVRTrainer(
            tiny_causal_lm(tok), args=grpo_args(tmp_path), train_dataset=standard_dataset(), processing_class=tok
        )


# -- 3. conversational completions reach rewards as TRL's message lists -----------------------------------------


def test_conversational_completion_is_a_message_list_with_completion_format_messages():
    prompts = [[{"role": "user", "content": "hi"}]] * 2
    completions = [[{"role": "assistant", "content": "a"}], "plain"]
    engines = Engines(in_process=True)
    as_trl = TRLReward(reward(fx.completion_kind, completion_format="messages"), "p", engines)
    as_text = TRLReward(reward(fx.completion_kind), "p", engines)
    assert call(as_trl, prompts, completions) == [1.0, 0.0]
    assert call(as_text, prompts, completions) == [0.0, 0.0]
    with pytest.raises(TypeError, match="completion_format must be one of"):
        reward(fx.completion_kind, completion_format="chat")


# -- 4. every argument TRL offers, opt-in, also from worker processes --------------------------------------------


@pytest.mark.parametrize("in_process", [True, False])
def test_reward_receives_trl_arguments_and_its_logs_reach_the_trainer(in_process):
    state = TrainerState(global_step=5, log_history=[{"loss": 1.0}])
    metrics, extras = [], []
    engines = Engines(in_process=in_process, num_workers=1)
    try:
        trl_reward = TRLReward(reward(fx.with_every_extra), "p", engines)
        values = call(
            trl_reward,
            ["q", "q"],
            ["ab", "c"],
            completion_ids=[[7, 8], [9]],
            trainer_state=state,
            log_metric=lambda name, value: metrics.append((name, value)),
            log_extra=lambda column, values: extras.append((column, values)),
        )
        only_ids = call(
            TRLReward(reward(fx.only_ids), "p", engines),
            ["q"],
            ["x"],
            completion_ids=[[2, 3]],
            trainer_state=state,
            log_metric=None,
            log_extra=None,
        )
    finally:
        engines.close()
    history = 1 if in_process else 0  # a worker gets a copy of the state without log_history
    assert values == [2.0 + history, 1.0 + history]
    assert metrics == [("ids/len", 2.0), ("ids/len", 1.0)]
    assert extras == [("step_seen", [5, 5])]
    assert only_ids == [5.0]


def test_a_reward_taking_the_environment_must_run_in_process():
    def with_env(*, prompt, completion, example, environment):
        return 1.0

    with pytest.raises(PluginError, match="register it with isolated=False"):
        TRLReward(reward(with_env), "p", Engines())
    assert TRLReward(reward(with_env, isolated=False), "p", Engines()).extras == ("environment",)


# -- 5. TRL's no-score warning is quiet only inside this trainer ---------------------------------------------------


def never_applies(completions, **kwargs):
    return [None] * len(completions)


@pytest.mark.slow
def test_trls_no_score_warning_is_filtered_only_while_rlvr_trainer_scores(tmp_path, caplog):
    tok = chat_tokenizer()
    ours = TRAINERS["rlvr"](
        tiny_causal_lm(tok),
        reward_funcs=[never_applies],
        args=small_args(tmp_path / "a"),
        train_dataset=standard_dataset(),
        processing_class=tok,
    )
    with caplog.at_level(logging.WARNING):
        ours.train()
    trl_text = "All reward functions returned None"
    assert not any(r.name == "trl.trainer.grpo_trainer" and trl_text in r.getMessage() for r in caplog.records)
    ours_once = [m for r in caplog.records if r.name == "rlvr_plugins.trainer" and trl_text in (m := r.getMessage())]
    assert len(ours_once) == 1 and ours_once[0].startswith(
        trl_text + " for 4 of 4 completions"
    )  # TRL's words, then ours
    assert logging.getLogger("trl.trainer.grpo_trainer").filters == []
    caplog.clear()
    plain = TRAINERS["trl"](
        tiny_causal_lm(tok),
        reward_funcs=[never_applies],
        args=small_args(tmp_path / "b"),
        train_dataset=standard_dataset(),
        processing_class=tok,
    )
    with caplog.at_level(logging.WARNING):
        plain.train()
    assert any("All reward functions returned None" in r.getMessage() for r in caplog.records)


# -- 6. scale_rewards / multi_objective_aggregation map to estimators --------------------------------------------


def test_mean_baseline_by_hand():
    rewards = torch.tensor([1.0, 2.0, 3.0, 6.0])
    valid = torch.tensor([True, True, True, True])
    assert mean_baseline_advantages(rewards, valid, 2).tolist() == [-0.5, 0.5, -1.5, 1.5]
    masked = torch.tensor([True, False, True, True])
    assert mean_baseline_advantages(torch.tensor([1.0, math.nan, 3.0, 5.0]), masked, 2).tolist() == [0, 0, -1, 1]


def test_normalize_then_sum_by_hand():
    per_func = torch.tensor([[1.0, 0.0], [3.0, 0.0], [2.0, 1.0], [2.0, 3.0]])
    weights = torch.tensor([1.0, 2.0])
    a = 1 / (math.sqrt(2) + 1e-4)  # z of 1 vs 3 (and of 1 vs 3 in the second reward); a std of 0 gives z = 0
    u = [-a, a, -2 * a, 2 * a]  # weighted sums, mean 0
    s = math.sqrt(sum(x * x for x in u) / 3)
    expected = [x / (s + 1e-4) for x in u]
    got = normalize_then_sum_advantages(per_func, weights, torch.ones(4, dtype=torch.bool), 2)
    assert got.tolist() == pytest.approx(expected, rel=1e-6)
    # a row without a score takes part in no statistic and gets 0
    valid = torch.tensor([True, True, True, False])
    got = normalize_then_sum_advantages(per_func, weights, valid, 2)
    v = [-a, a, 0.0]  # the lone valid row of group 2 has no std: its z is NaN and counts 0
    m = sum(v) / 3
    sv = math.sqrt(sum((x - m) ** 2 for x in v) / 2)
    assert got.tolist() == pytest.approx([(x - m) / (sv + 1e-4) for x in v] + [0.0], rel=1e-6)


@pytest.mark.parametrize(
    "settings, estimator",
    [
        ({}, "grpo"),
        ({"scale_rewards": "batch"}, "batch-std"),
        ({"scale_rewards": "none"}, "mean-baseline"),
        ({"scale_rewards": False}, "mean-baseline"),
        ({"multi_objective_aggregation": "normalize_then_sum"}, "normalize-then-sum"),
    ],
)
def test_trl_advantage_settings_choose_the_estimator(tmp_path, settings, estimator):
    mapped = with_trl_estimator(build_plugin_set({}), grpo_args(tmp_path, **settings))
    assert mapped.winner("rlvr_compute_advantages") == estimator
    assert {p.name for p in mapped.enabled if p.default} == {"repeat-sampler", "plain-template", estimator}


def test_an_enabled_estimator_contradicting_trl_settings_is_refused(tmp_path):
    assert (
        with_trl_estimator(build_plugin_set({"rloo": {}}), grpo_args(tmp_path)).winner("rlvr_compute_advantages")
        == "rloo"
    )
    with pytest.raises(ValueError, match=r"ask for the 'batch-std' estimator, but the estimator plugin 'rloo'"):
        with_trl_estimator(build_plugin_set({"rloo": {}}), grpo_args(tmp_path, scale_rewards="batch"))


# -- 7. reward models and async rewards ------------------------------------------------------------------------------


def test_reward_model_plugin_loads_a_local_model_and_scores_prompt_plus_completion(tmp_path):
    tok = chat_tokenizer()
    model = tiny_reward_model(tok)
    model.save_pretrained(tmp_path / "my-rm")
    tok.save_pretrained(tmp_path / "my-rm")
    plugin_set = build_plugin_set({"reward-model": {"model": str(tmp_path / "my-rm"), "weight": 0.5}})
    [(owner, rm)] = plugin_set.reward_functions()
    assert (owner, rm.name, rm.weight, rm.isolated, rm.completion_format) == (
        "reward-model",
        "my-rm",
        0.5,
        False,
        "messages",
    )
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(tmp_path / "my-rm")(
        "say hello:abc", return_tensors="pt", add_special_tokens=False
    )
    with torch.inference_mode():
        expected = model(**ids).logits[0, 0].item()
    assert rm.fn(prompt="say hello:", completion="abc", example={}) == pytest.approx(expected, abs=1e-5)
    with pytest.raises(PluginError, match="option 'model' is required"):
        build_plugin_set({"reward-model": {}}).reward_functions()


def test_async_rewards_are_gathered_in_process_and_awaited_in_workers():
    started, n = [], 4

    async def barrier(*, prompt, completion, example):
        started.append(completion)
        for _ in range(200):  # every item must be running at once for any of them to finish
            if len(started) == n:
                return float(len(completion))
            await asyncio.sleep(0.01)
        raise TimeoutError("items were awaited one after another")

    items = [{"prompt": "", "completion": "x" * i, "example": {}} for i in range(n)]
    with RewardEngine(in_process=True, on_error="raise") as engine:
        assert engine.score("barrier", barrier, items).values == [0.0, 1.0, 2.0, 3.0]
    with RewardEngine(num_workers=1) as engine:
        assert engine.score("async_length", fx.async_length, items).values == [0.0, 1.0, 2.0, 3.0]


# -- 8. on_error: raise | mask -------------------------------------------------------------------------------------------


ITEMS = [{"prompt": "", "completion": c, "example": {}} for c in ("a", "b", "c")]


def test_on_error_raise_stops_at_the_first_exception_in_process_with_the_functions_own_error():
    with RewardEngine(in_process=True, on_error="raise") as engine, pytest.raises(KeyError) as info:
        engine.score("rb", fx.raises_on_b, ITEMS)
    assert "raised by reward plugin 'rb' on item 1 (engine on_error='raise')" in info.value.__notes__
    with RewardEngine(in_process=True) as engine:
        result = engine.score("rb", fx.raises_on_b, ITEMS)
    assert result.failed == [False, True, False] and "KeyError" in result.errors[1]


def test_on_error_raise_in_workers_names_the_reward_and_item_but_timeouts_stay_masked():
    with RewardEngine(num_workers=1, on_error="raise") as engine:
        with pytest.raises(RewardFunctionError, match=r"reward plugin 'rb' raised on item 1: KeyError: 'no b'"):
            engine.score("rb", fx.raises_on_b, ITEMS)
    with RewardEngine(num_workers=1, on_error="raise", timeout_s=0.5) as engine:
        result = engine.score("hb", fx.hangs_on_b, ITEMS)
    assert result.failed == [False, True, False] and result.errors[1].startswith("timeout after 0.5s")


def test_on_error_defaults_raise_in_python_and_mask_for_rlvr_train(tmp_path):
    tok = chat_tokenizer()
    with temporary_plugin(DigitShare):
        trainer = RLVRTrainer(
            tiny_causal_lm(tok),
            plugin_set=build_plugin_set({"digit-share": {}}),
            args=grpo_args(tmp_path),
            train_dataset=standard_dataset(),
            processing_class=tok,
        )
    assert trainer.engines.options["on_error"] == "raise"
    assert engine_options({})["on_error"] == "mask"
    assert engine_options({"engine": {"on_error": "raise"}})["on_error"] == "raise"
    with pytest.raises(ConfigError, match=r"engine.on_error must be 'mask' .* or 'raise' .*, got 'sometimes'"):
        validate({"plugins": {}, "engine": {"on_error": "sometimes"}}, need_data=False)


# -- 9. an environment that owns the reward is a reward source -------------------------------------------------------------


class CounterEnv:
    def reset(self, **kwargs):
        self.n = 2

    def add_one(self) -> str:
        """Add one to the counter.

        Returns:
            The counter.
        """
        self.n += 1
        return str(self.n)

    def get_reward(self):
        return float(self.n)


class NoRewardEnv(CounterEnv):
    get_reward = None


def test_validate_run_accepts_an_environment_factory_as_the_reward_source(tmp_path):
    args = grpo_args(tmp_path)
    build_plugin_set({}).validate_run(args, None, environment_factory=CounterEnv)
    with pytest.raises(ValueError, match="or pass an environment_factory whose environment defines get_reward"):
        build_plugin_set({}).validate_run(args, None)


@pytest.mark.slow
def test_an_environment_that_owns_the_reward_trains_without_reward_plugins(tmp_path):
    tok = chat_tokenizer()
    tok.chat_template = (pathlib.Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    common = dict(
        args=grpo_args(tmp_path),
        train_dataset=conversational_dataset(),
        processing_class=tok,
        engine_options={"in_process": True},
    )
    trainer = RLVRTrainer(tiny_causal_lm(tok), environment_factory=CounterEnv, **common)
    assert trainer.reward_func_names == ["CounterEnv"]
    trainer.train()
    assert [h["rewards/CounterEnv/mean"] for h in trainer.state.log_history if "rewards/CounterEnv/mean" in h] == [
        2.0,
        2.0,
    ]
    with pytest.raises(ValueError, match="No reward source provided"):
        RLVRTrainer(tiny_causal_lm(tok), environment_factory=NoRewardEnv, **common)


def prepare_with(tmp_path, plugins, **trainer):
    from rlvr_plugins.testing import TINY_TRAINER
    from rlvr_plugins.train.run import prepare

    with temporary_plugin(DigitShare):
        return prepare(
            {
                "output_dir": str(tmp_path),
                "seed": 1,
                "plugins": {"digit-share": {}, **plugins},
                "trainer": {**TINY_TRAINER, **trainer},
            }
        )


def test_yaml_path_refuses_trl_settings_the_estimator_would_not_honour(tmp_path):
    with pytest.raises(ConfigError, match=r"scale_rewards='batch' would have no effect: .* estimator plugin 'grpo'"):
        prepare_with(tmp_path, {}, scale_rewards="batch")
    with pytest.raises(ConfigError, match="enable normalize-then-sum for TRL's 'normalize_then_sum'"):
        prepare_with(tmp_path, {}, multi_objective_aggregation="normalize_then_sum")
    for plugins, scale in (({"batch-std": {}}, "batch"), ({"mean-baseline": {}}, "none")):
        prepared = prepare_with(tmp_path, plugins, scale_rewards=scale)
        mapped = with_trl_estimator(prepared.plugin_set, prepared.grpo_args)
        assert mapped.winner("rlvr_compute_advantages") == next(iter(plugins))
    prepared = prepare_with(tmp_path, {"normalize-then-sum": {}})
    assert (
        with_trl_estimator(prepared.plugin_set, prepared.grpo_args).winner("rlvr_compute_advantages")
        == "normalize-then-sum"
    )


# -- 10. wrong arguments of the Python API are named at construction (issue 21, item 11) --------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"workers": 2},
            "engine_options: unknown option 'workers' (that is the config's engine.workers; in Python it is "
            "'num_workers'); valid: num_workers, max_workers, timeout_s, ",
        ),
        ({"num_workers": 0}, "engine_options: num_workers must be an integer >= 1, got 0"),
        ({"timeout_s": "10"}, "engine_options: timeout_s must be a number > 0, got '10'"),
        ({"timout_s": 10}, "engine_options: unknown option 'timout_s' (did you mean 'timeout_s'?); valid: "),
        (["num_workers"], "engine_options must be a mapping of reward engine options, got list ['num_workers']"),
    ],
)
def test_bad_engine_options_are_refused_at_construction_naming_the_argument(tmp_path, options, message):
    tok = chat_tokenizer()
    with temporary_plugin(DigitShare), pytest.raises(PluginError) as err:
        RLVRTrainer(
            tiny_causal_lm(tok),
            plugin_set=build_plugin_set({"digit-share": {}}),
            args=grpo_args(tmp_path),
            engine_options=options,
            train_dataset=standard_dataset(),
            processing_class=tok,
        )
    assert str(err.value).startswith(message), str(err.value)


def test_a_plugin_set_that_is_a_mapping_or_a_list_of_names_is_refused_saying_what_to_pass(tmp_path):
    tok = chat_tokenizer()
    with pytest.raises(PluginError) as err:
        RLVRTrainer(
            tiny_causal_lm(tok),
            plugin_set={"r1-accuracy": {}},
            args=grpo_args(tmp_path),
            train_dataset=standard_dataset(),
            processing_class=tok,
        )
    assert str(err.value) == (
        "plugin_set must be a PluginSet (rlvr_plugins.manager.build_plugin_set), got dict {'r1-accuracy': {}}; "
        "pass the mapping as plugins={'r1-accuracy': {}}, or build one with build_plugin_set({'r1-accuracy': {}})"
    )
    with pytest.raises(PluginError) as err:
        build_plugin_set(["r1-accuracy"])
    assert str(err.value) == (
        "plugins must be a mapping {plugin name: options}, got list ['r1-accuracy']; pass {'r1-accuracy': {}}"
    )
    with pytest.raises(PluginError, match=r"^plugins must be a mapping \{plugin name: options\}, got str 'r1-format'"):
        build_plugin_set("r1-format")
    with pytest.raises(PluginError, match=r"^plugins must be a mapping .*; pass \{'r1-accuracy': \{\}\}$"):
        RLVRTrainer(tiny_causal_lm(tok), plugins=["r1-accuracy"], args=grpo_args(tmp_path), processing_class=tok)


# -- 11. a reward that applies to no row is refused; one that applies to few is warned about (issue 21, item 1) ------


def level_is_even(*, prompt, completion, example):
    level = example.get("answer")
    return None if level is None else float(level % 2 == 0)


ReadsAnswer = reward_plugin_class("reads-answer", level_is_even, isolated=False, columns={"answer_column": "answer"})


def test_a_train_dataset_without_the_column_a_reward_reads_is_refused_at_construction(tmp_path):
    tok = chat_tokenizer()
    with temporary_plugin(ReadsAnswer), pytest.raises(PluginError) as err:
        RLVRTrainer(
            tiny_causal_lm(tok),
            plugin_set=build_plugin_set({"reads-answer": {}}),
            args=grpo_args(tmp_path),
            train_dataset=standard_dataset(),  # columns prompt, level
            processing_class=tok,
        )
    assert str(err.value) == (
        "reward 'reads-answer' (plugin 'reads-answer') reads column 'answer' (option answer_column), which no row "
        "of train_dataset has: it would apply to no item and the run would train without it; columns present: "
        "['prompt', 'level']"
    )


def test_a_reward_not_applicable_to_most_of_a_batch_is_warned_about_once(tmp_path, caplog):
    from datasets import Dataset

    tok = chat_tokenizer()
    rows = [{"prompt": "a:", "answer": i if i < 2 else None} for i in range(8)]
    with temporary_plugin(ReadsAnswer):
        trainer = RLVRTrainer(
            tiny_causal_lm(tok),
            plugin_set=build_plugin_set({"reads-answer": {}}),
            args=grpo_args(tmp_path),
            train_dataset=Dataset.from_list(rows),
            processing_class=tok,
        )
    nan = math.nan
    half = torch.tensor([[1.0], [nan], [0.0], [nan]], dtype=torch.float64)  # 2 of 4: not more than half
    most = torch.tensor([[nan], [nan], [0.0], [nan]], dtype=torch.float64)  # 3 of 4
    failed_most = torch.tensor([[True], [True], [False], [False]])  # 1 of 4 not applicable, 2 failed
    none = torch.zeros((4, 1), dtype=torch.bool)
    with caplog.at_level(logging.WARNING):
        trainer._check_applicable([], half, none)
        trainer._check_applicable([], most, failed_most)
        assert [r for r in caplog.records if "did not apply" in r.getMessage()] == []
        trainer._check_applicable([], most, none)
        trainer._check_applicable([], most, none)
    warned = [r.getMessage() for r in caplog.records if "did not apply" in r.getMessage()]
    assert warned == [
        "reward 'reads-answer' did not apply (returned None) to 75% of a batch's completions (more than 50%): "
        "those completions are trained without it; check the columns it reads (warned once)"
    ]
    trainer._rlvr_columns_checked = False  # an IterableDataset: its first batch is checked
    with pytest.raises(PluginError, match="reads column 'answer' .*, which no row of the first training batch has"):
        trainer._check_applicable([{"prompt": "a:"}], half, none)
