"""The existing plugins in runs with an environment (scripted multi-turn episodes on TRL's tool loop): every advantage
estimator on the episodes' rewards (OPO's length weights are the policy's tokens), ``kimi-length`` on the policy's
tokens only, ``kimi-curriculum`` fed by the episodes, and an exact resume with an environment plugin whose state is
checkpointed like any plugin's."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch
from datasets import Dataset
from transformers import TrainerCallback

from rlvr_plugins import Environment, Plugin, hookimpl
from rlvr_plugins.manager import temporary_plugin
from rlvr_plugins.rewards import Engines
from rlvr_plugins.testing import (
    TOOL_MARKERS,
    grpo_args,
    reward_plugin_class,
    scripted_turns,
    tiny_model,
    tool_call,
    tool_tokenizer,
)
from rlvr_plugins.train.run import prepare
from rlvr_plugins.trainer import RLVRTrainer
from test_environments import ANSWER, ROWS, Seen, reply, turns_reward

SPECIAL = [*TOOL_MARKERS, "<think>", "</think>", "<answer>", "</answer>"]


def n_tokens(text: str) -> int:
    """Tokens of ``text`` for :func:`tool_tokenizer`: one per character, one per special token (counted by hand)."""
    return len(text) - sum(text.count(m) * (len(m) - 1) for m in SPECIAL)


def policy_tokens(prompt: str) -> int:
    """The tokens the scripted policy (test_environments.reply) writes in an episode of ``prompt``, by hand."""
    wanted = int(re.search(r"calls=(\d)", prompt).group(1))
    turns = [ANSWER]
    for done in range(wanted):
        if "bad" in prompt and done == 0:
            turns.append('<tool_call>\n{"name": "calculate", "argu\n</tool_call><|im_end|>')
        else:
            turns.append(tool_call("calculate", expression="2 ** 3" if "err" in prompt else f"2 + {done}"))
    return sum(n_tokens(t) for t in turns)


def episodes_trainer(tmp_path, plugins: dict, rows: list[dict], **args) -> RLVRTrainer:
    """A trainer on the tiny model with the ``calculator`` environment and ``plugins``."""
    tok = tool_tokenizer()
    return RLVRTrainer(
        model=tiny_model(tok, max_position_embeddings=2048),
        args=grpo_args(tmp_path, max_completion_length=384, max_steps=1, **args),
        plugins={"calculator": {}, **plugins},
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
        engines=Engines(in_process=True),
    )


def batch_of(trainer: RLVRTrainer, rows: list[dict], policy=reply) -> dict:
    """One generation batch of the scripted episodes of ``rows``."""
    Seen.episodes, Seen.environments = [], []
    scripted_turns(trainer, policy)
    return trainer._generate_and_score_completions([{**r, "rlvr_index": i} for i, r in enumerate(rows)])


def chat(*texts: str, answer: str = "5") -> list[dict]:
    return [{"prompt": [{"role": "user", "content": text}], "answer": answer} for text in texts]


TURNS = reward_plugin_class("turns", turns_reward, isolated=False, completion_format="messages")
DEV = [-1, 0, 1, 0, 0, -1, 1, 0]  # r - group mean: both groups have mean 2
GROUP_STD, BATCH_STD = math.sqrt(2 / 3), math.sqrt(4 / 7)  # sample stds of a group, and of the batch's DEV
ESTIMATORS = {
    "grpo": ({}, [d / GROUP_STD for d in DEV]),
    "rloo": ({}, [4 / 3 * d for d in DEV]),  # r_i - mean of the 3 others
    "dr-grpo": ({}, DEV),
    "reinforce++": ({}, [d / BATCH_STD for d in DEV]),  # the batch mean is 2 too
    "reinforce++-baseline": ({}, [d / BATCH_STD for d in DEV]),
    "gpg": ({}, DEV),  # alpha = B / (B - M) = 8 / 8: no group has equal rewards
    # passes: the 3-turn episodes (one per group): R = 1 - C(3,2)/C(4,2) = 1/2, sigma = 1/2,
    # A_pos = (1 - R) / sigma = 1, A_neg = (1 - R - C(2,1)/C(3,1)) / sigma = -1/3
    "pass-at-k": ({"k": 2, "threshold": 3.0}, [-1 / 3, -1 / 3, 1, -1 / 3, -1 / 3, -1 / 3, 1, -1 / 3]),
    "opo": ({}, None),  # by hand below, from the policy's tokens
}


FAST = ("grpo", "opo", "dr-grpo")  # the default, the one that reads lengths, the one that changes the loss
"""The estimators tested in ``make test``; the others (same path, other formulas) run with the slow tests in CI."""


@pytest.mark.parametrize("estimator", [e if e in FAST else pytest.param(e, marks=pytest.mark.slow) for e in ESTIMATORS])
def test_every_estimator_trains_on_episodes(tmp_path, one_torch_thread, estimator):
    options, expected = ESTIMATORS[estimator]
    rewards = [float(turns) for _, turns in ROWS]
    rows = chat(*(text for text, _ in ROWS))  # rewards (the assistant turns) 1 2 3 2 | 2 1 3 2
    with temporary_plugin(TURNS):
        trainer = episodes_trainer(tmp_path, {"turns": {}, estimator: options}, rows)
        batch = batch_of(trainer, rows)
    assert [sum(m["role"] == "assistant" for m in e) for e in Seen.episodes] == rewards
    lengths = [policy_tokens(text) for text, _ in ROWS]
    written = (batch["completion_mask"] * batch["tool_mask"]).sum(dim=1)
    assert written.tolist() == lengths  # the policy's tokens, counted by hand
    if estimator == "opo":  # b = sum |o| r / sum |o| per group, |o| the policy's tokens (not the tools')
        expected = []
        for g in (0, 4):
            r, w = rewards[g : g + 4], lengths[g : g + 4]
            baseline = sum(a * b for a, b in zip(r, w)) / sum(w)
            expected += [x - baseline for x in r]
        with_tools = batch["completion_mask"].sum(dim=1).tolist()
        assert with_tools != lengths  # the tool results' tokens would have weighed in
    assert batch["advantages"].tolist() == pytest.approx(expected, rel=1e-3, abs=1e-5)
    if estimator == "dr-grpo":
        assert trainer.loss_type == "dr_grpo"

    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train's loop, which is not running
    loss = trainer.compute_loss(trainer.model, batch)
    loss.backward()
    grads = [p.grad for p in trainer.model.parameters() if p.grad is not None]
    assert torch.isfinite(loss) and grads and all(torch.isfinite(g).all() for g in grads)
    assert sum(g.abs().sum() for g in grads) > 0


def correct(*, prompt, completion, example):
    """1 when the episode's last turn answers the row's ``answer``."""
    return 1.0 if completion.rstrip().endswith(f"<answer>{example['answer']}</answer>") else 0.0


PAD = "y" * 150


def padded(text: str) -> str:
    """test_environments.reply, whose answer to a "pad" row opens with :data:`PAD`."""
    turn = reply(text)
    return PAD + turn if turn == ANSWER and "pad" in text.split("<|im_start|>user\n")[1] else turn


def test_kimi_length_counts_the_policys_tokens_only(tmp_path, one_torch_thread):
    """One group of 4: the 2-call episode is the longest counted with its tool results, but not by the policy's own
    tokens; kimi-length's values follow the latter (Kimi k1.5 §2.3.3, by hand)."""
    rows = chat("calls=0 pad", "calls=2", "calls=1", "calls=0")
    rows[2]["answer"] = "6"  # the policy answers 5: wrong
    plugins = {"correct": {}, "kimi-length": {"correctness_reward": "correct"}}
    with temporary_plugin(reward_plugin_class("correct", correct, isolated=False)):
        trainer = episodes_trainer(tmp_path, plugins, rows, num_generations=4, per_device_train_batch_size=4)
    calls = []
    trainer.plugin_set.add_monitor(None, lambda call: calls.append(call) if call.hook == "rlvr_length_penalty" else 0)
    batch = batch_of(trainer, rows, padded)
    lengths = [n_tokens(PAD + ANSWER), policy_tokens("calls=2"), policy_tokens("calls=1"), n_tokens(ANSWER)]
    assert (batch["completion_mask"] * batch["tool_mask"]).sum(dim=1).tolist() == lengths
    assert lengths[0] > lengths[1]
    everything = batch["completion_mask"].sum(dim=1).tolist()
    assert everything[1] > everything[0]  # with the tool results, the 2-call episode would be the longest
    [call] = calls
    assert call.kwargs["completion_lengths"].tolist() == lengths
    shortest, span = lengths[3], lengths[0] - lengths[3]
    lam = [0.5 - (n - shortest) / span for n in lengths]
    assert lam[2] > 0  # short, but wrong: Kimi never rewards a wrong answer for being short
    assert call.result.tolist() == pytest.approx([-0.5, lam[1], 0.0, 0.5])


