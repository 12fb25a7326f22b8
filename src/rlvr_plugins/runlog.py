"""The run folder's ``metrics.jsonl``: one row per logging step, every metric TRL and the plugins logged."""

from __future__ import annotations

import json
import math
from pathlib import Path

from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback

SHOWN = ("reward", "rlvr/frac_zero_variance_groups", "completions/mean_length", "kl", "entropy")


class MetricsWriter(TrainerCallback):
    """Append ``{"step": global_step, **logs}`` to a JSONL file on the main process."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        row = {"step": state.global_step, **{k: _jsonable(v) for k, v in logs.items()}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")


def _jsonable(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value if isinstance(value, (int, float, str, bool, type(None))) else str(value)


def read_metrics(path: str | Path) -> list[dict]:
    with Path(path).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


class CompactProgress(ProgressCallback):
    """TRL's progress bar, with one short line per logging step instead of the whole metrics dict."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or self.training_bar is None or not logs:
            return
        parts = [f"step {state.global_step}"]
        for key, value in logs.items():
            if (key in SHOWN or (key.startswith(("rewards/", "penalties/")) and key.endswith("/mean"))) \
                    and isinstance(value, (int, float)):
                parts.append(f"{key.removesuffix('/mean').replace('rlvr/', '')} {value:.3f}")
        if len(parts) > 1:
            self.training_bar.write("  ".join(parts))
