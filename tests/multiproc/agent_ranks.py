"""Run two GRPO steps of episodes with the calculator, scripted turns, on 1 or 2 processes; write the logged
``tools/*`` and ``tokens/*`` metrics, the loss and the reward of each step (main process) to OUT.

Launched by tests/test_environments.py, e.g.
    python -m torch.distributed.run --nproc_per_node 2 tests/multiproc/agent_ranks.py OUT.jsonl 4 [split]
Each step's 8 episodes are two prompts' groups of 4 (different numbers of calls); with two processes each
process holds one group, so the metrics are right only if they are computed over the gathered episodes.
With ``split``, each step's 8 episodes are one prompt's group of 8, split 4 + 4 across two processes, and the
policy depends on the episode's position (test_environment_plugins.by_position: a tool call then the right
answer, or a wrong answer at once), so that the group carries advantages and the loss is not 0.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datasets import Dataset  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from rlvr_plugins import Plugin, hookimpl  # noqa: E402
from rlvr_plugins.manager import build_plugin_set, temporary_plugin  # noqa: E402
from rlvr_plugins.rewards import Engines  # noqa: E402
from rlvr_plugins.testing import (  # noqa: E402
    grpo_args,
    reward_plugin_class,
    scripted_turns,
    tiny_model,
    tool_call,
    tool_tokenizer,
)
from rlvr_plugins.trainer import RLVRTrainer  # noqa: E402
from test_environment_plugins import by_position  # noqa: E402
from test_environments import reply, turns_reward  # noqa: E402

OUT = Path(sys.argv[1])
PER_DEVICE = int(sys.argv[2])
SPLIT = sys.argv[3:] == ["split"]


class Logs(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs and "tools/turns_mean" in logs:
            kept = {k: v for k, v in logs.items() if k.startswith(("tools/", "tokens/")) or k in ("loss", "reward")}
            with OUT.open("a") as fh:
                fh.write(json.dumps({"step": state.global_step, **kept}) + "\n")


class Scripted(Plugin):
    name = "scripted"

    @hookimpl
    def rlvr_trainer_callbacks(self, trainer):
        if SPLIT:
            by_position(trainer, tool_call("calculate", expression="2 + 3"))
        else:
            scripted_turns(trainer, reply)
        return [Logs()]


def main():
    from transformers.trainer_utils import set_seed

    set_seed(0)
    tok = tool_tokenizer()
    rows = [
        {"prompt": [{"role": "user", "content": text}]} for text in ("calls=1", "calls=2 err", "calls=2", "calls=0")
    ]
    reward = reward_plugin_class("turns", turns_reward, isolated=False, completion_format="messages")
    with temporary_plugin(reward), temporary_plugin(Scripted):
        plugin_set = build_plugin_set({"calculator": {}, "turns": {}, "scripted": {}})
    args = grpo_args(
        OUT.parent / f"run-{PER_DEVICE}",
        per_device_train_batch_size=PER_DEVICE,
        num_generations=8 if SPLIT else 4,
        max_steps=2,
        max_completion_length=384,
        shuffle_dataset=False,
    )
    trainer = RLVRTrainer(
        plugin_set=plugin_set,
        engines=Engines(in_process=True),
        model=tiny_model(tok, max_position_embeddings=2048),
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
    )
    trainer.train()


if __name__ == "__main__":
    main()