# -- kimi-curriculum and an exact resume, with an environment plugin that has state ------------------------------


class Book:
    """What the ledger plugin keeps across episodes: how many it has started."""

    def __init__(self):
        self.episodes = 0


class Ledger:
    """An environment that counts its episodes in its plugin's :class:`Book`."""

    def __init__(self, book: Book):
        self.book = book

    def reset(self, **row):
        self.book.episodes += 1

    def add(self, number: int) -> str:
        """Add.

        Args:
            number: what to add.
        """
        return str(number + 3)


class LedgerPlugin(Plugin):
    """The environment ``ledger``; its state (the episodes started) is checkpointed as any plugin's."""

    name = "ledger"

    def __init__(self, options=None):
        super().__init__(options)
        self.book = Book()
        self.drawn: list[list[int]] = []

    @hookimpl
    def rlvr_environments(self, register):
        register(Environment("ledger", lambda: Ledger(self.book)))

    @hookimpl
    def rlvr_on_rewards(self, example_indices, num_generations):
        self.drawn.append(list(example_indices[::num_generations]))

    @hookimpl
    def rlvr_state_dict(self):
        return {"episodes": self.book.episodes}

    @hookimpl
    def rlvr_load_state_dict(self, state):
        self.book.episodes = state["episodes"]


