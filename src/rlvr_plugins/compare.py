"""Compare training runs: load run folders, pick metric series, final and best values, a markdown table.

Pure data functions (no plotting; ``rlvr compare`` in ``commands/compare_cmd.py`` draws the PNGs).
A *run folder* is the ``output_dir`` of ``rlvr train``: ``metrics.jsonl`` (required: one row per
logging step), and when present ``config.yaml``, ``plugins.json`` and ``summary.json``.

Every metric has a direction: ``"max"`` (higher is better: rewards, accuracy), ``"min"`` (lower is
better: KL to the reference, clip ratios) or ``None`` (no better side: lengths, entropy), for which
the table shows the range instead of a best value.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .errors import RLVRError

TRAIN_ACCURACY = "accuracy/train"
"""The per-step training accuracy: ``rlvr/correct_rate`` (the share of completions whose correctness
reward reaches ``eval.threshold``) where the run logged it, else the mean of the correctness reward,
``rewards/<name>/mean`` (the same for a 0/1 reward such as ``r1-accuracy``)."""
CORRECT_RATE = "rlvr/correct_rate"
HELD_OUT_ACCURACY = "eval/accuracy"
"""Held-out accuracy measured during GRPO every ``eval.every_steps`` (step 0: before GRPO)."""

Point = tuple[int, float]


class RunFolderError(RLVRError):
    """A folder given to ``rlvr compare`` is not a readable run folder."""


@dataclass(frozen=True)
class Metric:
    """A series to compare: its key in ``metrics.jsonl`` (or :data:`TRAIN_ACCURACY`), a title, its better side."""

    name: str
    title: str
    better: str | None


@dataclass(frozen=True)
class Group:
    """Metrics drawn together in one PNG (``<name>.png``), one panel each."""

    name: str
    title: str
    metrics: tuple[Metric, ...]


@dataclass
class Run:
    """One loaded run folder."""

    path: Path
    label: str
    rows: dict[int, dict[str, float]]
    summary: dict[str, Any] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    plugins: list[str] = field(default_factory=list)
    estimator: str | None = None
    correctness_reward: str | None = None

    def key(self, name: str) -> str:
        """The ``metrics.jsonl`` key of ``name`` in this run (resolves :data:`TRAIN_ACCURACY`)."""
        if name != TRAIN_ACCURACY:
            return name
        if any(CORRECT_RATE in row for row in self.rows.values()):
            return CORRECT_RATE
        return f"rewards/{self.correctness_reward}/mean" if self.correctness_reward else name

    def series(self, name: str) -> list[Point]:
        """``[(step, value)]`` in step order; empty when the run never logged ``name``."""
        key = self.key(name)
        return [(step, row[key]) for step, row in sorted(self.rows.items()) if key in row]

    def has(self, name: str) -> bool:
        key = self.key(name)
        return any(key in row for row in self.rows.values())

    @property
    def last_step(self) -> int:
        return max(self.rows)

    def eval_accuracy(self, tag: str) -> float | None:
        """Held-out accuracy from ``summary.json``: ``tag`` is ``"before"`` or ``"after"`` (GRPO)."""
        value = ((self.summary or {}).get(f"eval_{tag}") or {}).get("accuracy")
        return float(value) if isinstance(value, (int, float)) else None


# -- loading ---------------------------------------------------------------------------------

def load_run(path: str | Path, label: str | None = None) -> Run:
    """Read a run folder; :class:`RunFolderError` naming the folder when it is not one or is unreadable."""
    folder = Path(path)
    if not folder.is_dir():
        raise RunFolderError(f"{folder}: not a folder (expected a run folder: the output_dir of rlvr train)")
    metrics = folder / "metrics.jsonl"
    if not metrics.is_file():
        hint = " (the run has not logged a step yet)" if (folder / "config.yaml").is_file() else \
            " (expected the output_dir of rlvr train)"
        raise RunFolderError(f"{folder} is not a run folder: it has no metrics.jsonl{hint}")
    rows = read_rows(metrics)
    if not rows:
        raise RunFolderError(f"{folder}: metrics.jsonl has no numeric metric in any row")
    summary = _read_json(folder / "summary.json")
    plugins_file = _read_json(folder / "plugins.json") or {}
    config = _read_yaml(folder / "config.yaml")
    run = Run(folder, label or folder.resolve().name, rows, summary, config)
    run.plugins, run.estimator = plugin_labels(plugins_file, config)
    run.correctness_reward = correctness_reward(config, plugins_file, rows)
    return run


def read_rows(path: Path) -> dict[int, dict[str, float]]:
    """``metrics.jsonl`` as ``{step: {metric: value}}``: rows of one step merged (later rows win),
    only finite numbers kept (non-finite values are logged as ``null``)."""
    from .data import DataError, read_jsonl_numbered

    try:
        numbered = read_jsonl_numbered(str(path))
    except DataError as exc:
        raise RunFolderError(f"{path.parent}: metrics.jsonl cannot be read: {exc}") from exc
    rows: dict[int, dict[str, float]] = {}
    for number, row in numbered:
        step = row.get("step")
        if not isinstance(step, int) or isinstance(step, bool):
            raise RunFolderError(f"{path}:{number}: the row has no integer 'step'; the file is corrupt")
        values = {k: float(v) for k, v in row.items() if k != "step" and _is_number(v)}
        if values:
            rows.setdefault(step, {}).update(values)
    return rows


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    except UnicodeDecodeError as exc:
        raise RunFolderError(f"{path}: not valid UTF-8 (byte {exc.start}); the file is corrupt") from exc
    if not isinstance(value, dict):
        raise RunFolderError(f"{path}: expected a JSON object")
    return value


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    from .config import parse_yaml, read_config_text
    from .errors import ConfigError

    try:
        value, _ = parse_yaml(read_config_text(path), str(path))
    except ConfigError as exc:
        raise RunFolderError(f"{path.parent} is not a readable run folder: {exc.problems[0]}") from exc
    return value if isinstance(value, dict) else {}


def plugin_labels(plugins_file: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[list[str], str | None]:
    """``(enabled non-default plugins, estimator)`` from ``plugins.json``, else from ``config.yaml``.

    The estimator is the plugin that implements ``rlvr_compute_advantages``; without
    ``plugins.json`` it is unknown (``None``).
    """
    described = [p for p in plugins_file.get("plugins") or [] if isinstance(p, dict) and "name" in p]
    if described:
        chosen = [p["name"] for p in described if not p.get("default")]
        estimators = [p["name"] for p in described if "rlvr_compute_advantages" in (p.get("hooks") or [])]
        return chosen, estimators[0] if estimators else None
    return list(config.get("plugins") or {}), None


def correctness_reward(config: Mapping[str, Any], plugins_file: Mapping[str, Any],
                       rows: Mapping[int, Mapping[str, float]]) -> str | None:
    """The reward that defines *correct*: ``eval.reward``, else the first registered reward, as
    ``rlvr train`` and ``rlvr eval`` choose it (``plugins.json``, else the first ``rewards/<name>/mean``)."""
    chosen = (config.get("eval") or {}).get("reward")
    if chosen:
        return str(chosen)
    registered = [r["name"] for r in plugins_file.get("rewards") or [] if isinstance(r, dict) and "name" in r]
    if registered:
        return registered[0]
    for row in rows.values():
        for key in row:
            if key.startswith("rewards/") and key.endswith("/mean"):
                return key[len("rewards/"):-len("/mean")]
    return None


def check_labels(runs: Sequence[Run]) -> None:
    seen: dict[str, Path] = {}
    for run in runs:
        if run.label in seen:
            raise RunFolderError(f"two runs have the label {run.label!r} ({seen[run.label]} and {run.path}); "
                                 "give each run its own with --label")
        seen[run.label] = run.path


# -- which metrics ---------------------------------------------------------------------------

LENGTH = (
    Metric("completions/mean_length", "mean response length (tokens)", None),
    Metric("completions/mean_length_correct", "mean length, correct responses", None),
    Metric("completions/mean_length_wrong", "mean length, wrong responses", None),
)
CLIP = (
    Metric("clip_ratio/low_mean", "clipped low (ratio < 1 - eps, A < 0)", "min"),
    Metric("clip_ratio/high_mean", "clipped high (ratio > 1 + eps, A > 0)", "min"),
    Metric("clip_ratio/region_mean", "clipped, either side", "min"),
)
RATIO = (
    Metric("rlvr/ratio/abs_log_mean", "mean |log ratio| (0 on-policy)", None),
    Metric("rlvr/ratio/max", "largest token ratio", None),
    Metric("rlvr/ratio/min", "smallest token ratio", None),
)
OPTIONAL = {"cispo_clip_ratio": Metric("cispo_clip_ratio", "CISPO clip ratio", "min")}
"""Metrics only some losses log: shown (and noted where missing) only when some run has them."""

_CLIPPED_LOSSES = "TRL logs clip ratios for the grpo, bnpo, dr_grpo, dapo and luspo losses only"
WHY_MISSING = {
    "kl": "TRL logs kl only when trainer.beta > 0",
    "completions/mean_length_correct": "logged at steps with a correct completion, by trainers that split "
                                       "lengths by correctness",
    "completions/mean_length_wrong": "logged at steps with a wrong completion, by trainers that split "
                                     "lengths by correctness",
    **{m.name: _CLIPPED_LOSSES for m in CLIP},
    "cispo_clip_ratio": "TRL logs it for the cispo loss only",
    **{m.name: "logged by RLVRTrainer at every optimiser step (not by plain TRL)" for m in RATIO},
}


def metric_groups(runs: Sequence[Run], patterns: Sequence[str] = ()) -> list[Group]:
    """The plot groups, in order: rewards (total, one per reward, penalties), accuracy, length, KL,
    entropy, clip ratio, importance ratio, then one group per ``--metric`` pattern (:func:`pattern_group`).
    Rewards and penalties are those any run logged, in order of appearance."""
    per_reward = [Metric(k, f"reward {_middle(k, 'rewards/')}", "max") for k in _keys(runs, "rewards/", "/mean")]
    penalties = [Metric(k, f"length penalty {_middle(k, 'penalties/')}", "max")
                 for k in _keys(runs, "penalties/", "/mean")]
    clip = CLIP + tuple(m for name, m in OPTIONAL.items() if any(r.has(name) for r in runs))
    return [
        Group("rewards", "Reward per plugin", (Metric("reward", "reward (weighted total)", "max"),
                                               *per_reward, *penalties)),
        Group("accuracy", "Accuracy", (Metric(TRAIN_ACCURACY, "accuracy (train)", "max"),
                                       *((Metric(HELD_OUT_ACCURACY, "held-out accuracy (during GRPO)", "max"),)
                                         if any(r.has(HELD_OUT_ACCURACY) for r in runs) else ()))),
        Group("length", "Response length", LENGTH),
        Group("kl", "KL to the reference", (Metric("kl", "KL", "min"),)),
        Group("entropy", "Entropy", (Metric("entropy", "entropy", None),)),
        Group("clip_ratio", "Clip ratio", clip),
        Group("ratio", "Importance ratio pi/pi_old (off-policy drift)", RATIO),
        *(pattern_group(runs, p) for p in patterns),
    ]


def logged_metrics(runs: Iterable[Run]) -> list[str]:
    """Every metric key any run logged, in order of appearance."""
    found: dict[str, None] = {}
    for run in runs:
        for row in run.rows.values():
            found.update((k, None) for k in row)
    return list(found)


def pattern_group(runs: Sequence[Run], pattern: str) -> Group:
    """The metrics matching ``pattern`` (a name, or an ``fnmatch`` glob such as ``rewards/*``), one panel
    each, drawn in ``metric-<pattern>.png``; :class:`RunFolderError` when no run logged a match."""
    logged = logged_metrics(runs)
    matched = [k for k in logged if fnmatch.fnmatchcase(k, pattern)]
    if not matched:
        raise RunFolderError(f"--metric {pattern!r}: no run logged a matching metric; logged: {logged}")
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", pattern).strip("_") or "metric"
    return Group(f"metric-{slug}", f"--metric {pattern}", tuple(Metric(k, k, None) for k in matched))


def _keys(runs: Iterable[Run], prefix: str, suffix: str) -> list[str]:
    return [k for k in logged_metrics(runs) if k.startswith(prefix) and k.endswith(suffix)]


def _middle(key: str, prefix: str) -> str:
    return key[len(prefix):-len("/mean")]


def missing_notes(runs: Sequence[Run], groups: Sequence[Group]) -> list[str]:
    """One line per metric some run lacks (it is skipped for that run), and per run without held-out accuracy."""
    notes = []
    for group in groups:
        for metric in group.metrics:
            lacking = [r.label for r in runs if not r.has(metric.name)]
            if not lacking:
                continue
            why = f" ({WHY_MISSING[metric.name]})" if metric.name in WHY_MISSING else ""
            if len(lacking) == len(runs):
                notes.append(f"{metric.name}: no run logged it{why}; skipped")
            else:
                notes.append(f"{metric.name}: not logged by {', '.join(lacking)}{why}; skipped for "
                             f"{'that run' if len(lacking) == 1 else 'those runs'}")
    for run in runs:
        if run.summary is None:
            notes.append(f"{run.label}: no summary.json (unfinished run?): no held-out accuracy")
        elif run.eval_accuracy("before") is None and run.eval_accuracy("after") is None:
            notes.append(f"{run.label}: summary.json has no held-out evaluation (no data.eval?)")
    return notes


# -- values ----------------------------------------------------------------------------------

def smooth(points: Sequence[Point], window: int) -> list[Point]:
    """Trailing moving average: each value becomes the mean of itself and the ``window - 1`` values logged before it.

    >>> smooth([(1, 0.0), (2, 1.0), (3, 2.0), (4, 6.0)], 2)
    [(1, 0.0), (2, 0.5), (3, 1.5), (4, 4.0)]
    """
    if window < 1:
        raise ValueError(f"smoothing window must be >= 1, got {window}")
    values = [v for _, v in points]
    return [(step, sum(values[max(0, i - window + 1):i + 1]) / (i + 1 - max(0, i - window + 1)))
            for i, (step, _) in enumerate(points)]


def ema(points: Sequence[Point], weight: float) -> list[Point]:
    """TensorBoard's smoothing: an exponential moving average, debiased for its zero start.

    With ``last_0 = 0`` and ``last_i = weight * last_{i-1} + (1 - weight) * v_i``, the smoothed
    value is ``last_i / (1 - weight ** i)`` (i counts from 1), so the first point is the raw value
    and early points are not dragged towards 0. ``weight = 0`` returns the raw series.

    >>> ema([(1, 1.0), (2, 0.0)], 0.5)
    [(1, 1.0), (2, 0.3333333333333333)]
    """
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"EMA weight must be in [0, 1), got {weight}")
    out, last = [], 0.0
    for i, (step, value) in enumerate(points, start=1):
        last = weight * last + (1.0 - weight) * value
        out.append((step, last / (1.0 - weight ** i)))
    return out


def summarize(points: Sequence[Point], better: str | None) -> dict[str, Any] | None:
    """Final, best (first step reaching it), min and max of a series; ``None`` for an empty one.

    >>> summarize([(1, 0.2), (2, 0.9), (3, 0.5)], "max")
    {'final': 0.5, 'final_step': 3, 'min': 0.2, 'max': 0.9, 'better': 'max', 'best': 0.9, 'best_step': 2}
    """
    if not points:
        return None
    low = min(points, key=lambda p: p[1])
    high = max(points, key=lambda p: p[1])
    out = {"final": points[-1][1], "final_step": points[-1][0], "min": low[1], "max": high[1], "better": better}
    if better is not None:
        best = high if better == "max" else low
        out.update(best=best[1], best_step=best[0])
    return out


def compare(runs: Sequence[Run], window: int = 1, patterns: Sequence[str] = ()) -> dict[str, Any]:
    """Everything ``compare.json`` holds: per run and metric the summary of the (smoothed) series."""
    groups = metric_groups(runs, patterns)
    first: dict[str, tuple[Metric, str]] = {}  # a metric in two groups (a --metric glob) counts in the first
    for g in groups:
        for m in g.metrics:
            first.setdefault(m.name, (m, g.name))
    metrics = [m for m, _ in first.values()]
    return {
        "smooth": window,
        "metrics": [{"name": m.name, "title": m.title, "better": m.better, "group": group}
                    for m, group in first.values()],
        "runs": [{
            "label": run.label,
            "path": str(run.path),
            "estimator": run.estimator,
            "plugins": run.plugins,
            "correctness_reward": run.correctness_reward,
            "accuracy_key": run.key(TRAIN_ACCURACY) if run.has(TRAIN_ACCURACY) else None,
            "last_step": run.last_step,
            "eval_accuracy": {"before": run.eval_accuracy("before"), "after": run.eval_accuracy("after")},
            "metrics": {m.name: s for m in metrics if (s := summarize(smooth(run.series(m.name), window), m.better))},
        } for run in runs],
        "notes": missing_notes(runs, groups),
    }


# -- the table -------------------------------------------------------------------------------

ARROW = {"max": "↑", "min": "↓", None: "↕"}


def markdown_table(result: Mapping[str, Any]) -> str:
    """One row per run; per metric any run logged one column ``final / best`` (↑ best = max, ↓ best = min)
    or ``final / min–max`` (↕, no better side); then held-out accuracy before and after GRPO."""
    runs = result["runs"]
    columns = [m for m in result["metrics"] if any(m["name"] in r["metrics"] for r in runs)]
    header = ["run", "estimator", "plugins", "steps", *(f"{m['name']} {ARROW[m['better']]}" for m in columns),
              "held-out acc. before", "held-out acc. after"]
    lines = [_row(header), _row(["---"] * len(header))]
    for run in runs:
        cells = [run["label"], run["estimator"] or "?", ", ".join(run["plugins"]) or "-", str(run["last_step"])]
        cells += [_cell(run["metrics"].get(m["name"])) for m in columns]
        cells += [_percent(run["eval_accuracy"]["before"]), _percent(run["eval_accuracy"]["after"])]
        lines.append(_row(cells))
    return "\n".join(lines)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _cell(summary: Mapping[str, Any] | None) -> str:
    if summary is None:
        return "-"
    if summary["better"] is None:
        return f"{_num(summary['final'])} / {_num(summary['min'])}–{_num(summary['max'])}"
    return f"{_num(summary['final'])} / {_num(summary['best'])}"


def _num(value: float) -> str:
    return f"{value:.4g}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def report(result: Mapping[str, Any], plots: Sequence[tuple[str, str]] | None) -> str:
    """``compare.md``: the table, how to read it, the plots (``[(file, title)]``; ``None``: not drawn)
    and the skipped metrics."""
    window = result["smooth"]
    smoothing = f"trailing mean over {window} logged steps" if window > 1 else "raw logged values (no smoothing)"
    parts = [
        "# Run comparison",
        "",
        "Runs: " + ", ".join(f"`{r['label']}` ({r['path']})" for r in result["runs"]) + ".",
        "",
        (f"Each cell is `final / best` of the series ({smoothing}): ↑ best is the highest value, "
         "↓ the lowest; ↕ has no better side and shows `final / min–max`. Held-out accuracy is the "
         "greedy evaluation of `summary.json` before and after GRPO."),
        "",
        markdown_table(result),
        "",
        "## Plots",
        "",
    ]
    if plots is None:
        parts.append("- (not drawn: --no-plots)")
    else:
        parts += [f"- [{title}]({name})" for name, title in plots] or ["- (none: no run logged a plotted metric)"]
    if result["notes"]:
        parts += ["", "## Skipped metrics", ""] + [f"- {note}" for note in result["notes"]]
    return "\n".join(parts) + "\n"
