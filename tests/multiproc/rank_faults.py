"""Fault item 17: faults on one rank only. Launched on 2 processes by tests/test_multiprocess.py:

    python -m torch.distributed.run --nproc_per_node 2 tests/multiproc/rank_faults.py OUT.jsonl MODE

MODE is ``masked`` (the reward raises on rank 1 for completions of even length: masked
there, the run goes on; an observer also logs a metric on rank 1 only), ``failing`` (the reward raises on every row of rank 1: after K in a row the
run stops, on both ranks, with one error) or ``hook`` (an observer hook raises on rank 1 only).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datasets import Dataset  # noqa: E402

from rlvr_plugins import Plugin, RewardFunction, hookimpl
from rlvr_plugins.manager import build_plugin_set, temporary_plugin  # noqa: E402
from rlvr_plugins.rewards import Engines  # noqa: E402
from rlvr_plugins.testing import grpo_args, tiny_model, tiny_rows  # noqa: E402
from rlvr_plugins.trainer import RLVRTrainer  # noqa: E402

OUT = Path(sys.argv[1])
MODE = sys.argv[2]
RANK = int(os.environ.get("RANK", "0"))


def digit_share(*, prompt, completion, example):
    return sum(c.isdigit() for c in completion) / max(1, len(completion))


def flaky_on_rank_1(*, prompt, completion, example):
    if RANK == 1 and (MODE == "failing" or len(completion) % 2 == 0):
        raise RuntimeError(f"scorer broke on rank {RANK}")
    return digit_share(prompt=prompt, completion=completion, example=example)


class Rewards(Plugin):
    name = "rank-rewards"

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(RewardFunction("rank-flaky", flaky_on_rank_1, isolated=False))


class Observer(Plugin):
    name = "rank-observer"

    @hookimpl
    def rlvr_on_rewards(self, valid, step, log_metric):
        if MODE == "masked" and RANK == 1:
            log_metric("observer/rank1_only", 1.0)
        if MODE == "hook" and RANK == 1:
            raise RuntimeError("observer broke on rank 1")
        with OUT.open("a") as fh:
            fh.write(json.dumps({"rank": RANK, "step": step, "valid": valid.tolist()}) + "\n")


def main():
    from transformers.trainer_utils import set_seed

    from rlvr_plugins.demo.tokenizer import build_char_tokenizer

    set_seed(0)
    tokenizer = build_char_tokenizer()
    with temporary_plugin(Rewards), temporary_plugin(Observer):
        plugin_set = build_plugin_set({"rank-rewards": {}, "rank-observer": {}})
    args = grpo_args(OUT.parent / f"run-{MODE}", per_device_train_batch_size=4, num_generations=4, max_steps=2)
    trainer = RLVRTrainer(
        plugin_set=plugin_set,
        engines=Engines(in_process=True, max_consecutive_failures=3 if MODE == "failing" else 64),
        model=tiny_model(tokenizer),
        args=args,
        train_dataset=Dataset.from_list(tiny_rows()),
        processing_class=tokenizer,
    )
    trainer.train()
    if RANK == 0:
        with OUT.open("a") as fh:
            fh.write(json.dumps({"done": True, "log": trainer.state.log_history}) + "\n")


if __name__ == "__main__":
    main()
