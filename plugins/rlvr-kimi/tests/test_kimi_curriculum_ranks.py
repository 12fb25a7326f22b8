"""Two processes (gloo on CPU) draw the same prompts with ``kimi-curriculum``.

The test launches this same file with ``torch.distributed.run``; each rank records the
sampler's chunks and the gathered prompt ids. Every rank iterates its own sampler; a rank
that drew other prompts would put other prompts in its half of the gathered batch, and
the plugin would stop the run with a contract error.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr_plugins import Plugin, RewardFunction, hookimpl


def has_digit(*, prompt, completion, example):
    return 1.0 if any(c.isdigit() for c in completion) else 0.0


class Correct(Plugin):
    name = "kimi-ranks-correct"

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(RewardFunction("kimi-ranks-correct", has_digit, isolated=False))


class Recorder(Plugin):
    name = "kimi-ranks-recorder"
    out: Path | None = None
    curriculum = None

    @hookimpl
    def rlvr_on_rewards(self, example_indices, num_generations, step):
        state = Recorder.curriculum.state
        with Recorder.out.open("a") as fh:
            fh.write(
                json.dumps(
                    {
                        "step": step,
                        "ids": example_indices[::num_generations],
                        "pending": {str(c): ids for c, ids in state.pending.items()},
                        "drawn": state.drawn,
                        "successes": state.successes,
                        "attempts": state.attempts,
                    }
                )
                + "\n"
            )


def main(out_dir: str) -> None:
    import torch
    from datasets import Dataset
    from transformers.trainer_utils import set_seed
    from trl import GRPOConfig

    from rlvr_plugins.demo.model import build_tiny_model
    from rlvr_plugins.demo.task import split_train_eval
    from rlvr_plugins.demo.tokenizer import build_char_tokenizer
    from rlvr_plugins.manager import build_plugin_set, temporary_plugin
    from rlvr_plugins.rewards import Engines
    from rlvr_plugins.trainer import RLVRTrainer

    rank = int(os.environ.get("RANK", "0"))
    set_seed(0)
    Recorder.out = Path(out_dir) / f"rank{rank}.jsonl"
    tokenizer = build_char_tokenizer()
    with temporary_plugin(Correct), temporary_plugin(Recorder):
        plugin_set = build_plugin_set(
            {
                "kimi-ranks-correct": {},
                "kimi-ranks-recorder": {},
                "kimi-curriculum": {"correctness_reward": "kimi-ranks-correct", "full_at_step": 2},
            }
        )
    Recorder.curriculum = plugin_set.get("kimi-curriculum")
    args = GRPOConfig(
        output_dir=str(Path(out_dir) / "run"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=6,
        max_steps=3,
        learning_rate=1e-3,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=7,
        disable_tqdm=True,
        beta=0.0,
    )
    rows, _ = split_train_eval(12, 0, 0, max_digits=2)
    rows = [{**r, "rlvr_index": i} for i, r in enumerate(rows)]
    model = build_tiny_model(
        tokenizer,
        seed=0,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=16,
    )
    trainer = RLVRTrainer(
        plugin_set=plugin_set,
        engines=Engines(in_process=True),
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
    )
    trainer.train()
    if torch.distributed.is_initialized():
        torch.distributed.barrier()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_ranks_draw_the_same_prompts(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(free_port()),
        __file__,
        str(tmp_path),
    ]
    env = {
        **os.environ,
        "PYTHONWARNINGS": "ignore",
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    ranks = [[json.loads(x) for x in (tmp_path / f"rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)]
    assert ranks[0] == ranks[1]
    assert [r["step"] for r in ranks[0]] == [0, 1, 2]
    for record in ranks[0]:
        assert len(record["ids"]) == 2 and len(set(record["ids"])) == 2  # one prompt's group on each rank
    # the recorder runs before kimi-curriculum counts the batch: 2 batches counted at the third
    assert sum(ranks[0][-1]["attempts"]) == 2 * 2 * 4
    # each rank's dataloader draws one chunk ahead of the rewards, as with one process
    assert [sorted(r["pending"]) for r in ranks[0]] == [["0", "1"], ["1", "2"], ["2", "3"]]
    # and the gathered batch holds chunk k's prompts in the sampler's order (rank 0's half, then rank 1's)
    assert all(r["pending"][str(k)] == r["ids"] for k, r in enumerate(ranks[0]))


if __name__ == "__main__":
    main(sys.argv[1])
