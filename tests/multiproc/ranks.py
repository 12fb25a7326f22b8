"""A few GRPO steps of tiny models on one process or two (gloo on CPU), one scenario after another in one
launch, each recording what the multi-process tests compare. Launched by tests/test_multiprocess.py, e.g.

    python -m torch.distributed.run --nproc_per_node 2 tests/multiproc/ranks.py OUT_DIR gather opo pool ...
    python tests/multiproc/ranks.py OUT_DIR gather opo pool ...       # the same on one process

Each SCENARIO builds its trainer with :func:`train` (seeded anew) and writes JSON lines to OUT_DIR/SCENARIO.jsonl.
A step trains 8 completions: 8 on one process, 4 + 4 on two, so a group is split across the processes.

- ``gather`` and ``opo``, ``gpg``, ``prime-length`` (that plugin added): kimi-length shapes two rewards of
  completions that depend only on their position in the global batch; the main process records each step's
  gathered rewards and advantages (right only if computed after the cross-process gather).
- ``pool``: dapo-dynamic-sampling keeping leftovers; completions alike for prompts of even length (groups
  without signal); the main process records each step's chosen groups, trained rows and ``pool/*`` counts.
- ``pool-kimi``: ``pool`` with kimi-curriculum as the train sampler, which draws the extra rounds' prompts from
  its gathered counts; every process records each round's prompts and, at the end, its curriculum counts.
- ``partial``: kimi-partial-rollouts with 2-token segments; TRL's generator is replaced below the seam by a script
  (each trajectory's tokens depend only on its prompt and its member number), so the segments, the pending groups,
  the pool's choices, the trained rows and their stale-token masks must be those of one process.
- ``partial-kimi``: ``partial`` with kimi-curriculum as the train sampler, which counts each group when it
  finishes (rlvr_pool_started keeps the groups in flight); every process records its counts at the end.
- ``agent``: calculator episodes with scripted turns, two prompts' groups of 4 per step; the main process
  records each step's logged ``tools/*`` and ``tokens/*`` metrics, the loss and the reward.
- ``agent-split``: one prompt's group of 8 episodes per step (split 4 + 4 on two processes) whose policy depends
  on the episode's position (a tool call then the right answer, or a wrong answer at once), so the loss is not 0.
- ``masked``, ``failing``, ``hook`` (fault item 17, two processes): the reward raises on rank 1 for completions
  of even length (masked there; an observer also logs a metric on rank 1 only), or on every row of rank 1
  (after K in a row the run stops on both ranks with one error), or an observer hook raises on rank 1 only.
  Every rank records each step's gathered ``valid`` mask; rank 0 the log history once training is done.
  ``failing``'s error is recorded by each rank, then the next scenario runs; ``hook`` stops the launch (last).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from contextlib import ExitStack
from pathlib import Path
from typing import ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from accelerate.utils import gather_object  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from rlvr_plugins import Plugin, RewardFunction, hookimpl  # noqa: E402
from rlvr_plugins.demo.tokenizer import build_char_tokenizer  # noqa: E402
from rlvr_plugins.manager import build_plugin_set, temporary_plugin  # noqa: E402
from rlvr_plugins.rewards import Engines  # noqa: E402
from rlvr_plugins.testing import (  # noqa: E402
    digit_share,
    grpo_args,
    reward_plugin_class,
    scripted_turns,
    tiny_model,
    tiny_rows,
    tool_call,
    tool_tokenizer,
)
from rlvr_plugins.trainer import RLVRTrainer  # noqa: E402

OUT = Path(sys.argv[1])
RANK = int(os.environ.get("RANK", "0"))
PER_DEVICE = 8 // int(os.environ.get("WORLD_SIZE", "1"))
scenario = ""  # the one running: where write() appends


def write(row: dict) -> None:
    with (OUT / f"{scenario}.jsonl").open("a") as fh:
        fh.write(json.dumps(row) + "\n")


def is_main() -> bool:
    from accelerate import PartialState

    return PartialState().is_main_process


def train(
    plugins: dict,
    plugin_classes=(),
    *,
    tokenizer=None,
    rows=None,
    model_options=None,
    engines=None,
    trainer_class=RLVRTrainer,
    **args,
):
    """Seed, build the plugin set of ``plugins`` (``plugin_classes`` made discoverable), train a tiny model
    (``model_options``) on :func:`~rlvr_plugins.testing.tiny_rows` (or ``rows``) for ``grpo_args(**args)``,
    rewards in-process (or ``engines``); the trainer."""
    from transformers.trainer_utils import set_seed

    set_seed(0)
    tokenizer = tokenizer or build_char_tokenizer()
    with ExitStack() as stack:
        for plugin in plugin_classes:
            stack.enter_context(temporary_plugin(plugin))
        plugin_set = build_plugin_set(plugins)
    trainer = trainer_class(
        plugin_set=plugin_set,
        engines=engines or Engines(in_process=True),
        model=tiny_model(tokenizer, **(model_options or {})),
        args=grpo_args(OUT / f"run-{scenario}", per_device_train_batch_size=PER_DEVICE, **args),
        train_dataset=Dataset.from_list(rows or tiny_rows()),
        processing_class=tokenizer,
    )
    trainer.train()
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
    return trainer


def rollout_plugin(completion_for):
    """A rollout that answers prompt ``p`` at position ``i`` of the round's global batch with ``completion_for(p, i)``."""

    class Rollout(Plugin):
        name = "mp-rollout"

        @hookimpl
        def rlvr_rollout_func(self, tokenizer):
            def rollout(prompts, trainer):
                start = trainer.accelerator.process_index * len(prompts)
                ids = [
                    tokenizer(completion_for(p, start + i), add_special_tokens=False)["input_ids"]
                    + [tokenizer.eos_token_id]
                    for i, p in enumerate(prompts)
                ]
                return {
                    "prompt_ids": [tokenizer(p)["input_ids"] for p in prompts],
                    "completion_ids": ids,
                    "logprobs": [[0.0] * len(x) for x in ids],
                }

            return rollout

    return Rollout


