"""The rollout pool (rlvr_select_groups) and DAPO's dynamic sampling: invariants, the policy, training runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_plugins import Plugin, cli, hookimpl
from rlvr_plugins.builtin.dynamic_sampling import dapo_selection
from rlvr_plugins.errors import PluginContractError
from rlvr_plugins.rollout_pool import GroupSelection, GroupSummary, RolloutPool, extra_prompts, trim_rows
from rlvr_plugins.testing import digit_share

G = 2


def add_round(pool: RolloutPool, informative: list[bool], step: int) -> list[int]:
    n = len(informative) * G
    rows = {"completion_ids": [torch.arange(1 + i % 3) for i in range(n)], "prompt_ids": [torch.tensor([5])] * n}
    scores = {"lengths": torch.tensor([1 + i % 3 for i in range(n)]), "rewards_per_func": torch.zeros(n, 1)}
    total = torch.tensor([float(j) if flag else 0.0 for flag in informative for j in range(G)])
    return pool.add(rows, scores, list(range(n)), total, informative, step)


# one step = rounds of (number of groups, share informative); the policy is DAPO's with these options
steps_strategy = st.lists(
    st.lists(st.lists(st.booleans(), min_size=1, max_size=4), min_size=1, max_size=4), min_size=1, max_size=6
)


@settings(max_examples=60, deadline=None)
@given(
    steps=steps_strategy,
    needed=st.integers(1, 3),
    keep=st.booleans(),
    max_age=st.integers(0, 2),
)
def test_no_group_trained_twice_and_none_lost_uncounted(steps, needed, keep, max_age):
    pool, trained_ids = RolloutPool(G), []
    for step, rounds in enumerate(steps):
        generated_before = pool.generated
        for r, flags in enumerate(rounds):
            add_round(pool, flags + [False] * max(0, needed - len(flags)), step)  # a round fills a batch
            selection = dapo_selection(
                pool.summaries(step), needed, r, max_rounds=len(rounds), keep_leftovers=keep, max_group_age=max_age
            )
            if not selection.more:
                break
        assert not selection.more  # max_rounds bounds the rounds
        waiting = set(pool.groups)
        chosen, counts = pool.settle(selection, needed, step, "dapo-dynamic-sampling")
        ids = [g.id for g in chosen]
        assert len(ids) == needed and not set(ids) & set(trained_ids)  # never trained twice
        trained_ids += ids
        assert all(step - g.born <= max_age for g in chosen)
        assert all(step - g.born < max_age for g in pool.groups.values())  # what waits is young enough
        # every group that was waiting is trained, still waits, or counted as dropped
        assert counts.groups_kept + counts.dropped_old + counts.discarded + len(pool.groups) == len(waiting)
        assert counts.groups_generated == 0 and pool.generated - generated_before <= len(waiting)
        assert pool.generated == pool.trained + pool.dropped + len(pool.groups)  # conservation
        assert keep or not pool.groups
    # a checkpoint round-trips the pool exactly
    again = RolloutPool.from_state_dict(pool.state_dict())
    assert again.state_dict() == pool.state_dict()


@settings(max_examples=40, deadline=None)
@given(flags=st.lists(st.booleans(), min_size=1, max_size=8), needed=st.integers(1, 4), r=st.integers(0, 3))
def test_every_process_makes_the_same_choice_from_the_same_gathered_state(flags, needed, r):
    """Two pools built from the same gathered rounds (two processes, or a resumed run) choose the same groups."""
    a, b = RolloutPool(G), RolloutPool(G)
    add_round(a, flags, 0)
    b = RolloutPool.from_state_dict(a.state_dict())
    options = dict(max_rounds=2, keep_leftovers=True, max_group_age=1)
    sel_a, sel_b = (
        dapo_selection(a.summaries(1), needed, r, **options),
        dapo_selection(b.summaries(1), needed, r, **options),
    )
    assert sel_a == sel_b


def test_dapo_selection_by_hand():
    groups = [
        GroupSummary(0, 10, 1, True, ()),  # carried from the last step
        GroupSummary(1, 11, 2, True, ()),  # too old
        GroupSummary(2, 12, 0, False, ()),
        GroupSummary(3, 13, 0, True, ()),
        GroupSummary(4, 14, 0, True, ()),
        GroupSummary(5, 15, 0, False, ()),
    ]
    sel = dapo_selection(groups, 2, 0, max_rounds=3, keep_leftovers=True, max_group_age=1)
    assert sel == GroupSelection(more=False, train=(0, 3), keep=(4,))  # oldest usable first; 1 is past its age
    assert dapo_selection(groups, 2, 0, max_rounds=3, keep_leftovers=False, max_group_age=1).keep == ()
    assert dapo_selection(groups, 4, 0, max_rounds=3, keep_leftovers=True, max_group_age=1).more
    short = dapo_selection(groups, 4, 2, max_rounds=3, keep_leftovers=True, max_group_age=1)
    assert short == GroupSelection(more=False, train=(0, 3, 4, 5), keep=())  # filled with the newest uninformative


def test_settle_refuses_a_bad_selection_naming_the_plugin():
    pool = RolloutPool(G)
    add_round(pool, [True, False], 0)
    for bad, words in (
        (GroupSelection(train=(0,)), "trains 1 groups, the batch needs 2"),
        (GroupSelection(train=(0, 0)), "trains a group twice"),
        (GroupSelection(train=(0, 7)), "not in the pool"),
        (GroupSelection(train=(0, 1), keep=(1,)), "both trains and keeps"),
    ):
        with pytest.raises(PluginContractError, match=f"plugin 'p': rlvr_select_groups .*{words}"):
            pool.settle(bad, 2, 0, "p")


def test_settle_counts_by_hand():
    pool = RolloutPool(G)
    add_round(pool, [True, True, False], 0)  # ids 0, 1, 2
    _, counts = pool.settle(GroupSelection(train=(0,), keep=(1,)), 1, 0, "p")
    assert (counts.groups_kept, counts.discarded, counts.dropped_old) == (1, 1, 0)
    add_round(pool, [False, False], 1)  # ids 3, 4
    chosen, counts = pool.settle(GroupSelection(train=(1,)), 1, 1, "p")
    assert [g.id for g in chosen] == [1] and (counts.carried, counts.discarded, counts.dropped_old) == (1, 2, 0)
    add_round(pool, [True], 2)
    pool.groups[5].born = 0  # pretend it waited two steps
    _, counts = pool.settle(GroupSelection(train=()), 0, 2, "p")
    assert counts.dropped_old == 1
    assert (pool.generated, pool.trained, pool.dropped) == (6, 2, 4)
    assert counts.metrics(0)["pool/dropped_old"] == 1.0


def test_trim_rows_and_extra_prompts():
    assert [t.tolist() for t in trim_rows(torch.tensor([[1, 2, 0], [3, 0, 0]]), [2, 1])] == [[1, 2], [3]]
    draw = extra_prompts(7, 2, 1, 20, 6)
    assert len(set(draw)) == 6 and all(0 <= i < 20 for i in draw)
    assert draw != extra_prompts(7, 3, 1, 20, 6)


# -- training runs ---------------------------------------------------------------------------------
def half_constant(*, prompt, completion, example):
    """Digit share on odd rows (varies inside a group), 0 on even rows (a group of equal rewards)."""
    return digit_share(prompt=prompt, completion=completion, example=example) if example["rlvr_index"] % 2 else 0.0


def pool_trainer(tmp_path, tokenizer, plugins, **overrides):
    from datasets import Dataset

    from rlvr_plugins.manager import build_plugin_set
    from rlvr_plugins.rewards import Engines
    from rlvr_plugins.testing import grpo_args, tiny_model, tiny_rows
    from rlvr_plugins.trainer import RLVRTrainer

    return RLVRTrainer(
        plugin_set=build_plugin_set(plugins),
        engines=Engines(in_process=True),
        model=tiny_model(tokenizer),
        args=grpo_args(tmp_path, **overrides),
        train_dataset=Dataset.from_list(tiny_rows()),
        processing_class=tokenizer,
    )


def logged(trainer, key):
    return [h[key] for h in trainer.state.log_history if key in h]


@pytest.mark.slow
def test_dynamic_sampling_trains_only_on_informative_groups(tmp_path, tokenizer, reward_plugin):
    reward_plugin("half-constant", half_constant, isolated=False)
    plain = pool_trainer(tmp_path / "plain", tokenizer, {"half-constant": {}}, max_steps=3)
    plain.train()
    assert max(logged(plain, "rlvr/frac_zero_variance_groups")) > 0
    assert not any(k.startswith("pool/") for h in plain.state.log_history for k in h)
    dapo = pool_trainer(
        tmp_path / "dapo", tokenizer, {"half-constant": {}, "dapo-dynamic-sampling": {"max_rounds": 8}}, max_steps=3
    )
    dapo.train()
    assert logged(dapo, "rlvr/frac_zero_variance_groups") == [0.0, 0.0, 0.0]
    assert logged(dapo, "pool/short_batch") == [0.0, 0.0, 0.0]
    assert all(r >= 1 for r in logged(dapo, "pool/rounds")) and max(logged(dapo, "pool/rounds")) > 1
    generated, kept = logged(dapo, "pool/groups_generated"), logged(dapo, "pool/groups_kept")
    assert kept == [2.0, 2.0, 2.0] and all(g >= k for g, k in zip(generated, kept))
    assert all(0 < f <= 1 for f in logged(dapo, "pool/frac_informative"))
    assert all(x != 0 for x in logged(dapo, "loss"))


@pytest.mark.slow
def test_carried_groups_train_with_the_log_probs_of_their_own_generation(tmp_path, tokenizer, reward_plugin):
    reward_plugin("half-constant", half_constant, isolated=False)
    options = {"max_rounds": 4, "keep_leftovers": True, "max_group_age": 1}
    trainer = pool_trainer(
        tmp_path, tokenizer, {"half-constant": {}, "dapo-dynamic-sampling": options}, max_steps=4, learning_rate=0.05
    )
    trainer.train()
    carried, drift = logged(trainer, "pool/carried"), logged(trainer, "rlvr/ratio/abs_log_mean")
    assert sum(carried) > 0 and logged(trainer, "rlvr/frac_zero_variance_groups") == [0.0] * 4
    for c, d in zip(carried, drift, strict=True):
        # a carried group was generated before the last update: its ratio to the current policy is not 1
        assert (d > 1e-4) if c else (d < 1e-5), (carried, drift)
    pool = trainer._rlvr_pool
    assert pool.generated == pool.trained + pool.dropped + len(pool.groups)


@pytest.mark.slow
def test_a_resumed_run_trains_on_the_same_batches_with_the_same_waiting_groups(tmp_path, tokenizer, reward_plugin):
    """Exact resume with groups waiting in the pool at the checkpoint (the CLI's SIGKILL test,
    tests/test_resume.py, covers the pool's rounds; this one the carried groups)."""
    import json

    from rlvr_plugins.checkpoints import PLUGIN_STATE_FILE
    from rlvr_plugins.trainer import POOL_STATE_KEY

    reward_plugin("half-constant", half_constant, isolated=False)
    plugins = {"half-constant": {}, "dapo-dynamic-sampling": {"max_rounds": 4, "keep_leftovers": True}}
    args = dict(max_steps=4, learning_rate=0.05, save_strategy="steps", save_steps=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bitwise-equal CPU reductions between the two runs
    try:
        a = pool_trainer(tmp_path / "a", tokenizer, plugins, **args)
        a.train()
        waiting = {
            step: len(
                json.loads((tmp_path / "a" / "run" / f"checkpoint-{step}" / PLUGIN_STATE_FILE).read_text())[
                    POOL_STATE_KEY
                ]["groups"]
            )
            for step in (1, 2, 3)
        }
        resume_at = next(step for step, n in waiting.items() if n)  # a checkpoint with groups waiting
        b = pool_trainer(tmp_path / "b", tokenizer, plugins, **args)
        b.train(resume_from_checkpoint=str(tmp_path / "a" / "run" / f"checkpoint-{resume_at}"))
    finally:
        torch.set_num_threads(threads)
    assert logged(a, "pool/carried")[resume_at] > 0  # the step after the checkpoint trains a waiting group
    assert b.state.global_step == 4
    for key in ("loss", "pool/carried", "pool/rounds", "pool/groups_generated", "rlvr/ratio/abs_log_mean"):
        # b's history: a's up to the checkpoint (restored), then its own steps
        assert logged(b, key) == pytest.approx(logged(a, key), rel=1e-6, abs=1e-9), key


class Generated(Plugin):
    """Records the prompt of every generated group."""

    name = "generated"
    seen: ClassVar[list] = []

    @hookimpl
    def rlvr_on_rewards(self, example_indices, num_generations, step):
        Generated.seen += [(step, i) for i in example_indices[::num_generations]]


@pytest.mark.slow
def test_saturated_prompts_are_skipped_before_generating(tmp_path, tokenizer, reward_plugin):
    """Even prompts always score 0: after one group (a streak of G = 4 alike) they are never generated again
    (recheck 0); without skipping they keep coming back."""
    from rlvr_plugins.manager import temporary_plugin

    reward_plugin("half-constant", half_constant, isolated=False)
    runs = {}
    for streak in (0, 4):
        Generated.seen = []
        options = {"max_rounds": 3, "skip_streak": streak, "recheck_probability": 0.0}
        with temporary_plugin(Generated):
            trainer = pool_trainer(
                tmp_path / str(streak),
                tokenizer,
                {"half-constant": {}, "dapo-dynamic-sampling": options, "generated": {}},
                max_steps=4,
            )
            trainer.train()
        runs[streak] = (list(Generated.seen), logged(trainer, "pool/skipped_prompts"))
    seen, skipped = runs[4]
    even = [i for _, i in seen if i % 2 == 0]
    assert len(even) == len(set(even)) and sum(skipped) > 0
    plain_seen, plain_skipped = runs[0]
    plain_even = [i for _, i in plain_seen if i % 2 == 0]
    assert plain_skipped == [0.0] * 4 and len(plain_even) > len(set(plain_even))
    assert trainer._rlvr_record.streaks[even[0]] == [0.0, 4]


class RoundRecorder(Plugin):
    """Records the prompts of every generated group with its step and round."""

    name = "round-recorder"
    seen: ClassVar[list] = []

    @hookimpl
    def rlvr_on_rewards(self, example_indices, num_generations, step, round):
        RoundRecorder.seen.append((step, round, example_indices[::num_generations]))


def all_but_five(*, prompt, completion, example):
    """1 for every prompt but rlvr_index 5, which is always wrong: every group's rewards are equal."""
    return 0.0 if example["rlvr_index"] == 5 else 1.0


@pytest.mark.slow
def test_kimi_curriculum_draws_the_extra_rounds_and_counts_every_generated_group(tmp_path, tokenizer, reward_plugin):
    """kimi-curriculum beside dapo-dynamic-sampling: with prompt 5 never solved and every other always, its
    weights (1 against the floor 1e-4) put 5 into every extra round, and its success record grows by every
    generated group, trained or not (all are uninformative here, so each step runs max_rounds rounds)."""
    pytest.importorskip("rlvr_kimi")
    from rlvr_kimi.sampler import CurriculumState
    from rlvr_plugins.manager import temporary_plugin

    reward_plugin("all-but-five", all_but_five, isolated=False)
    kimi = {"schedule": "none", "correctness_reward": "all-but-five", "floor": 1e-4, "prior_strength": 0.0}
    plugins = {
        "all-but-five": {},
        "kimi-curriculum": kimi,
        "dapo-dynamic-sampling": {"max_rounds": 3},
        "round-recorder": {},
    }
    state = CurriculumState.fresh(16)
    state.successes = [0 if i == 5 else 100 for i in range(16)]
    state.attempts = [100] * 16
    RoundRecorder.seen = []
    with temporary_plugin(RoundRecorder):
        trainer = pool_trainer(tmp_path, tokenizer, plugins, max_steps=2)
        trainer.plugin_set.get("kimi-curriculum").rlvr_load_state_dict(state.to_dict())
        trainer.train()
    assert logged(trainer, "pool/rounds") == [3.0, 3.0]
    extra = [prompts for _, r, prompts in RoundRecorder.seen if r >= 1]
    assert len(extra) == 4 and all(5 in prompts for prompts in extra)
    after = trainer.plugin_set.get("kimi-curriculum").state
    attempts, successes = list(state.attempts), list(state.successes)
    for _, _, prompts in RoundRecorder.seen:  # G = 4 completions per group, all right except prompt 5's
        for i in prompts:
            attempts[i] += 4
            successes[i] += 0 if i == 5 else 4
    assert after.attempts == attempts and after.successes == successes
    assert sum(after.attempts) - 1600 == 4 * sum(logged(trainer, "pool/groups_generated")) == 4 * 12


class OwnSampler(Plugin):
    """A sampler plugin that cannot tell the rollout pool which prompts an extra round may draw."""

    name = "own-sampler"

    @hookimpl
    def rlvr_train_sampler(self, dataset):
        return None


class ShortSampler(Plugin):
    """TRL's sampler, and a pool order that repeats a prompt: a broken rlvr_pool_prompts."""

    name = "short-sampler"

    @hookimpl
    def rlvr_train_sampler(self, dataset, num_generations, prompts_per_batch, repeat_count, seed):
        from trl.trainer.utils import RepeatSampler

        return RepeatSampler(dataset, num_generations, prompts_per_batch, repeat_count, seed=seed)

    @hookimpl
    def rlvr_pool_prompts(self, num_prompts):
        return [3, 3]


def test_a_broken_pool_order_stops_the_run_naming_the_sampler(tmp_path, tokenizer, reward_plugin):
    from rlvr_plugins.manager import temporary_plugin

    reward_plugin("half-constant", half_constant, isolated=False)
    plugins = {"half-constant": {}, "short-sampler": {}, "dapo-dynamic-sampling": {"max_rounds": 2}}
    with temporary_plugin(ShortSampler):
        trainer = pool_trainer(tmp_path, tokenizer, plugins, max_steps=1)
        with pytest.raises(PluginContractError, match=r"plugin 'short-sampler': rlvr_pool_prompts returned \[3, 3\]"):
            trainer.train()


class Drawer(Plugin):
    """Answers rlvr_pool_prompts without providing the sampler."""

    name = "drawer"

    @hookimpl
    def rlvr_pool_prompts(self, num_prompts):
        return list(range(num_prompts))


@pytest.mark.parametrize(
    ("plugins", "message"),
    [
        ({"own-sampler": {}, "dapo-dynamic-sampling": {}}, "sampler plugin 'own-sampler' does not implement it"),
        ({"own-sampler": {}, "drawer": {}}, "plugin 'drawer' implements rlvr_pool_prompts, which only the plugin"),
    ],
)
def test_the_pool_needs_prompts_from_the_train_samplers_plugin(plugins, message):
    """The one combination refused: a pool whose sampler cannot draw its extra rounds' prompts (or a plugin that
    answers for a sampler that is not its own)."""
    from types import SimpleNamespace

    from rlvr_plugins.errors import PluginValidationError
    from rlvr_plugins.manager import build_plugin_set, temporary_plugin

    with temporary_plugin(OwnSampler), temporary_plugin(Drawer):
        plugin_set = build_plugin_set({"r1-accuracy": {}, **plugins})
        with pytest.raises(PluginValidationError, match=message):
            plugin_set.validate_run(SimpleNamespace(max_completion_length=64), None)
    if "drawer" not in plugins:  # the default sampler draws them; kimi-curriculum too
        build_plugin_set({"r1-accuracy": {}, "dapo-dynamic-sampling": {}}).validate_run(
            SimpleNamespace(max_completion_length=64), None
        )
        if importlib.util.find_spec("rlvr_kimi"):
            build_plugin_set({"r1-accuracy": {}, "kimi-curriculum": {}, "dapo-dynamic-sampling": {}}).validate_run(
                SimpleNamespace(max_completion_length=64), None
            )


@pytest.mark.slow
def test_dynamic_sampling_with_num_iterations_reuses_the_chosen_batch(tmp_path, tokenizer, reward_plugin):
    """num_iterations = 2: one pooled generation per two optimizer steps (TRL's buffer), with TRL's own
    old_per_token_logps; the second pass over the batch is off-policy (ratio != 1)."""
    reward_plugin("half-constant", half_constant, isolated=False)
    plugins = {"half-constant": {}, "dapo-dynamic-sampling": {"max_rounds": 8}, "batch-std": {}}
    trainer = pool_trainer(tmp_path, tokenizer, plugins, max_steps=4, num_iterations=2, learning_rate=0.05)
    trainer.train()
    assert len(logged(trainer, "pool/rounds")) == 2  # generations at steps 0 and 2 only
    assert logged(trainer, "rlvr/frac_zero_variance_groups") == [0.0, 0.0]
    drift = logged(trainer, "rlvr/ratio/abs_log_mean")
    assert drift[0] < 1e-6 < drift[1]


def test_dynamic_sampling_draws_its_rounds_through_the_tool_loop(tmp_path, capsys):
    """dapo-dynamic-sampling with an environment (the agentic demo at toy size): every extra round is played
    as episodes through TRL's tool loop, and an uninformative step runs all max_rounds rounds."""
    out = tmp_path / "run"
    args = [
        f"output_dir={out}",
        "engine.in_process=true",
        "data.train.size=64",
        "data.eval.size=8",
        "sft.examples=32",
        "trainer.max_steps=2",
        "trainer.per_device_train_batch_size=8",
        "trainer.per_device_eval_batch_size=8",
        "trainer.logging_steps=1",
        "trainer.save_steps=2",
        "eval.every_steps=2",
        "plugins.dapo-dynamic-sampling={max_rounds: 3}",
    ]
    config = Path(__file__).resolve().parents[1] / "configs" / "agentic_demo.yaml"
    assert cli.main(["train", str(config), *(x for a in args for x in ("--set", a))]) == 0
    capsys.readouterr()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "pool/rounds" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for r in steps:
        assert r["pool/groups_generated"] == r["pool/rounds"]  # one group of 8 episodes per round
        assert r["pool/rounds"] == 3 or r["pool/frac_informative"] > 0
        assert "tools/call_frequency" in r and "tools/failure_frequency" in r  # the rounds ran the tool loop
