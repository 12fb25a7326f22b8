"""Two GRPO steps on a tiny model with ``qwen-thinking`` enabled: fusion, compliance reward and a budget of 3."""

from __future__ import annotations

import pytest

from rlvr_plugins import Plugin, RewardFunction, hookimpl
from rlvr_plugins.manager import temporary_plugin
from rlvr_qwen_thinking.budget import EARLY_STOP_TEXT

BLOCK = "<think>\n\n</think>\n\n"
STOP_TOKENS = 110  # EARLY_STOP_TEXT in the demo tokenizer
BUDGET = 3
MAX_LEN = BUDGET + STOP_TOKENS + 5  # room for the budget, the stop text and an answer


class Observer(Plugin):
    """A reward that records what it scores, and the lengths and reward names the trainer reports."""

    name = "qwen-test-observer"

    def __init__(self, options=None):
        super().__init__(options)
        self.seen: list = []

    def record(self, *, prompt, completion, example):
        self.seen.append(("completion", prompt, completion, example["thinking_budget_hit"], example["rlvr_index"]))
        return float(len(completion) % 2)

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(RewardFunction("qwen-test-record", self.record, isolated=False))

    @hookimpl
    def rlvr_length_penalty(self, completion_lengths, step):
        self.seen.append(("lengths", step, completion_lengths.tolist()))

    @hookimpl
    def rlvr_on_rewards(self, reward_names, rewards_per_func, step):
        self.seen.append(("rewards", step, list(reward_names), rewards_per_func.tolist()))


def trained_with_budget(tmp_path, tokenizer, model, plugins: dict, classes=()):
    """Two GRPO steps (``TINY_TRAINER`` with ``MAX_LEN`` new tokens) of ``plugins`` (``qwen-thinking`` among them),
    then the observer, with ``classes`` made discoverable, on 16 rendered demo rows: ``(trainer, rows)``."""
    from contextlib import ExitStack

    from datasets import Dataset

    from rlvr_plugins.demo.task import split_train_eval
    from rlvr_plugins.rewards import Engines
    from rlvr_plugins.testing import TINY_TRAINER
    from rlvr_plugins.train.data import render
    from rlvr_plugins.train.run import prepare
    from rlvr_plugins.trainer import RLVRTrainer

    config = {
        "output_dir": str(tmp_path / "run"),
        "seed": 7,
        "plugins": {**plugins, "qwen-test-observer": {}},
        "trainer": {
            **TINY_TRAINER,
            "max_completion_length": MAX_LEN,
            "report_to": "none",
            "logging_steps": 1,
        },
    }
    with ExitStack() as stack:
        for plugin in (Observer, *classes):
            stack.enter_context(temporary_plugin(plugin))
        prepared = prepare(config)
        rows, _ = split_train_eval(16, 0, 0, max_digits=2)
        rows = render(rows, prepared.plugin_set, tokenizer, seed=7)
        trainer = RLVRTrainer(
            plugin_set=prepared.plugin_set,
            engines=Engines(in_process=True),
            model=model,
            args=prepared.grpo_args,
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
        )
        trainer.train()
    return trainer, rows


@pytest.mark.slow
def test_two_grpo_steps_with_a_budget_inject_the_stop_text_and_keep_it_out_of_the_lengths(
    tmp_path, tokenizer, tiny_model
):
    budget = {"no_think_share": 0.5, "compliance_weight": 1.0, "thinking_budget": BUDGET}
    trainer, rows = trained_with_budget(tmp_path, tokenizer, tiny_model, {"qwen-thinking": budget})
    assert trainer.state.global_step == 2
    seen = trainer.plugin_set.get(Observer.name).seen

    completions = [c for c in seen if c[0] == "completion"]
    assert len(completions) == 16
    # TRL hands the rollout each prompt once per generation: G = 4 completions per prompt, in a row
    indices = [c[4] for c in completions]
    for g in range(0, 16, 4):
        assert indices[g : g + 4] == [indices[g]] * 4
    for _, prompt, completion, hit, index in completions:
        assert prompt == rows[index]["prompt"]
        if prompt.endswith(BLOCK):  # non-thinking: the budget does not apply
            assert not hit and EARLY_STOP_TEXT not in completion
        else:
            assert hit == (EARLY_STOP_TEXT in completion)
    assert sum(c[3] for c in completions) >= 1

    # TRL counts only the policy's tokens (env_mask = 1): each cut completion has 110 tokens fewer
    lengths = [c for c in seen if c[0] == "lengths"]
    logged = [h["completions/mean_length"] for h in trainer.state.log_history if "completions/mean_length" in h]
    for step, (_, _, full) in enumerate(lengths):
        hits = [c[3] for c in completions[8 * step : 8 * step + 8]]
        assert max(full) <= MAX_LEN
        assert logged[step] == pytest.approx(sum(n - STOP_TOKENS * h for n, h in zip(full, hits)) / 8)

    ratio = [
        h["qwen_thinking/budget_hit_ratio"] for h in trainer.state.log_history if "qwen_thinking/budget_hit_ratio" in h
    ]
    assert ratio == [pytest.approx(sum(c[3] for c in completions[8 * s : 8 * s + 8]) / 8) for s in range(2)]
    names = [c[2] for c in seen if c[0] == "rewards"][0]
    assert names == ["qwen-mode-compliance", "qwen-test-record"]


class TwoRounds(Plugin):
    """A rollout-pool policy: a second generation round every step, then train on the newest groups."""

    name = "qwen-test-two-rounds"

    @hookimpl
    def rlvr_select_groups(self, groups, needed, round):
        from rlvr_plugins.rollout_pool import GroupSelection

        if round == 0:
            return GroupSelection(more=True)
        return GroupSelection(train=tuple(g.id for g in sorted(groups, key=lambda g: -g.id)[:needed]))


@pytest.mark.slow
def test_the_budget_applies_to_every_round_of_the_rollout_pool(tmp_path, tokenizer, tiny_model):
    """With a pool policy (as dapo-dynamic-sampling's), each extra round goes through the budget's rollout too."""
    plugins = {"qwen-thinking": {"no_think_share": 0.5, "thinking_budget": BUDGET}, "qwen-test-two-rounds": {}}
    trainer, _ = trained_with_budget(tmp_path, tokenizer, tiny_model, plugins, (TwoRounds,))
    assert trainer.state.global_step == 2
    completions = [c for c in trainer.plugin_set.get(Observer.name).seen if c[0] == "completion"]
    assert len(completions) == 2 * 2 * 8  # steps x rounds x rows
    thinking = [c for c in completions if not c[1].endswith(BLOCK)]
    assert thinking and all(hit == (EARLY_STOP_TEXT in completion) for _, _, completion, hit, _ in thinking)
    assert sum(c[3] for c in completions[8:16]) + sum(c[3] for c in completions[24:32]) >= 1  # extra rounds cut too
    assert all(not c[3] for c in completions if c[1].endswith(BLOCK))
    rounds = [h["pool/rounds"] for h in trainer.state.log_history if "pool/rounds" in h]
    assert rounds == [2.0, 2.0]