def correct_if_one(*, prompt, completion, example):
    return 1.0 if completion.endswith("<answer>1</answer>") else 0.0


# -- gather, opo, gpg, prime-length ------------------------------------------------------------------
def by_position(prompt: str, position: int) -> str:
    """A different, deterministic completion for each position of the global batch."""
    return "7" * (1 + position % 5) + "x" * (position % 3) + "<answer>" + str(position % 2) + "</answer>"


class Rewards(Plugin):
    name = "mp-rewards"

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(RewardFunction("mp-correct", correct_if_one, isolated=False))
        register(RewardFunction("mp-digits", digit_share, weight=0.5, isolated=False))


class Recorder(Plugin):
    name = "mp-recorder"

    @hookimpl
    def rlvr_on_rewards(self, example_indices, rewards, advantages, rewards_per_func, step):
        if is_main():
            write(
                {
                    "step": step,
                    "indices": example_indices,
                    "rewards": rewards.tolist(),
                    "advantages": advantages.tolist(),
                    "per_func": rewards_per_func.tolist(),
                }
            )


EXTRA = {"gather": {}, "opo": {}, "gpg": {}, "prime-length": {"correctness_reward": "mp-correct", "weight": 1.0}}


def gather():
    plugins = {"mp-rewards": {}, "mp-rollout": {}, "mp-recorder": {}}
    plugins["kimi-length"] = {"correctness_reward": "mp-correct", "weight": 0.5}
    if scenario != "gather":
        plugins[scenario] = EXTRA[scenario]
    train(plugins, (Rewards, rollout_plugin(by_position), Recorder), num_generations=8, max_completion_length=16)


# -- pool --------------------------------------------------------------------------------------------
def by_prompt(prompt: str, position: int) -> str:
    """All alike for prompts of even length (a group without signal), else varying with the position."""
    return (
        "<answer>0</answer>" if len(prompt) % 2 == 0 else "7" * (1 + position % 3) + f"<answer>{position % 2}</answer>"
    )


