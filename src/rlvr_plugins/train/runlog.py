"""The run folder's ``metrics.jsonl``: one row per logging step, every metric TRL and the plugins logged."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback

from ..checkpoints import writing

SHOWN = ("reward", "rlvr/frac_zero_variance_groups", "completions/mean_length", "kl", "entropy", "mean_token_accuracy")


class MetricsWriter(TrainerCallback):
    """Append ``{"step": global_step, **logs}`` to a JSONL file on the main process."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        if any(key.startswith("eval_") for key in logs):  # trainer.evaluate()'s row: the run writes its eval/* row
            return
        self.write(state.global_step, logs)

    def write(self, step: int, values) -> None:
        """Append one row ``{"step": step, **values}`` (non-finite numbers as ``null``)."""
        row = {"step": step, **{k: _jsonable(v) for k, v in values.items()}}
        with writing(self.path, self.path.parent, remove_partial=False):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")


class SeedAtTrainBegin(TrainerCallback):
    """Re-seed every RNG with ``args.seed`` once the model is wrapped, just before the first step.

    Wrapping and loading draw random numbers differently per backend (ZeRO-3's ``zero.Init``
    initialises weights before loading them; DDP does not), so without this a DDP run and a
    DeepSpeed run of one config sample different completions. A resumed run restores the
    checkpoint's RNG state after this, as before.
    """

    def on_train_begin(self, args, state, control, **kwargs):
        from transformers import set_seed

        set_seed(args.seed)


