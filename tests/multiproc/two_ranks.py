"""Run a few GRPO steps on 1 or 2 processes with deterministic completions and record the gathered batch.

Launched by tests/test_multiprocess.py, e.g.
    accelerate launch --cpu --num_processes 2 tests/multiproc/two_ranks.py OUT.jsonl 4 [PLUGIN [OPTIONS_JSON]]
Each prompt's group of 8 completions is split across the ranks when there are two, so the
advantages and the per-group length penalty are only right if they are computed after the
cross-process gather. Completions depend only on their position in the global batch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datasets import Dataset  # noqa: E402

from rlvr_plugins import Plugin, RewardFunction, hookimpl
from rlvr_plugins.manager import build_plugin_set, temporary_plugin  # noqa: E402
from rlvr_plugins.rewards import Engines  # noqa: E402
from rlvr_plugins.testing import grpo_args, tiny_model, tiny_rows  # noqa: E402
from rlvr_plugins.trainer import RLVRTrainer  # noqa: E402

OUT = Path(sys.argv[1])
PER_DEVICE = int(sys.argv[2])
EXTRA = sys.argv[3] if len(sys.argv) > 3 else None  # a plugin to enable: an estimator (default: grpo), a shaping
EXTRA_OPTIONS = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}  # its options, as JSON


def completion_for(position: int) -> str:
    """A different, deterministic completion for each position of the global batch."""
    return "7" * (1 + position % 5) + "x" * (position % 3) + "<answer>" + str(position % 2) + "</answer>"


def correct_if_one(*, prompt, completion, example):
    return 1.0 if completion.endswith("<answer>1</answer>") else 0.0


def digit_share(*, prompt, completion, example):
    return sum(c.isdigit() for c in completion) / max(1, len(completion))


class Rewards(Plugin):
    name = "mp-rewards"

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(RewardFunction("mp-correct", correct_if_one, isolated=False))
        register(RewardFunction("mp-digits", digit_share, weight=0.5, isolated=False))


class Rollout(Plugin):
    name = "mp-rollout"

    @hookimpl
    def rlvr_rollout_func(self, tokenizer, num_generations):
        def rollout(prompts, trainer):
            rank = trainer.accelerator.process_index
            start = rank * len(prompts)
            ids = [
                tokenizer(completion_for(start + i), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                for i in range(len(prompts))
            ]
            return {
                "prompt_ids": [tokenizer(p)["input_ids"] for p in prompts],
                "completion_ids": ids,
                "logprobs": [[0.0] * len(x) for x in ids],
            }

        return rollout


class Recorder(Plugin):
    name = "mp-recorder"

    @hookimpl
    def rlvr_on_rewards(self, example_indices, rewards, advantages, rewards_per_func, step):
        from accelerate import PartialState

        if PartialState().is_main_process:
            with OUT.open("a") as fh:
                fh.write(
                    json.dumps(
                        {
                            "step": step,
                            "indices": example_indices,
                            "rewards": rewards.tolist(),
                            "advantages": advantages.tolist(),
                            "per_func": rewards_per_func.tolist(),
                        }
                    )
                    + "\n"
                )


def main():
    from transformers.trainer_utils import set_seed

    from rlvr_plugins.demo.tokenizer import build_char_tokenizer

    set_seed(0)
    tokenizer = build_char_tokenizer()
    with temporary_plugin(Rewards), temporary_plugin(Rollout), temporary_plugin(Recorder):
        plugin_set = build_plugin_set(
            {
                "mp-rewards": {},
                "mp-rollout": {},
                "mp-recorder": {},
                "kimi-length": {"correctness_reward": "mp-correct", "weight": 0.5},
                **({EXTRA: EXTRA_OPTIONS} if EXTRA else {}),
            }
        )
    args = grpo_args(
        OUT.parent / f"run-{PER_DEVICE}",
        per_device_train_batch_size=PER_DEVICE,
        num_generations=8,
        max_steps=2,
        max_completion_length=16,
    )
    trainer = RLVRTrainer(
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
