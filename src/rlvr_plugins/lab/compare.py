"""Compare training runs: load run folders, pick metric series, final and best values, a markdown table.

Pure data functions (no plotting; ``rlvr compare`` in ``cli/compare_cmd.py`` draws the PNGs with
:mod:`rlvr_plugins.train.curves`, which also reads the run folders: :class:`~rlvr_plugins.train.curves.Run`).

Every metric has a direction: ``"max"`` (higher is better: rewards, accuracy), ``"min"`` (lower is
better: KL to the reference, clip ratios) or ``None`` (no better side: lengths, entropy), for which
the table shows the range instead of a best value.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..train.curves import (
    HELD_OUT_ACCURACY,
    TRAIN_ACCURACY,
    Group,
    Metric,
    Point,
    Run,
    RunFolderError,
    smooth,
)

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
    penalties = [
        Metric(k, f"length penalty {_middle(k, 'penalties/')}", "max") for k in _keys(runs, "penalties/", "/mean")
    ]
    clip = CLIP + tuple(m for name, m in OPTIONAL.items() if any(r.has(name) for r in runs))
    return [
        Group(
            "rewards",
            "Reward per plugin",
            (Metric("reward", "reward (weighted total)", "max"), *per_reward, *penalties),
        ),
        Group(
            "accuracy",
            "Accuracy",
            (
                Metric(TRAIN_ACCURACY, "accuracy (train)", "max"),
                *(
                    (Metric(HELD_OUT_ACCURACY, "held-out accuracy (during GRPO)", "max"),)
                    if any(r.has(HELD_OUT_ACCURACY) for r in runs)
                    else ()
                ),
            ),
        ),
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
    return key[len(prefix) : -len("/mean")]


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
                notes.append(
                    f"{metric.name}: not logged by {', '.join(lacking)}{why}; skipped for "
                    f"{'that run' if len(lacking) == 1 else 'those runs'}"
                )
    for run in runs:
        if run.summary is None:
            notes.append(f"{run.label}: no summary.json (unfinished run?): no held-out accuracy")
        elif run.eval_accuracy("before") is None and run.eval_accuracy("after") is None:
            notes.append(f"{run.label}: summary.json has no held-out evaluation (no data.eval?)")
    return notes


# -- values ----------------------------------------------------------------------------------


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
        "metrics": [
            {"name": m.name, "title": m.title, "better": m.better, "group": group} for m, group in first.values()
        ],
        "runs": [
            {
                "label": run.label,
                "path": str(run.path),
                "estimator": run.estimator,
                "plugins": run.plugins,
                "correctness_reward": run.correctness_reward,
                "accuracy_key": run.key(TRAIN_ACCURACY) if run.has(TRAIN_ACCURACY) else None,
                "last_step": run.last_step,
                "eval_accuracy": {"before": run.eval_accuracy("before"), "after": run.eval_accuracy("after")},
                "metrics": {
                    m.name: s for m in metrics if (s := summarize(smooth(run.series(m.name), window), m.better))
                },
            }
            for run in runs
        ],
        "notes": missing_notes(runs, groups),
    }


# -- the table -------------------------------------------------------------------------------

ARROW = {"max": "↑", "min": "↓", None: "↕"}


def markdown_table(result: Mapping[str, Any]) -> str:
    """One row per run; per metric any run logged one column ``final / best`` (↑ best = max, ↓ best = min)
    or ``final / min–max`` (↕, no better side); then held-out accuracy before and after GRPO."""
    runs = result["runs"]
    columns = [m for m in result["metrics"] if any(m["name"] in r["metrics"] for r in runs)]
    header = [
        "run",
        "estimator",
        "plugins",
        "steps",
        *(f"{m['name']} {ARROW[m['better']]}" for m in columns),
        "held-out acc. before",
        "held-out acc. after",
    ]
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
        (
            f"Each cell is `final / best` of the series ({smoothing}): ↑ best is the highest value, "
            "↓ the lowest; ↕ has no better side and shows `final / min–max`. Held-out accuracy is the "
            "greedy evaluation of `summary.json` before and after GRPO."
        ),
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