class PoolRecorder(RLVRTrainer):
    """Records each step's trained batch, gathered from every process in rank order."""

    def _batch_of(self, chosen, counts, needed, local):
        output = super()._batch_of(chosen, counts, needed, local)
        texts = [
            self.processing_class.decode(ids[mask.bool()])
            for ids, mask in zip(output["completion_ids"], output["completion_mask"])
        ]
        rows = gather_object(list(zip(texts, output["advantages"].tolist())))
        if self.accelerator.is_main_process:
            record = {"step": self.state.global_step, "groups": [g.index for g in chosen], "rows": rows}
            write({**record, **counts.metrics(needed)})
        return output


class Rounds(Plugin):
    """This process's view of every generated round: (step, round, prompts)."""

    name = "mp-rounds"
    seen: ClassVar[list] = []

    @hookimpl
    def rlvr_on_rewards(self, example_indices, num_generations, step, round):
        Rounds.seen.append([step, round, example_indices[::num_generations]])


def pool():
    plugins = {"mp-correct": {}, "mp-rollout": {}}
    plugins["dapo-dynamic-sampling"] = {"max_rounds": 4, "keep_leftovers": True}
    if scenario == "pool-kimi":
        plugins.update({"mp-rounds": {}, "kimi-curriculum": {"schedule": "none", "correctness_reward": "mp-correct"}})
    correct = reward_plugin_class("mp-correct", correct_if_one, isolated=False)
    trainer = train(plugins, (correct, rollout_plugin(by_prompt), Rounds), trainer_class=PoolRecorder, max_steps=3)
    if scenario == "pool-kimi":
        state = trainer.plugin_set.get("kimi-curriculum").state
        views = gather_object([{"rounds": Rounds.seen, "attempts": state.attempts, "successes": state.successes}])
        if is_main():
            write({"views": views})


# -- partial -----------------------------------------------------------------------------------------
DIGITS = list(range(8, 18))  # the char tokenizer's '0'..'9'


def target(prompt: list[int], member: int, eos: int) -> list[int]:
    """The whole completion of a member: 1 to 7 digits, then EOS."""
    n = 1 + (sum(prompt) + 3 * member) % 7
    return [DIGITS[(sum(prompt) + j * (member + 1)) % 10] for j in range(n)] + [eos]


