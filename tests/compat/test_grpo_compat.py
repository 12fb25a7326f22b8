"""The same GRPO scenarios against TRL's ``GRPOTrainer`` and ``RLVRTrainer``, built by the same call.

Written from what TRL's own GRPO tests check (construction, errors, what a reward function receives, logged
metrics and warnings, the advantages that reach the loss, PEFT, several iterations, a KL term, reward models,
async rewards), on local stand-ins for the hub fixtures (``stand_ins``). Every scenario runs once per trainer and
asserts the same observable behaviour, from values computed by hand where there are values. Then one script run
on both, step by step (the same completions, advantages and loss); ``plugins=`` changing exactly what the plugins
say; and ``isolate_reward_funcs=True`` (TRL's functions as engine jobs).
"""

from __future__ import annotations

import asyncio
import logging
import statistics

import pytest
import torch
from trl import GRPOConfig

from rlvr_plugins import Plugin, hookimpl
from rlvr_plugins.manager import temporary_plugin

from .rewards import batch_logging_reward, length_mod_3, raising_reward, slow_reward, text, vowel_count
from .stand_ins import (
    TRAINERS,
    CPUConfig,
    chat_tokenizer,
    conversational_dataset,
    small_args,
    standard_dataset,
    tiny_causal_lm,
    tiny_reward_model,
)

pytestmark = pytest.mark.slow

KINDS = sorted(TRAINERS)


@pytest.fixture
def tok():
    return chat_tokenizer()


def build(kind, tok, tmp_path, reward_funcs, dataset=None, model=None, **arg_overrides):
    args = small_args(tmp_path / kind, **arg_overrides)
    return TRAINERS[kind](
        model if model is not None else tiny_causal_lm(tok),
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=dataset if dataset is not None else standard_dataset(),
        processing_class=tok,
    )


def logged(trainer, key):
    return [h[key] for h in trainer.state.log_history if key in h]


# -- construction and errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_without_args_a_default_config_named_after_the_model(kind, tok, tmp_path, monkeypatch):
    import trl.trainer.grpo_trainer

    import rlvr_plugins.trainer

    monkeypatch.chdir(tmp_path)
    for module in (trl.trainer.grpo_trainer, rlvr_plugins.trainer):
        monkeypatch.setattr(module, "GRPOConfig", CPUConfig)
    trainer = TRAINERS[kind](
        tiny_causal_lm(tok), reward_funcs=length_mod_3, train_dataset=standard_dataset(), processing_class=tok
    )
    assert isinstance(trainer.args, GRPOConfig)
    assert trainer.args.output_dir.endswith("tiny-qwen3-GRPO")


@pytest.mark.parametrize("kind", KINDS)
def test_no_reward_source_is_a_value_error(kind, tok, tmp_path):
    with pytest.raises(ValueError, match="^No reward source provided"):
        build(kind, tok, tmp_path, reward_funcs=None)


@pytest.mark.parametrize("kind", KINDS)
def test_reward_weights_of_the_wrong_length_are_a_value_error(kind, tok, tmp_path):
    with pytest.raises(ValueError):
        build(kind, tok, tmp_path, reward_funcs=[length_mod_3], reward_weights=[1.0, 2.0])


@pytest.mark.parametrize("kind", KINDS)
def test_reward_processing_classes_of_the_wrong_length_are_a_value_error(kind, tok, tmp_path):
    args = small_args(tmp_path / kind)
    with pytest.raises(ValueError):
        TRAINERS[kind](
            tiny_causal_lm(tok),
            reward_funcs=[tiny_reward_model(tok)],
            args=args,
            train_dataset=standard_dataset(),
            processing_class=tok,
            reward_processing_classes=[tok, tok],
        )


# -- training, and what a reward function receives ----------------------------------------------------------


class Recorder:
    """A TRL reward function that records every call's keyword arguments (lists, TRL's batch form)."""

    def __init__(self):
        self.calls = []
        self.__name__ = "recorded"

    def __call__(self, prompts, completions, **kwargs):
        self.calls.append(
            {"prompts": prompts, "completions": completions, **kwargs, "step": kwargs["trainer_state"].global_step}
        )
        return length_mod_3(completions)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("arch", ["qwen2", "qwen3"])
