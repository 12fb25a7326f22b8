"""Plugin overhead: step time of ``RLVRTrainer`` vs plain TRL ``GRPOTrainer``, same model, seed and batch.

Both trainers are built in one process and stepped in alternation (interleaved blocks of
steps), so machine noise hits both alike. The reward is the same cheap function for both
(in-process for the plugin trainer, so the comparison measures the framework's glue, not
process isolation). A second plugin run enables every seed plugin that is installed
(r1-accuracy and r1-format through the isolated reward engine, kimi-length, and dr-grpo)
and is reported separately.

    python benchmarks/plugin_overhead.py [--steps 30] [--block 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def digits_reward(completions, **kwargs):
    return [sum(ch.isdigit() for ch in c) / max(1, len(c)) for c in completions]


def digit_score(*, prompt, completion, example):
    return sum(ch.isdigit() for ch in completion) / max(1, len(completion))


def build(kind: str, workdir: Path, steps: int):
    import transformers
    from datasets import Dataset
    from trl import GRPOTrainer

    from rlvr_plugins import Plugin, RewardFunction, hookimpl
    from rlvr_plugins.manager import build_plugin_set, temporary_plugin
    from rlvr_plugins.rewards import Engines
    from rlvr_plugins.testing import char_tokenizer, grpo_args, tiny_model, tiny_rows
    from rlvr_plugins.trainer import RLVRTrainer

    transformers.set_seed(0)
    tokenizer = char_tokenizer()
    dataset = Dataset.from_list(tiny_rows(256))
    args = grpo_args(workdir / kind, max_steps=steps, per_device_train_batch_size=32, num_generations=8,
                     max_completion_length=16, logging_steps=10**6)
    model = tiny_model(tokenizer, hidden_size=64, intermediate_size=256, num_hidden_layers=2, head_dim=32)
    if kind == "trl":
        digits_reward.__name__ = "digits"
        return GRPOTrainer(model=model, reward_funcs=[digits_reward], args=args, train_dataset=dataset,
                           processing_class=tokenizer)

    class Digits(Plugin):
        name = "bench-digits"

        @hookimpl
        def rlvr_reward_functions(self, register):
            register(RewardFunction("digits", digit_score, isolated=False))

    plugins = {"bench-digits": {}}
    if kind == "all-seed-plugins":
        plugins.update({"r1-accuracy": {}, "r1-format": {}, "kimi-length": {}, "dr-grpo": {}})
    with temporary_plugin(Digits):
        plugin_set = build_plugin_set(plugins)
    if kind == "all-seed-plugins":
        from rlvr_plugins.run import grpo_kwargs

        kwargs = grpo_kwargs({"output_dir": str(workdir / kind), "trainer": {}}, plugin_set)
        args.loss_type, args.scale_rewards = kwargs["loss_type"], kwargs["scale_rewards"]
    return RLVRTrainer(plugin_set=plugin_set, engines=Engines(num_workers=2, timeout_s=10), model=model,
                       args=args, train_dataset=dataset, processing_class=tokenizer)


class Stepper:
    """Run a trainer's loop one block of steps at a time, timing each block."""

    def __init__(self, trainer):
        import threading

        self.trainer, self.go, self.done = trainer, threading.Semaphore(0), threading.Semaphore(0)
        self.times: list[float] = []
        self.block = 0
        outer = self

        from transformers import TrainerCallback

        class Gate(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                if state.global_step % outer.block == 0:
                    if state.global_step:
                        outer.done.release()
                    outer.go.acquire()

        trainer.add_callback(Gate())
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        self.trainer.train()
        self.done.release()

    def step_block(self, block: int):
        self.block = block
        if not self.thread.is_alive():
            self.thread.start()
        t = time.perf_counter()
        self.go.release()
        self.done.acquire()
        self.times.append((time.perf_counter() - t) / block)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=30, help="steps per trainer (after one warm-up block)")
    p.add_argument("--block", type=int, default=5)
    p.add_argument("--json")
    args = p.parse_args(argv)
    import tempfile

    import torch

    torch.set_num_threads(int(os.environ.get("RLVR_THREADS", "2")))
    kinds = ["trl", "defaults", "all-seed-plugins"]
    blocks = args.steps // args.block + 1
    with tempfile.TemporaryDirectory() as tmp:
        steppers = {k: Stepper(build(k, Path(tmp), blocks * args.block)) for k in kinds}
        for _ in range(blocks):
            for k in kinds:
                steppers[k].step_block(args.block)
        for s in steppers.values():
            s.go.release()
            s.thread.join(timeout=600)
    per_step = {k: statistics.median(s.times[1:]) for k, s in steppers.items()}
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}",
        "steps_timed_per_trainer": (blocks - 1) * args.block,
        "seconds_per_step_median": per_step,
        "ratio_defaults_vs_trl": per_step["defaults"] / per_step["trl"],
        "ratio_all_seed_plugins_vs_trl": per_step["all-seed-plugins"] / per_step["trl"],
    }
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
