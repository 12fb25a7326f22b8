"""A few GRPO steps with partial rollouts (kimi-partial-rollouts) on 1 or 2 processes; record what each step trains.

Launched by tests/test_multiprocess.py, e.g.
    torchrun --nproc_per_node 2 tests/multiproc/partial_ranks.py OUT.jsonl 4
TRL's generator is replaced below the seam by a script: each trajectory's tokens depend only on its prompt and its
member number in the group (its row of the round's global batch modulo G), so the segments, the pending groups, the
pool's choices and the trained batch must be the same on one process and on two (groups split 2 + 2).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from accelerate.utils import gather_object
from datasets import Dataset
from trl import GRPOTrainer

from rlvr_plugins import Plugin, RewardFunction, hookimpl
from rlvr_plugins.manager import build_plugin_set, temporary_plugin
from rlvr_plugins.rewards import Engines
from rlvr_plugins.testing import grpo_args, tiny_model, tiny_rows
from rlvr_plugins.trainer import RLVRTrainer

OUT = Path(sys.argv[1])
PER_DEVICE = int(sys.argv[2])
DIGITS = list(range(8, 18))  # the char tokenizer's '0'..'9'


def target(prompt: list[int], member: int, eos: int) -> list[int]:
    """The whole completion of a member: 1 to 7 digits, then EOS."""
    n = 1 + (sum(prompt) + 3 * member) % 7
    return [DIGITS[(sum(prompt) + j * (member + 1)) % 10] for j in range(n)] + [eos]


def scripted(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
    rows = self._rlvr_prefixes
    active = [i for i, (_, done) in enumerate(rows) if not done]
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


class Rewards(Plugin):
    name = "mp-rewards"

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(RewardFunction("mp-odd", odd_length, isolated=False))


class PartialRecorder(RLVRTrainer):
    """Records each step's trained batch, gathered from every process in rank order."""

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
            record = {
                "step": self.state.global_step,
                "groups": [g.index for g in chosen],
                "rows": rows,
                "pending": [g.index for g in continuing.pending],
                "started": continuing.started,
                **counts.metrics(needed),
            }
            with OUT.open("a") as fh:
                fh.write(json.dumps(record) + "\n")
        return output


def main():
    from transformers.trainer_utils import set_seed

    from rlvr_plugins.demo.tokenizer import build_char_tokenizer

    set_seed(0)
    GRPOTrainer._generate_single_turn = scripted
    tokenizer = build_char_tokenizer()
    with temporary_plugin(Rewards):
        plugin_set = build_plugin_set({"mp-rewards": {}, "kimi-partial-rollouts": {"segment_tokens": 2}})
    args = grpo_args(OUT.parent / f"run-{PER_DEVICE}", per_device_train_batch_size=PER_DEVICE, max_steps=4)
    trainer = PartialRecorder(
        plugin_set=plugin_set,
        engines=Engines(in_process=True),
        model=tiny_model(tokenizer),
        args=args,
        train_dataset=Dataset.from_list(tiny_rows()),
        processing_class=tokenizer,
    )
    trainer.train()
    torch.distributed.barrier() if torch.distributed.is_initialized() else None


if __name__ == "__main__":
    main()
