"""The ``rlvr`` command line under ``accelerate launch``, with an in-process reward that a random policy learns from.

    accelerate launch --config_file configs/accelerate/cpu/zero3.yaml tests/multiproc/ds_cli.py STATS_DIR train CONFIG

``digit-share`` (the share of digits in a completion) differs between the completions of a group
even for an untrained tiny model, so GRPO's loss and gradients are not zero from step 1. After
every ``Trainer.train`` each rank writes ``STATS_DIR/<Trainer>-rank<R>.json``: how many parameters
this rank holds only a partition of (ZeRO-3), of how many, and the largest parameter's size.

The plugin has a state, the number of training batches it has seen (``rlvr_state_dict``, restored
on ``--resume``), so that every checkpoint's ``rlvr_plugin_state.json`` says how far the run got.
With ``RLVR_TEST_KILL_IN_STEP=K`` every rank SIGKILLs itself in the K-th optimizer step, once its
batch is scored (after step K-1's checkpoint, before step K's), and leaves ``STATS_DIR/killed-rank<R>``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from transformers import Trainer

from rlvr_plugins import Plugin, RewardFunction, cli, hookimpl
from rlvr_plugins.manager import temporary_plugin
from rlvr_plugins.testing import digit_share

STATS = Path(sys.argv[1])


class DigitShare(Plugin):
    name = "digit-share"

    def __init__(self, options=None):
        super().__init__(options)
        self.batches = 0

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(RewardFunction("digit-share", digit_share, isolated=False))

    @hookimpl
    def rlvr_on_rewards(self, step):
        self.batches += 1
        if step + 1 == int(os.environ.get("RLVR_TEST_KILL_IN_STEP", "0")):
            STATS.mkdir(parents=True, exist_ok=True)
            (STATS / f"killed-rank{os.environ.get('RANK', '0')}").write_text(str(step + 1))
            os.kill(os.getpid(), signal.SIGKILL)

    @hookimpl
    def rlvr_state_dict(self):
        return {"batches": self.batches}

    @hookimpl
    def rlvr_load_state_dict(self, state):
        self.batches = state["batches"]


def partition_stats(model) -> dict:
    """``partitioned``: parameters whose full tensor this rank released (ZeRO-3 keeps weights under its
    persistence threshold whole on every rank)."""
    params = list(model.parameters())
    full = [getattr(p, "ds_numel", p.numel()) for p in params]
    released = sum(hasattr(p, "ds_numel") and p.data.numel() == 0 for p in params)
    return {"params": len(params), "partitioned": released, "largest": max(full)}


def recording(train):
    def wrapper(self, *args, **kwargs):
        result = train(self, *args, **kwargs)
        STATS.mkdir(parents=True, exist_ok=True)
        path = STATS / f"{type(self).__name__}-rank{os.environ.get('RANK', '0')}.json"
        path.write_text(json.dumps(partition_stats(self.model)))
        return result

    return wrapper


if __name__ == "__main__":
    Trainer.train = recording(Trainer.train)
    with temporary_plugin(DigitShare):
        raise SystemExit(cli.main(sys.argv[2:]))
