"""The trainer subclass: fidelity with plain TRL, and every hook observed doing its job in training."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from trl import GRPOTrainer

from rlvr_plugins import Plugin, hookimpl
from rlvr_plugins.checkpoints import checkpoint_bytes_estimate
from rlvr_plugins.errors import PluginContractError, PluginError
from rlvr_plugins.manager import build_plugin_set, temporary_plugin
from rlvr_plugins.rewards import Engines
from rlvr_plugins.testing import digit_share, grpo_args, tiny_model, tiny_rows
from rlvr_plugins.trainer import RLVRTrainer


def digit_share_reward(completions, **kwargs):
    return [digit_share(prompt=None, completion=c, example=None) for c in completions]


@pytest.fixture
def digit_reward(reward_plugin):
    """The plugin ``digit-reward``: the reward ``digit_share_reward``, in-process."""
    return reward_plugin("digit-reward", digit_share, reward_name="digit_share_reward", isolated=False)


class Recorder(Plugin):
    """Records what the trainer hands to the hooks; adds a length penalty of -0.01 per token."""

    name = "recorder"

    def __init__(self, options=None):
        super().__init__(options)
        self.calls: list = []

    @hookimpl
    def rlvr_length_penalty(self, completion_lengths, num_generations, step):
        self.calls.append(("penalty", completion_lengths.clone(), num_generations, step))
        return -0.01 * completion_lengths.float()

    @hookimpl
    def rlvr_on_rewards(self, example_indices, rewards, advantages, valid, rewards_per_func, log_metric):
        self.calls.append(
            ("rewards", list(example_indices), rewards.clone(), advantages.clone(), rewards_per_func.clone())
        )
        log_metric("recorder/seen", float(len(example_indices)))


@pytest.fixture
def recorder():
    """The plugin ``recorder`` registered for the test; ``calls(trainer)`` is what its instance recorded."""
    with temporary_plugin(Recorder):
        yield lambda trainer: trainer.plugin_set.get("recorder").calls


def make_trainer(tmp_path, plugins, tokenizer, model=None, **overrides):
    ps = build_plugin_set(plugins)
    return RLVRTrainer(
        plugin_set=ps,
        engines=Engines(in_process=True),
        model=model or tiny_model(tokenizer),
        args=grpo_args(tmp_path, **overrides),
        train_dataset=Dataset.from_list(tiny_rows()),
        processing_class=tokenizer,
    )


def losses(trainer):
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


@pytest.mark.parametrize("beta", [0.0, 0.1])
def test_defaults_give_the_same_loss_as_plain_trl_at_every_step(tmp_path, tokenizer, beta, digit_reward):
    overrides = dict(max_steps=3, beta=beta)
    model_dir = str(tmp_path / "init")  # a path, so that TRL can build the reference model for beta > 0
    tiny_model(tokenizer).save_pretrained(model_dir)
    plain = GRPOTrainer(
        model=model_dir,
        reward_funcs=[digit_share_reward],
        args=grpo_args(tmp_path / "plain", **overrides),
        train_dataset=Dataset.from_list(tiny_rows()),
        processing_class=tokenizer,
    )
    plain.train()
    ours = make_trainer(tmp_path / "ours", {"digit-reward": {}}, tokenizer, model=model_dir, **overrides)
    ours.train()
    assert len(losses(plain)) == 3
    assert losses(ours) == pytest.approx(losses(plain), rel=1e-6, abs=1e-8)
    assert any(abs(x) > 0 for x in losses(plain))
    for key in ("reward", "rewards/digit_share_reward/mean"):
        assert [h[key] for h in ours.state.log_history if key in h] == pytest.approx(
            [h[key] for h in plain.state.log_history if key in h]
        )


def test_hooks_receive_gathered_batch_and_shape_the_advantages(tmp_path, tokenizer, digit_reward, recorder):
    trainer = make_trainer(tmp_path, {"digit-reward": {}, "recorder": {}, "rloo": {}}, tokenizer, max_steps=2)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    penalties = [c for c in recorder(trainer) if c[0] == "penalty"]
    observed = [c for c in recorder(trainer) if c[0] == "rewards"]
    assert len(penalties) == 2 and len(observed) == 2
    _, lengths, G, step = penalties[0]
    assert G == 4 and step == 0 and lengths.shape == (8,) and 1 <= lengths.min() and lengths.max() <= 8
    _, indices, rewards, adv, per_func = observed[0]
    # the total reward is the digit share plus the recorder's length penalty
    assert torch.allclose(rewards, per_func[:, 0] - 0.01 * lengths.float(), atol=1e-6)
    # each prompt repeated G times in a row (the sampler contract) and the rloo formula
    assert indices[0:4] == [indices[0]] * 4 and indices[4:8] == [indices[4]] * 4
    # rloo on the outcome reward, plus the penalty centred on its group mean (never std-scaled)
    outcome = per_func[:, 0].view(-1, 4)
    penalty = (-0.01 * lengths.float()).view(-1, 4)
    expected = outcome - (outcome.sum(1, keepdim=True) - outcome) / 3 + penalty - penalty.mean(1, keepdim=True)
    expected = expected.reshape(-1)
    groups = rewards.view(-1, 4)
    zero_var = (groups.max(1).values == groups.min(1).values).repeat_interleave(4)
    expected[zero_var] = 0
    assert torch.allclose(adv, expected, atol=1e-6)
    logged = trainer.state.log_history
    assert any("penalties/recorder/mean" in h for h in logged)
    assert [h["recorder/seen"] for h in logged if "recorder/seen" in h] == [8.0, 8.0]
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))


class FixedSampler(Plugin):
    name = "fixed-sampler"

    @hookimpl
    def rlvr_train_sampler(self, num_generations, prompts_per_batch, repeat_count):
        order = [5, 3, 5, 3, 9, 1, 9, 1]
        return [
            i
            for chunk in (order[:2], order[4:6])
            for _ in range(repeat_count)
            for i in chunk
            for _ in range(num_generations)
        ][: 2 * 2 * num_generations * repeat_count]


def test_sampler_plugin_decides_the_prompt_order(tmp_path, tokenizer, digit_reward, recorder):
    with temporary_plugin(FixedSampler):
        trainer = make_trainer(
            tmp_path, {"digit-reward": {}, "recorder": {}, "fixed-sampler": {}}, tokenizer, max_steps=2
        )
    trainer.train()
    seen = [c[1] for c in recorder(trainer) if c[0] == "rewards"]
    assert seen == [[5] * 4 + [3] * 4, [9] * 4 + [1] * 4]


def flaky_score(*, prompt, completion, example):
    """A reward that cannot score completions of rows with an even index."""
    if example["rlvr_index"] % 2 == 0:
        raise RuntimeError("scorer crashed")
    return float(len(completion) % 3)


def test_unscorable_completions_get_zero_advantage_and_are_counted(tmp_path, tokenizer, reward_plugin, recorder):
    reward_plugin("flaky", flaky_score, isolated=False)
    trainer = make_trainer(tmp_path, {"flaky": {}, "recorder": {}}, tokenizer, max_steps=2)
    trainer.train()
    batches = [c for c in recorder(trainer) if c[0] == "rewards"]
    for _, indices, rewards, adv, _ in batches:
        for i, idx in enumerate(indices):
            if idx % 2 == 0:
                assert adv[i] == 0 and math.isnan(rewards[i])
    evens = [sum(idx % 2 == 0 for idx in indices) for _, indices, *_ in batches]
    assert len(evens) == 2 and 0 < sum(evens) < 16  # both kinds of row were drawn
    logged = trainer.state.log_history
    # per step: the share of the 8 completions without a score, and the number that failed
    assert [h["rlvr/frac_no_score"] for h in logged if "rlvr/frac_no_score" in h] == [n / 8 for n in evens]
    assert [h["rlvr/failed/flaky"] for h in logged if "rlvr/failed/flaky" in h] == evens


class BadEstimator(Plugin):
    name = "bad-estimator"

    @hookimpl
    def rlvr_compute_advantages(self, rewards):
        return rewards[:-1]


def test_estimator_returning_wrong_shape_is_a_clear_error(tmp_path, tokenizer, digit_reward):
    with temporary_plugin(BadEstimator):
        trainer = make_trainer(tmp_path, {"digit-reward": {}, "bad-estimator": {}}, tokenizer)
    with pytest.raises(
        PluginContractError,
        match=r"plugin 'bad-estimator': rlvr_compute_advantages returned "
        r"shape \(7,\); expected \(8,\)",
    ):
        trainer.train()


def test_no_reward_plugin_is_an_error(tmp_path, tokenizer):
    with pytest.raises(PluginError, match="no reward function is enabled"):
        make_trainer(tmp_path, {}, tokenizer)


def test_default_grpo_estimator_matches_formula_on_logged_batch(tmp_path, tokenizer, digit_reward, recorder):
    trainer = make_trainer(tmp_path, {"digit-reward": {}, "recorder": {}}, tokenizer, max_steps=1)
    trainer.train()
    _, _, rewards, adv, per_func = [c for c in recorder(trainer) if c[0] == "rewards"][0]
    _, lengths, _, _ = [c for c in recorder(trainer) if c[0] == "penalty"][0]
    # by hand, group by group: the z-score of the outcome reward, (r - mean) / (sample std + 1e-4), plus the
    # recorder's length penalty centred on its group mean, not std-scaled (rule 14); 0 where the total is constant
    expected = []
    for start in range(0, 8, 4):
        outcome = per_func[start : start + 4, 0].tolist()
        penalty = [-0.01 * n for n in lengths[start : start + 4].tolist()]
        total = rewards[start : start + 4].tolist()
        mean, std, penalty_mean = statistics.mean(outcome), statistics.stdev(outcome), statistics.mean(penalty)
        expected += (
            [0.0] * 4
            if max(total) == min(total)
            else [(r - mean) / (std + 1e-4) + p - penalty_mean for r, p in zip(outcome, penalty)]
        )
    assert adv.tolist() == pytest.approx(expected, rel=1e-5, abs=1e-6)
    assert any(a != 0 for a in expected)


class ConstantRollout(Plugin):
    """Generation replaced by a rollout that answers every prompt with "12", the last token injected."""

    name = "constant-rollout"

    @hookimpl
    def rlvr_rollout_func(self, tokenizer, num_generations):
        def rollout(prompts, trainer):
            ids = tokenizer("12", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            prompt_ids = [tokenizer(p)["input_ids"] for p in prompts]
            n = len(prompt_ids)
            return {
                "prompt_ids": prompt_ids,
                "completion_ids": [ids] * n,
                "logprobs": [[0.0] * len(ids)] * n,
                "env_mask": [[1] * (len(ids) - 1) + [0]] * n,
            }

        return rollout


def test_rollout_plugin_replaces_generation(tmp_path, tokenizer, digit_reward, recorder):
    with temporary_plugin(ConstantRollout):
        trainer = make_trainer(
            tmp_path, {"digit-reward": {}, "recorder": {}, "constant-rollout": {}}, tokenizer, max_steps=1
        )
    trainer.train()
    _, _, rewards, adv, per_func = [c for c in recorder(trainer) if c[0] == "rewards"][0]
    lengths = [c[1] for c in recorder(trainer) if c[0] == "penalty"][0]
    assert per_func[:, 0].tolist() == [1.0] * 8  # "12": all digits
    assert lengths.tolist() == [3] * 8  # "1", "2" and the (injected) EOS: all completion tokens count
    assert adv.abs().sum() == 0  # identical completions: zero-variance groups


class AbstainingRollout(Plugin):
    name = "abstaining-rollout"

    @hookimpl
    def rlvr_rollout_func(self):
        return None


def test_two_rollout_plugins_conflict_unless_one_abstains(tmp_path, tokenizer, digit_reward):
    from rlvr_plugins.errors import PluginConflictError

    class OtherRollout(ConstantRollout):
        name = "other-rollout"

    with temporary_plugin(ConstantRollout), temporary_plugin(OtherRollout), temporary_plugin(AbstainingRollout):
        with pytest.raises(PluginConflictError, match="constant-rollout.*other-rollout.*rlvr_rollout_func"):
            make_trainer(tmp_path, {"digit-reward": {}, "constant-rollout": {}, "other-rollout": {}}, tokenizer)
        trainer = make_trainer(
            tmp_path, {"digit-reward": {}, "constant-rollout": {}, "abstaining-rollout": {}}, tokenizer
        )
    assert trainer.rollout_func is not None


def test_log_completions_shows_the_plugin_advantages(tmp_path, tokenizer, digit_reward):
    """trainer.log_completions: TRL's completions table (completions/completions_<step>.parquet) holds the
    advantages the estimator plugin computed, here mean-baseline: A_i = r_i - mean of the prompt's group."""
    import pandas as pd

    trainer = make_trainer(
        tmp_path, {"digit-reward": {}, "mean-baseline": {}}, tokenizer, max_steps=1, log_completions=True
    )
    trainer.train()
    [path] = sorted((Path(trainer.args.output_dir) / "completions").glob("completions_*.parquet"))
    table = pd.read_parquet(path)
    assert len(table) == 8
    for start in range(0, 8, 4):
        group = table.iloc[start : start + 4]
        assert group["prompt"].map(str).nunique() == 1
        rewards = [digit_share(prompt=None, completion=c, example=None) for c in group["completion"]]
        assert group["digit_share_reward"].tolist() == pytest.approx(rewards, abs=1e-6)
        mean = sum(rewards) / 4
        assert group["advantage"].tolist() == pytest.approx([r - mean for r in rewards], abs=1e-6)
    assert table["advantage"].abs().sum() > 0