def scripted_segments(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
    """TRL's generator below the seam: each row continues its member's whole completion for the segment's budget."""
    rows = self._rlvr_prefixes
    active = [i for i, (_, done, _) in enumerate(rows) if not done]
    offset = self.accelerator.process_index * len(rows)
    budget = self.generation_config.max_new_tokens
    out = []
    for i, context in zip(active, prompt_ids, strict=True):
        prefix = rows[i][0]
        prompt = list(context)[: len(context) - len(prefix)]
        whole = target(prompt, (offset + i) % self.num_generations, self.eos_token_ids[0])
        out.append(whole[len(prefix) : len(prefix) + budget])
    return out, None


def odd_length(*, prompt, completion, example):
    return float(len(completion) % 2)


class PartialRecorder(RLVRTrainer):
    """Records each step's trained batch with its stale-token masks, gathered from every process in rank order."""

    def _batch_of(self, chosen, counts, needed, local):
        output = super()._batch_of(chosen, counts, needed, local)
        rows = gather_object(
            [
                (ids[mask.bool()].tolist(), adv.tolist(), tool[mask.bool()].tolist())
                for ids, mask, adv, tool in zip(
                    output["completion_ids"], output["completion_mask"], output["advantages"], output["tool_mask"]
                )
            ]
        )
        if self.accelerator.is_main_process:
            continuing = self._rlvr_continuations
            record = {"step": self.state.global_step, "groups": [g.index for g in chosen], "rows": rows}
            record |= {"pending": [g.index for g in continuing.pending], "started": continuing.started}
            write({**record, **counts.metrics(needed)})
        return output


def partial():
    from trl import GRPOTrainer

    odd = reward_plugin_class("mp-odd", odd_length, isolated=False)
    generate = GRPOTrainer._generate_single_turn
    GRPOTrainer._generate_single_turn = scripted_segments
    try:
        plugins = {"mp-odd": {}, "kimi-partial-rollouts": {"segment_tokens": 2}}
        if scenario == "partial-kimi":
            plugins["kimi-curriculum"] = {"schedule": "none", "correctness_reward": "mp-odd"}
        trainer = train(plugins, (odd,), trainer_class=PartialRecorder, max_steps=4)
    finally:
        GRPOTrainer._generate_single_turn = generate
    if scenario == "partial-kimi":
        state = trainer.plugin_set.get("kimi-curriculum").state
        view = {"attempts": state.attempts, "successes": state.successes, "in_flight": sorted(state.in_flight)}
        view |= {"finished_groups": trainer._rlvr_pool.generated, "observed": state.observed}
        views = gather_object([view])
        if is_main():
            write({"views": views})


# -- agent -------------------------------------------------------------------------------------------
class Logs(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs and "tools/turns_mean" in logs:
            kept = {k: v for k, v in logs.items() if k.startswith(("tools/", "tokens/")) or k in ("loss", "reward")}
            write({"step": state.global_step, **kept})


def agent():
    from test_environment_plugins import by_position
    from test_environments import reply, turns_reward

    split = scenario == "agent-split"

    class Scripted(Plugin):
        name = "scripted"

        @hookimpl
        def rlvr_trainer_callbacks(self, trainer):
            if split:
                by_position(trainer, tool_call("calculate", expression="2 + 3"))
            else:
                scripted_turns(trainer, reply)
            return [Logs()]

    tok = tool_tokenizer()
    texts = ("calls=1", "calls=2 err", "calls=2", "calls=0")
    reward = reward_plugin_class("turns", turns_reward, isolated=False, completion_format="messages")
    train(
        {"calculator": {}, "turns": {}, "scripted": {}},
        (reward, Scripted),
        tokenizer=tok,
        rows=[{"prompt": [{"role": "user", "content": text}]} for text in texts],
        model_options={"max_position_embeddings": 2048},
        num_generations=8 if split else 4,
        max_completion_length=384,
        shuffle_dataset=False,
    )


# -- masked, failing, hook (fault item 17) -----------------------------------------------------------
def flaky_on_rank_1(*, prompt, completion, example):
    if RANK == 1 and (scenario == "failing" or len(completion) % 2 == 0):
        raise RuntimeError(f"scorer broke on rank {RANK}")
    return digit_share(prompt=prompt, completion=completion, example=example)


class Observer(Plugin):
    name = "rank-observer"

    @hookimpl
    def rlvr_on_rewards(self, valid, step, log_metric):
        if scenario == "masked" and RANK == 1:
            log_metric("observer/rank1_only", 1.0)
        if scenario == "hook" and RANK == 1:
            raise RuntimeError("observer broke on rank 1")
        write({"rank": RANK, "step": step, "valid": valid.tolist()})


def rank_faults():
    flaky = reward_plugin_class("rank-flaky", flaky_on_rank_1, isolated=False)
    engines = Engines(in_process=True, max_consecutive_failures=3 if scenario == "failing" else 64)
    trainer = train({"rank-flaky": {}, "rank-observer": {}}, (flaky, Observer), engines=engines)
    if RANK == 0:
        write({"done": True, "log": trainer.state.log_history})


STOPPING = {"failing"}  # runs that stop with one error on every rank: each rank records it, the next scenario runs

SCENARIOS = {
    **dict.fromkeys(EXTRA, gather),
    "pool": pool,
    "pool-kimi": pool,
    "partial": partial,
    "partial-kimi": partial,
    "agent": agent,
    "agent-split": agent,
    **dict.fromkeys(("masked", "failing", "hook"), rank_faults),
}


if __name__ == "__main__":
    for scenario in sys.argv[2:]:
        try:
            SCENARIOS[scenario]()
        except Exception as error:
            if scenario not in STOPPING:
                raise
            traceback.print_exc()
            write({"rank": RANK, "error": "".join(traceback.format_exception_only(error))})
