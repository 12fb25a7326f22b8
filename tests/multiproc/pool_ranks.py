"""A few GRPO steps with the rollout pool (dapo-dynamic-sampling) on 1 or 2 processes; record what each step trains.

Launched by tests/test_multiprocess.py, e.g.
    torchrun --nproc_per_node 2 tests/multiproc/pool_ranks.py OUT.jsonl 4 [kimi-curriculum]
Completions depend only on the prompt and the position in the round's global batch, so the rounds, the
pool's choices and the trained batch must be the same on one process and on two (groups split 2 + 2).
With ``kimi-curriculum`` the curriculum draws the extra rounds' prompts from its gathered counts; each
process also records every round's prompts and, at the end, its curriculum counts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import ClassVar

import torch
from accelerate.utils import gather_object
from datasets import Dataset

from rlvr_plugins import Plugin, RewardFunction, hookimpl
from rlvr_plugins.manager import build_plugin_set, temporary_plugin
from rlvr_plugins.rewards import Engines
from rlvr_plugins.testing import grpo_args, tiny_model, tiny_rows
from rlvr_plugins.trainer import RLVRTrainer

OUT = Path(sys.argv[1])
PER_DEVICE = int(sys.argv[2])
SAMPLER = sys.argv[3] if len(sys.argv) > 3 else "repeat-sampler"


def completion_for(prompt: str, position: int) -> str:
    """All alike for prompts of even length (a group without signal), else varying with the position."""
    return (
        "<answer>0</answer>" if len(prompt) % 2 == 0 else "7" * (1 + position % 3) + f"<answer>{position % 2}</answer>"
    )


def correct_if_one(*, prompt, completion, example):
    return 1.0 if completion.endswith("<answer>1</answer>") else 0.0


class Rewards(Plugin):
    name = "mp-rewards"

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(RewardFunction("mp-correct", correct_if_one, isolated=False))


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


class Rounds(Plugin):
    """Each process's view of every generated round: (step, round, prompts)."""

    name = "mp-rounds"
    seen: ClassVar[list] = []

    @hookimpl
    def rlvr_on_rewards(self, example_indices, num_generations, step, round):
        Rounds.seen.append([step, round, example_indices[::num_generations]])


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
            with OUT.open("a") as fh:
                fh.write(json.dumps({**record, **counts.metrics(needed)}) + "\n")
        return output


def main():
    from transformers.trainer_utils import set_seed

    from rlvr_plugins.demo.tokenizer import build_char_tokenizer

    set_seed(0)
    tokenizer = build_char_tokenizer()
    plugins = {"mp-rewards": {}, "mp-rollout": {}, "dapo-dynamic-sampling": {"max_rounds": 4, "keep_leftovers": True}}
    if SAMPLER == "kimi-curriculum":
        plugins.update({"mp-rounds": {}, SAMPLER: {"schedule": "none", "correctness_reward": "mp-correct"}})
    with temporary_plugin(Rewards), temporary_plugin(Rollout), temporary_plugin(Rounds):
        plugin_set = build_plugin_set(plugins)
    args = grpo_args(OUT.parent / f"run-{PER_DEVICE}", per_device_train_batch_size=PER_DEVICE, max_steps=3)
    trainer = PoolRecorder(
        plugin_set=plugin_set,
        engines=Engines(in_process=True),
        model=tiny_model(tokenizer),
        args=args,
        train_dataset=Dataset.from_list(tiny_rows()),
        processing_class=tokenizer,
    )
    trainer.train()
    if SAMPLER == "kimi-curriculum":
        state = trainer.plugin_set.get(SAMPLER).state
        views = gather_object([{"rounds": Rounds.seen, "attempts": state.attempts, "successes": state.successes}])
        if trainer.accelerator.is_main_process:
            with OUT.open("a") as fh:
                fh.write(json.dumps({"views": views}) + "\n")
    torch.distributed.barrier() if torch.distributed.is_initialized() else None


if __name__ == "__main__":
    main()