def test_batch_and_length_metrics_by_hand():
    """``rlvr/*``, ``penalties/*`` and the correct/wrong length metrics of one small batch, computed by hand
    (row 2 has no score: reward b failed on it, and reward a did not apply)."""
    import collections
    import types

    from rlvr_plugins.trainer import BatchAdvantages, RLVRTrainer

    nan = float("nan")
    rewards = torch.tensor([[1.0, 0.0], [0.0, 1.0], [nan, nan], [1.0, 1.0]])
    failed = torch.tensor([[False, False], [False, False], [False, True], [False, False]])
    valid = torch.tensor([True, True, False, True])
    result = BatchAdvantages(
        valid,
        torch.tensor([1.0, 1.0, nan, 2.0]),
        [("p", torch.tensor([0.1, 0.2, 9.0, 0.3]))],
        torch.tensor([0.5, -0.5, 0.0, 0.0]),
        torch.tensor([True, False]),
    )
    trainer = types.SimpleNamespace(
        reward_func_names=["a", "b"], correctness_reward="a", correct_threshold=1.0, _warned_no_score=True
    )
    metrics = collections.defaultdict(list)
    RLVRTrainer._log_batch(trainer, metrics, result, failed)
    RLVRTrainer._log_lengths(trainer, metrics, rewards, torch.tensor([10, 20, 30, 40]), ["a", "b"])
    assert {k: pytest.approx(v) for k, v in metrics.items()} == {
        "rlvr/reward_total": [4 / 3],
        "rlvr/advantage_abs_mean": [0.25],
        "rlvr/frac_zero_variance_groups": [0.5],
        "rlvr/frac_no_score": [0.25],
        "rlvr/failed/a": [0.0],
        "rlvr/failed/b": [1.0],
        "penalties/p/mean": [0.2],
        "completions/mean_length_correct": [25.0],
        "completions/mean_length_wrong": [20.0],
        "rlvr/correct_rate": [2 / 3],
    }