@pytest.mark.parametrize("form", ["standard", "conversational"])
def test_training_updates_the_model_and_rewards_see_trl_forms(kind, arch, form, tok, tmp_path):
    recorder = Recorder()
    dataset = standard_dataset() if form == "standard" else conversational_dataset()
    trainer = build(kind, tok, tmp_path, [recorder], dataset=dataset, model=tiny_causal_lm(tok, arch))
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    assert len(logged(trainer, "loss")) == 2
    assert any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
    prompts = [p for call in recorder.calls for p in call["prompts"]]
    completions = [c for call in recorder.calls for c in call["completions"]]
    assert len(completions) == 8  # 2 generation batches of 4
    rows = {str(r["prompt"]): r for r in dataset}
    assert all(str(p) in rows for p in prompts)
    if form == "standard":
        assert all(isinstance(c, str) for c in completions)
    else:
        assert all(
            isinstance(c, list) and len(c) == 1 and c[0]["role"] == "assistant" and isinstance(c[0]["content"], str)
            for c in completions
        )


@pytest.mark.parametrize("kind", KINDS)
def test_reward_receives_trainer_state_token_ids_and_columns(kind, tok, tmp_path):
    recorder = Recorder()
    trainer = build(kind, tok, tmp_path, [recorder])
    trainer.train()
    keys = set().union(*(call.keys() for call in recorder.calls))
    assert {"completion_ids", "trainer_state", "log_metric", "log_extra", "level"} <= keys
    assert sorted({call["step"] for call in recorder.calls}) == [0, 1]
    levels = {r["prompt"]: r["level"] for r in standard_dataset()}
    for call in recorder.calls:
        assert call["level"] == [levels[p] for p in call["prompts"]]
        for completion, ids in zip(call["completions"], call["completion_ids"], strict=True):
            assert tok.decode(ids, skip_special_tokens=True) == completion


def logging_reward(completions, log_metric, log_extra, **kwargs):
    log_metric("custom/constant", 0.5)
    log_extra("echo", [text(c).upper() for c in completions])
    return length_mod_3(completions)


@pytest.mark.parametrize("kind", KINDS)
def test_log_metric_and_log_extra(kind, tok, tmp_path):
    trainer = build(kind, tok, tmp_path, [logging_reward], log_completions=True)
    trainer.train()
    assert logged(trainer, "custom/constant") == [0.5, 0.5]
    assert list(trainer._logs["extra"]["echo"]) == [c.upper() for c in trainer._logs["completion"]]


# -- the advantages that reach the loss -----------------------------------------------------------------------


def capture_advantages(trainer):
    seen = []
    original = trainer._generate_and_score_completions

    def wrapped(inputs):
        output = original(inputs)
        seen.append(output["advantages"].detach().clone())
        return output

    trainer._generate_and_score_completions = wrapped
    return seen


class ValueLog:
    def __init__(self, fn):
        self.fn, self.values, self.__name__ = fn, [], fn.__name__

    def __call__(self, completions, **kwargs):
        out = self.fn(completions)
        self.values.extend(out)
        return out


def expected_advantages(per_func, weights, G, scale, aggregation, eps=1e-4):
    """TRL's advantages by hand, in plain Python: ``per_func`` is one list of values per completion."""
    groups = [list(range(i, i + G)) for i in range(0, len(per_func), G)]
    if aggregation == "normalize_then_sum":
        z = [[0.0] * len(weights) for _ in per_func]
        for g in groups:
            for k in range(len(weights)):
                vals = [per_func[i][k] for i in g]
                m, s = statistics.mean(vals), statistics.stdev(vals)
                for i in g:
                    z[i][k] = (per_func[i][k] - m) / (s + eps)
        u = [sum(w * zk for w, zk in zip(weights, zi)) for zi in z]
        m, s = statistics.mean(u), statistics.stdev(u)
        return [(x - m) / (s + eps) for x in u]
    total = [sum(w * r for w, r in zip(weights, row)) for row in per_func]
    batch_std = statistics.stdev(total)
    out = [0.0] * len(total)
    for g in groups:
        vals = [total[i] for i in g]
        m, s = statistics.mean(vals), statistics.stdev(vals)
        for i in g:
            centred = total[i] - m
            out[i] = (
                centred / (s + eps)
                if scale == "group"
                else centred / (batch_std + eps)
                if scale == "batch"
                else centred
            )
    return out