def by_position(trainer, call: str) -> None:
    """A scripted policy whose first turn depends on the episode's position in the batch: at an even one it writes
    ``call`` (a tool call), then the answer 5 (right); at an odd one the answer 6 at once (wrong). So every group of
    an even size carries advantages. (Its position in this process's part of the batch: of the same parity as in
    the whole batch when each process holds an even number of episodes.)"""
    tok = trainer.processing_class

    def generate(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        texts = [
            ANSWER if "<tool_response>" in tok.decode(ids) else call if i % 2 == 0 else WRONG
            for i, ids in enumerate(prompt_ids)
        ]
        return [tok(text, add_special_tokens=False)["input_ids"] for text in texts], None

    trainer._generate_single_turn = generate


WRONG = "<answer>6</answer><|im_end|>"


class StopAfter(TrainerCallback):
    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        control.should_training_stop = state.global_step >= self.step


def curriculum_run(folder, stop_after=None, resume=None):
    rows = [
        {
            "prompt": [{"role": "user", "content": f"{'call' if i % 2 else 'answer'} {i}"}],
            "answer": a,
            "difficulty": i,
            "rlvr_index": i,
        }
        for i, a in enumerate("55656565")
    ]
    plugins = {
        "ledger": {},
        "correct": {},
        "kimi-curriculum": {"correctness_reward": "correct", "full_at_step": 4, "start_quantile": 0.5},
    }
    args = {"max_steps": 4, "save_strategy": "steps", "save_steps": 2, "per_device_train_batch_size": 4}
    with temporary_plugin(reward_plugin_class("correct", correct, isolated=False)), temporary_plugin(LedgerPlugin):
        config = {"output_dir": str(folder), "seed": 3, "plugins": plugins, "trainer": {}}
        prepared = prepare(config)
        tok = tool_tokenizer()
        trainer = RLVRTrainer(
            plugin_set=prepared.plugin_set,
            model=tiny_model(tok, max_position_embeddings=2048),
            args=grpo_args(folder, max_completion_length=96, num_generations=2, **args),
            train_dataset=Dataset.from_list(rows),
            processing_class=tok,
            engines=Engines(in_process=True),
            callbacks=[StopAfter(stop_after)] if stop_after else [],
        )
    by_position(trainer, tool_call("add", number=2))
    trainer.train(resume_from_checkpoint=resume)
    first = 3 if resume else 1  # a resumed run's log starts with the checkpoint's
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row and row["step"] >= first]
    return trainer, rows, losses


@pytest.mark.slow
def test_kimi_curriculum_and_an_exact_resume_with_an_environment_plugins_state(tmp_path, one_torch_thread):
    a, rows, losses_a = curriculum_run(tmp_path / "a")
    ledger, curriculum = a.plugin_set.get("ledger"), a.plugin_set.get("kimi-curriculum").state
    assert ledger.book.episodes == 16  # 4 steps of 2 prompts x 2 episodes
    # the curriculum counted the episodes: in every group of 2, the one that called the tool was right
    assert sum(curriculum.attempts) == 16
    assert all(s * 2 == n for s, n in zip(curriculum.successes, curriculum.attempts))
    assert [row["tools/calls/add"] for row in a.state.log_history if "loss" in row] == [0.5] * 4
    assert all(loss != 0 for loss in losses_a)

    b, _, losses_b = curriculum_run(tmp_path / "b", stop_after=2)
    assert b.state.global_step == 2 and b.plugin_set.get("ledger").book.episodes == 8
    saved = json.loads((tmp_path / "b" / "run" / "checkpoint-2" / "rlvr_plugin_state.json").read_text())
    assert saved["ledger"] == {"episodes": 8}  # the environment plugin's state, in the checkpoint

    resumed, _, losses_r = curriculum_run(tmp_path / "b", resume=str(tmp_path / "b" / "run" / "checkpoint-2"))
    assert resumed.plugin_set.get("ledger").book.episodes == 16  # 8 restored + 8 of steps 3 and 4
    assert b.plugin_set.get("ledger").drawn + resumed.plugin_set.get("ledger").drawn == ledger.drawn
    assert resumed.plugin_set.get("kimi-curriculum").state.to_dict() == curriculum.to_dict()
    assert losses_b + losses_r == pytest.approx(losses_a, rel=1e-5, abs=1e-7)