def _jsonable(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value if isinstance(value, (int, float, str, bool, type(None))) else str(value)


def read_metrics(path: str | Path) -> list[dict]:
    with Path(path).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


class CompactProgress(ProgressCallback):
    """TRL's progress bar (when enabled), with one short line per logging step instead of the metrics dict."""

    def __init__(self, show_bar: bool = True, label: str | None = None):
        super().__init__()
        self.show_bar = show_bar
        self.label = label

    def on_train_begin(self, args, state, control, **kwargs):
        if self.show_bar:
            super().on_train_begin(args, state, control, **kwargs)

    def on_step_end(self, args, state, control, **kwargs):
        if self.show_bar:
            super().on_step_end(args, state, control, **kwargs)

    def on_train_end(self, args, state, control, **kwargs):
        if self.show_bar:
            super().on_train_end(args, state, control, **kwargs)

    def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
        if self.show_bar:
            super().on_prediction_step(args, state, control, eval_dataloader=eval_dataloader, **kwargs)

    def on_evaluate(self, args, state, control, **kwargs):
        if self.show_bar:
            super().on_evaluate(args, state, control, **kwargs)

    def on_predict(self, args, state, control, metrics=None, **kwargs):
        if self.show_bar:
            super().on_predict(args, state, control, metrics=metrics, **kwargs)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        line = progress_line(state.global_step, logs, self.label)
        if line is not None:
            (self.training_bar.write if self.training_bar is not None else print)(line)


def progress_line(step: int, logs: Mapping[str, Any], label: str | None = None) -> str | None:
    """The console line of one logging step (None when it logged nothing shown), ``[label] `` first.

    >>> progress_line(3, {"loss": 0.51234, "learning_rate": 1e-3, "mean_token_accuracy": 0.9}, "sft")
    '[sft] step 3  loss 0.512  mean_token_accuracy 0.900'
    >>> progress_line(2, {"reward": 0.5, "rewards/r1-accuracy/mean": 0.25})
    'step 2  reward 0.500  rewards/r1-accuracy 0.250'
    """
    parts = [f"step {step}"]
    for key, value in logs.items():
        if (
            key in SHOWN or key == "loss" or (key.startswith(("rewards/", "penalties/")) and key.endswith("/mean"))
        ) and isinstance(value, (int, float)):
            parts.append(f"{key.removesuffix('/mean').replace('rlvr/', '')} {value:.3f}")
    if len(parts) == 1:
        return None
    return ("" if label is None else f"[{label}] ") + "  ".join(parts)


def compact_console(trainer, show_bar: bool, label: str | None = None) -> None:
    """Replace the Trainer's console output (a dict per log, or a bar that prints dicts) with CompactProgress
    (``label``: the stage named at the start of each line, e.g. ``[sft]``)."""
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(CompactProgress(show_bar, label))


class GracefulStop(TrainerCallback):
    """SIGINT / SIGTERM: finish the current step, write a checkpoint, stop cleanly.

    A second signal while stopping falls back to the default behaviour (immediate exit).
    """

    def __init__(self):
        self.signal_name: str | None = None

    def _handle(self, signum, frame):
        if self.signal_name is not None:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.signal_name = signal.Signals(signum).name

    @contextlib.contextmanager
    def installed(self):
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def on_step_end(self, args, state, control, **kwargs):
        if self.signal_name is not None:
            control.should_save = True
            control.should_training_stop = True


@contextlib.contextmanager
def interrupted_by_signal(stage: str, progress: Callable[[], str], after: str):
    """Within the block, SIGINT / SIGTERM raise :class:`~rlvr_plugins.errors.Interrupted` naming ``stage``, how far it
    got (``progress()``) and ``after`` (what to do now): for a stage without checkpoints (the SFT cold start), which
    cannot stop gracefully as GRPO does (:class:`GracefulStop`). The previous handlers are restored after it."""
    from ..errors import Interrupted

    def handle(signum, frame):
        name = signal.Signals(signum).name
        raise Interrupted(signum, f"stopped by {name} during {stage} ({progress()}); {after}")

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class IntegrityAlarm(TrainerCallback):
    """Hand every logged train reward (TRL's ``reward``) to ``watch`` (an
    :class:`~rlvr_plugins.train.integrity.IntegrityWatch`), on the main process; when the alarm fires, print
    its line and ``write(step, {"integrity/alarm": 1.0})`` (a row of ``metrics.jsonl``)."""

    def __init__(self, watch: Any, write: Callable[[int, dict[str, float]], None]):
        self.watch, self.write = watch, write

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "reward" not in logs:
            return
        message = self.watch.train_reward(state.global_step, logs["reward"])
        if message is not None:
            from .integrity import ALARM_METRIC

            print(message, flush=True)
            self.write(state.global_step, {ALARM_METRIC: 1.0})


class PeriodicEval(TrainerCallback):
    """Every ``every_steps`` optimiser steps (not at the last, which the final evaluation measures,
    unless ``at_last``; also before the first step when ``at_start``): ``measure(step, model)`` and,
    when ``log`` is given, ``log(step, metric_row(result))`` (:func:`rlvr_plugins.train.evaluation.metric_row`).
    ``stop_when(result)`` true stops training (e.g. a target accuracy reached)."""

    def __init__(
        self,
        every_steps: int,
        measure: Callable[[int, Any], Mapping[str, Any] | None],
        log: Callable[[int, dict[str, float]], None] | None,
        *,
        at_start: bool = False,
        at_last: bool = False,
        stop_when: Callable[[Mapping[str, Any]], bool] | None = None,
    ):
        self.every_steps = every_steps
        self.measure = measure
        self.log = log
        self.at_start, self.at_last, self.stop_when = at_start, at_last, stop_when

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.at_start:
            self._measure(0, state, control, model)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        step = state.global_step
        last = step >= state.max_steps
        if (step % self.every_steps and not last) or (last and not self.at_last):
            return
        self._measure(step, state, control, model)

    def _measure(self, step: int, state, control, model) -> None:
        result = self.measure(step, model)
        if result is None:
            return
        if self.log is not None and state.is_world_process_zero:
            from .evaluation import metric_row

            self.log(step, metric_row(result))
        if self.stop_when is not None and self.stop_when(result):
            control.should_training_stop = True