SETTINGS = {
    "group": dict(scale_rewards="group"),
    "batch": dict(scale_rewards="batch"),
    "none": dict(scale_rewards="none"),
    "normalize_then_sum": dict(multi_objective_aggregation="normalize_then_sum"),
    "weights": dict(reward_weights=[1.0, 0.5]),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_advantages_for_each_trl_setting(kind, setting, tok, tmp_path):
    first, second = ValueLog(length_mod_3), ValueLog(vowel_count)
    overrides = dict(SETTINGS[setting], per_device_train_batch_size=8, num_generations=4, max_completion_length=10)
    trainer = build(kind, tok, tmp_path, [first, second], **overrides)
    seen = capture_advantages(trainer)
    trainer.train()
    args = trainer.args
    weights = list(args.reward_weights) if args.reward_weights is not None else [1.0, 1.0]
    assert len(seen) == 2 and len(first.values) == len(second.values) == 16
    for b, advantages in enumerate(seen):
        rows = [[first.values[i], second.values[i]] for i in range(8 * b, 8 * b + 8)]
        expected = expected_advantages(rows, weights, 4, args.scale_rewards, args.multi_objective_aggregation)
        assert advantages.tolist() == pytest.approx(expected, abs=1e-4)
    assert any(abs(a) > 0.1 for adv in seen for a in adv.tolist())


# -- PEFT, several iterations, KL ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_peft_trains_only_the_adapter(kind, tok, tmp_path):
    from peft import LoraConfig

    args = small_args(tmp_path / kind)
    trainer = TRAINERS[kind](
        tiny_causal_lm(tok),
        reward_funcs=length_mod_3,
        args=args,
        train_dataset=standard_dataset(),
        processing_class=tok,
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    changed = {n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p)}
    assert changed and all("lora" in n for n in changed)


@pytest.mark.parametrize("kind", KINDS)
def test_several_iterations_reuse_one_generation_batch(kind, tok, tmp_path):
    recorder = Recorder()
    trainer = build(kind, tok, tmp_path, [recorder], num_iterations=2)
    trainer.train()
    assert len(logged(trainer, "loss")) == 2
    assert len([c for call in recorder.calls for c in call["completions"]]) == 4  # one generation batch


@pytest.mark.parametrize("kind", KINDS)
def test_beta_adds_a_kl_term(kind, tok, tmp_path):
    path = tmp_path / "init"
    tiny_causal_lm(tok).save_pretrained(path)
    trainer = build(kind, tok, tmp_path, [length_mod_3], model=str(path), beta=0.1)
    trainer.train()
    kl = logged(trainer, "kl")
    assert len(kl) == 2 and kl[0] == pytest.approx(0.0, abs=1e-6)


# -- reward models, async rewards ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("form", ["standard", "conversational"])
def test_reward_model_scores_prompt_and_completion(kind, form, tok, tmp_path):
    from trl.data_utils import apply_chat_template

    reward_model = tiny_reward_model(tok)
    dataset = standard_dataset() if form == "standard" else conversational_dataset()
    trainer = TRAINERS[kind](
        tiny_causal_lm(tok),
        reward_funcs=[reward_model],
        args=small_args(tmp_path / kind),
        train_dataset=dataset,
        processing_class=tok,
        reward_processing_classes=[tok],
    )
    trainer.train()
    assert len(logged(trainer, "rewards/tiny-reward-model/mean")) == 2
    for prompt, completion, reward in zip(
        trainer._logs["prompt"], trainer._logs["completion"], trainer._logs["rewards"]["tiny-reward-model"], strict=True
    ):
        rendered = (
            prompt + completion
            if form == "standard"
            else apply_chat_template({"messages": prompt + completion}, tok)["text"]
        )
        ids = tok(rendered, return_tensors="pt", add_special_tokens=False)
        with torch.inference_mode():
            assert reward == pytest.approx(reward_model(**ids).logits[0, 0].item(), abs=1e-4)


async def async_double_length(completions, **kwargs):
    await asyncio.sleep(0)
    return [2 * v for v in length_mod_3(completions)]


@pytest.mark.parametrize("kind", KINDS)
def test_async_reward_is_awaited_beside_a_sync_one(kind, tok, tmp_path):
    trainer = build(kind, tok, tmp_path, [length_mod_3, async_double_length])
    trainer.train()
    sync, doubled = logged(trainer, "rewards/length_mod_3/mean"), logged(trainer, "rewards/async_double_length/mean")
    assert len(sync) == 2 and doubled == pytest.approx([2 * v for v in sync])


# -- failures and warnings ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_reward_that_raises_stops_training_with_its_own_exception(kind, tok, tmp_path):
    trainer = build(kind, tok, tmp_path, [raising_reward])
    with pytest.raises(ZeroDivisionError, match="reward bug"):
        trainer.train()


def never_applies(completions, **kwargs):
    return [None] * len(completions)


NO_SCORE_WARNING = "All reward functions returned None"


@pytest.mark.parametrize("kind", KINDS)
def test_rows_no_reward_scores_are_warned_about_and_train_on_zero_advantages(kind, tok, tmp_path, caplog):
    trainer = build(kind, tok, tmp_path, [never_applies])
    seen = capture_advantages(trainer)
    with caplog.at_level(logging.WARNING):
        trainer.train()
    assert any(NO_SCORE_WARNING in r.getMessage() for r in caplog.records)
    assert all(a == 0.0 for adv in seen for a in adv.tolist())


# -- one import line: the same run, step by step ---------------------------------------------------------------------


def trace(trainer):
    """Per step, what ``_generate_and_score_completions`` hands to the loss (completion ids and advantages);
    then the logged losses. Filled in by ``train()``."""
    steps = []
    original = trainer._generate_and_score_completions

    def wrapped(inputs):
        output = original(inputs)
        steps.append(
            (output["completion_ids"].clone(), output["advantages"].detach().clone(), output["completion_mask"].clone())
        )
        return output

    trainer._generate_and_score_completions = wrapped
    return steps


def same_run(tok, tmp_path, rlvr_extra=None, trl_overrides=None, **overrides):
    """Train TRL's ``GRPOTrainer`` and ``RLVRTrainer`` from one script (seeded, 3 steps); return both traces."""
    runs = {}
    for kind in ("trl", "rlvr"):
        args = small_args(
            tmp_path / kind,
            per_device_train_batch_size=8,
            num_generations=4,
            max_completion_length=10,
            max_steps=3,
            **overrides,
            **((trl_overrides or {}) if kind == "trl" else {}),
        )
        extra = rlvr_extra if kind == "rlvr" else {}
        trainer = TRAINERS[kind](
            tiny_causal_lm(tok),
            reward_funcs=[length_mod_3, vowel_count],
            args=args,
            train_dataset=standard_dataset(),
            processing_class=tok,
            **(extra or {}),
        )
        steps = trace(trainer)
        trainer.train()
        runs[kind] = (steps, logged(trainer, "loss"), trainer.args)
    return runs["trl"], runs["rlvr"]


def assert_same_run(trl, rlvr):
    (trl_steps, trl_loss, _), (rlvr_steps, rlvr_loss, _) = trl, rlvr
    assert len(trl_steps) == len(rlvr_steps) == 3 and len(trl_loss) == len(rlvr_loss) == 3
    for (ids_a, adv_a, _), (ids_b, adv_b, _) in zip(trl_steps, rlvr_steps, strict=True):
        assert torch.equal(ids_a, ids_b)
        torch.testing.assert_close(adv_b, adv_a, atol=1e-6, rtol=0)
    assert rlvr_loss == pytest.approx(trl_loss, abs=1e-6)
    assert any(a.abs().max() > 0.1 for _, a, _ in trl_steps)  # the rewards differ within groups: a real comparison


@pytest.mark.parametrize("setting", ["group", "weights"])
def test_a_trl_script_with_only_its_import_changed_trains_the_same_at_every_step(setting, tok, tmp_path):
    trl, rlvr = same_run(tok, tmp_path, **SETTINGS[setting])
    assert_same_run(trl, rlvr)


def test_plugins_by_name_change_exactly_what_the_plugin_says(tok, tmp_path):
    """``plugins={"dr-grpo": {}}`` is TRL configured as Dr. GRPO says: ``loss_type="dr_grpo"``,
    ``scale_rewards="none"`` (advantage = reward - group mean), and nothing else."""
    trl, rlvr = same_run(
        tok,
        tmp_path,
        rlvr_extra={"plugins": {"dr-grpo": {}}},
        trl_overrides={"loss_type": "dr_grpo", "scale_rewards": "none"},
    )
    assert (rlvr[2].loss_type, rlvr[2].scale_rewards) == ("dr_grpo", "none")
    assert_same_run(trl, rlvr)
    ids, advantages, _ = rlvr[0][0]
    rewards = [length_mod_3([c])[0] + vowel_count([c])[0] for c in tok.batch_decode(ids, skip_special_tokens=True)]
    centred = [r - statistics.mean(rewards[g : g + 4]) for g in range(0, 8, 4) for r in rewards[g : g + 4]]
    assert advantages.tolist() == pytest.approx(centred, abs=1e-5)


class FewerVowels(Plugin):
    """A shaping plugin: -0.1 per vowel of the completion (read from the rewards' ``vowel_count`` column)."""

    name = "fewer-vowels"

    @hookimpl
    def rlvr_length_penalty(self, rewards_per_func, reward_names):
        return -0.1 * rewards_per_func[:, reward_names.index("vowel_count")]


def test_a_shaping_plugin_adds_exactly_its_group_centred_penalty(tok, tmp_path):
    """``plugins={"fewer-vowels": {}}``: on the first batch, the same completions as TRL and TRL's advantages
    plus the penalty minus its group mean (never divided by a std), nothing else."""
    with temporary_plugin(FewerVowels):
        trl, rlvr = same_run(tok, tmp_path, rlvr_extra={"plugins": {"fewer-vowels": {}}})
    (ids_a, adv_a, _), (ids_b, adv_b, _) = trl[0][0], rlvr[0][0]
    assert torch.equal(ids_a, ids_b)
    vowels = vowel_count(tok.batch_decode(ids_a, skip_special_tokens=True))
    penalty = [-0.1 * v for v in vowels]
    centred = [p - statistics.mean(penalty[g : g + 4]) for g in range(0, 8, 4) for p in penalty[g : g + 4]]
    assert (adv_b.double() - adv_a.double()).tolist() == pytest.approx(centred, abs=1e-6)
    assert max(abs(c) for c in centred) > 0  # the vowel counts differ within a group: the plugin did something


# -- reward_funcs through the reward engine (isolate_reward_funcs=True) ---------------------------------------------


def test_reward_funcs_through_the_engine_train_the_same_at_every_step(tok, tmp_path):
    """Each batch is one job in a worker process: TRL's batch call, the same run."""
    trl, rlvr = same_run(tok, tmp_path, rlvr_extra={"isolate_reward_funcs": True})
    assert_same_run(trl, rlvr)


def test_a_batch_job_logs_and_sees_the_trainer_state_from_its_worker(tok, tmp_path):
    import os

    dataset = standard_dataset().map(lambda row: {"parent_pid": str(os.getpid())})
    trainer = TRAINERS["rlvr"](
        tiny_causal_lm(tok),
        reward_funcs=[batch_logging_reward],
        args=small_args(tmp_path, log_completions=True),
        train_dataset=dataset,
        processing_class=tok,
        isolate_reward_funcs=True,
    )
    trainer.train()
    assert trainer.args.reward_weights == [1.0] and not trainer.engines.settings().in_process
    assert logged(trainer, "custom/calls_in_worker") == [1.0, 1.0]  # one job per batch, each in a worker
    assert list(trainer._logs["extra"]["step"])[-4:] == [1, 1, 1, 1]


def test_the_deadline_bounds_the_whole_call_and_leaves_the_batch_unscored(tok, tmp_path):
    trainer = engine_trainer(tok, tmp_path, [slow_reward, length_mod_3], timeout_s=1.0, max_steps=1)
    seen = capture_advantages(trainer)
    trainer.train()
    assert logged(trainer, "rlvr/failed/slow_reward") == [4]  # the batch: one call, 4 completions
    assert logged(trainer, "rlvr/frac_no_score") == [1.0] and seen[0].tolist() == [0.0] * 4


def test_an_exception_in_the_worker_stops_training_naming_the_function(tok, tmp_path):
    from rlvr_plugins.engine import RewardFunctionError

    trainer = engine_trainer(tok, tmp_path, [raising_reward], max_steps=1)
    with pytest.raises(RewardFunctionError, match="ZeroDivisionError: reward bug"):
        trainer.train()


def engine_trainer(tok, tmp_path, reward_funcs, timeout_s=10.0, **overrides):
    return TRAINERS["rlvr"](
        tiny_causal_lm(tok),
        reward_funcs=reward_funcs,
        args=small_args(tmp_path / "rlvr", **overrides),
        train_dataset=standard_dataset(),
        processing_class=tok,
        isolate_reward_funcs=True,
        engine_options={"num_workers": 1, "timeout_s": timeout_s},
    )