# -- the size of a checkpoint, for the disk-full message (no state_dict(), no collective) ---------------
def stepped(optimizer_class, **options):
    """A 3 → 2 linear layer (8 float32 elements: 32 bytes) and its optimizer after one step."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 2)
    optimizer = optimizer_class(layer.parameters(), lr=0.1, **options)
    layer(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    return layer, optimizer


def test_checkpoint_estimate_of_plain_torch_optimizers():
    layer, adam = stepped(torch.optim.Adam)
    assert checkpoint_bytes_estimate(layer.parameters(), adam) == 8 * 4 + 8 * 2 * 4  # + exp_avg, exp_avg_sq
    layer, sgd = stepped(torch.optim.SGD, momentum=0.9)
    assert checkpoint_bytes_estimate(layer.parameters(), sgd) == 8 * 4 + 8 * 4  # + momentum_buffer
    layer, plain = stepped(torch.optim.SGD)
    assert checkpoint_bytes_estimate(layer.parameters(), plain) == 8 * 4  # no state
    fresh = torch.optim.AdamW(layer.parameters())  # no step yet: the known per-parameter state, 2 float32
    assert checkpoint_bytes_estimate(layer.parameters(), fresh) == 8 * 4 + 8 * 2 * 4
    assert checkpoint_bytes_estimate(layer.parameters(), None) == 8 * 4
    layer.weight.requires_grad_(False)  # PEFT: only the trainable parameters are saved, and have state
    assert checkpoint_bytes_estimate(layer.parameters(), fresh, adapters_only=True) == 2 * 4 + 2 * 2 * 4
    layer, sgd = stepped(torch.optim.SGD, momentum=0.9)  # FSDP1: each process holds 1/2 of the model
    assert checkpoint_bytes_estimate(layer.parameters(), sgd, shards=2) == 2 * (8 * 4 + 8 * 4)


class Wrapper:
    """DeepSpeed's ZeRO optimizer (and accelerate's over it): the wrapped optimizer in ``.optimizer``, another
    ``state_dict()`` layout (never called by the estimate)."""

    def __init__(self, optimizer):
        self.optimizer = optimizer

    def state_dict(self):
        raise AssertionError("the estimate calls no state_dict()")


def zero3_placeholder(full: int, trainable: bool = True) -> torch.nn.Parameter:
    """A parameter as ZeRO-3 leaves it on a rank: 0 elements here, the full count in ``ds_numel``."""
    param = torch.nn.Parameter(torch.empty(0), requires_grad=trainable)
    param.ds_numel = full
    return param


def test_checkpoint_estimate_under_zero3_reads_ds_numel_and_the_partitions_state():
    params = [zero3_placeholder(100), zero3_placeholder(28), zero3_placeholder(16, trainable=False)]
    partition = torch.nn.Parameter(torch.zeros(64))  # this rank's flat float32 partition of the 128 trainable
    inner = torch.optim.AdamW([partition], lr=0.1)
    partition.grad = torch.ones(64)
    inner.step()
    # every weight (144 elements) + Adam's 2 float32 per trainable element (128), read from the partition's state
    assert checkpoint_bytes_estimate(params, Wrapper(Wrapper(inner))) == 144 * 4 + 128 * 2 * 4
    fresh = Wrapper(Wrapper(torch.optim.AdamW([torch.nn.Parameter(torch.zeros(64))])))  # before the first step
    assert checkpoint_bytes_estimate(params, fresh) == 144 * 4 + 128 * 2 * 4


class Opaque:
    """An optimizer the estimate cannot read: no torch-like state, a class it does not know."""

    param_groups = ({"lr": 0.1},)


class Broken:
    @property
    def state(self):
        raise RuntimeError("gathering the state needs every rank")


def test_checkpoint_estimate_that_cannot_be_made_is_skipped_with_one_warning(caplog):
    layer = torch.nn.Linear(3, 2)
    assert checkpoint_bytes_estimate(layer.parameters(), Wrapper(Opaque())) is None
    warnings = []
    for optimizer in (Wrapper(Opaque()), Broken()):
        trainer = type("T", (), {})()  # the attributes RLVRTrainer._checkpoint_bytes reads
        trainer.model, trainer.optimizer, trainer.is_fsdp_enabled = layer, optimizer, False
        caplog.clear()
        assert [RLVRTrainer._checkpoint_bytes(trainer) for _ in range(3)] == [None] * 3  # every save: no exception
        assert len(caplog.records) == 1 and caplog.records[0].levelname == "WARNING"
        warnings.append(caplog.messages[0])
    assert warnings[0].startswith("the size of a checkpoint cannot be estimated (the optimizer Opaque has no state")
    assert warnings[1].startswith(
        "the size of a checkpoint cannot be estimated (RuntimeError: gathering the state needs every rank)"
    )


def test_trls_generation_gets_every_argument_when_no_segment_is_running(monkeypatch):
    """The partial-rollouts seam overrides TRL's ``_generate_single_turn``; without a segment it is TRL's call with
    the same arguments, ``has_tool_images`` too (TRL's tool loop passes it for a VLM's tool images)."""
    from trl import GRPOTrainer

    seen = []
    monkeypatch.setattr(
        GRPOTrainer, "_generate_single_turn", lambda self, *a, **kw: seen.append((a, kw)) or ([[1]], None)
    )
    trainer = RLVRTrainer.__new__(RLVRTrainer)  # no model needed: only the seam's branch is exercised
    trainer._rlvr_prefixes = None
    trainer._generate_single_turn([[5]], None, {}, 1, has_tool_images=True)
    assert seen == [(([[5]], None, {}, 1), {"has_tool_images": True})]
