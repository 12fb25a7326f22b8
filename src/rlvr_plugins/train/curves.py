"""A run folder's series and plots: ``metrics.jsonl`` and ``summary.json`` as :class:`Run`, smoothing,
and the PNG panels ``rlvr train`` (``curves.png``) and ``rlvr compare`` draw.

A *run folder* is the ``output_dir`` of ``rlvr train``: ``metrics.jsonl`` (required: one row per
logging step), and when present ``config.yaml``, ``plugins.json`` and ``summary.json``.
Plots need matplotlib (``pip install rlvr-plugins[plots]``); without it nothing is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import RLVRError, RunFolderError
from ..outputs import save_atomic
from .runfolder import CURVES_FILE, read_json

PLOTS_HINT = "pip install rlvr-plugins[plots]"
DEFAULT_EMA = 0.6
"""TensorBoard's default smoothing weight."""

TRAIN_ACCURACY = "accuracy/train"
"""The per-step training accuracy: ``rlvr/correct_rate`` (the share of completions whose correctness
reward reaches ``eval.threshold``) where the run logged it, else the mean of the correctness reward,
``rewards/<name>/mean`` (the same for a 0/1 reward such as ``r1-accuracy``)."""
CORRECT_RATE = "rlvr/correct_rate"
HELD_OUT_ACCURACY = "eval/accuracy"
"""Held-out accuracy measured during GRPO every ``eval.every_steps`` (step 0: before GRPO)."""

Point = tuple[int, float]


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
        hint = (
            " (the run has not logged a step yet)"
            if (folder / "config.yaml").is_file()
            else " (expected the output_dir of rlvr train)"
        )
        raise RunFolderError(f"{folder} is not a run folder: it has no metrics.jsonl{hint}")
    rows = read_rows(metrics)
    if not rows:
        raise RunFolderError(f"{folder}: metrics.jsonl has no numeric metric in any row")
    summary = read_json(folder / "summary.json")
    plugins_file = read_json(folder / "plugins.json") or {}
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
    """A finite number that is a float too (an integer past the float range is not).

    >>> _is_number(3), _is_number(float("inf")), _is_number(10**400), _is_number(True)
    (True, False, False, False)
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    from ..errors import ConfigError
    from .config import parse_yaml, read_config_text

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


def correctness_reward(
    config: Mapping[str, Any], plugins_file: Mapping[str, Any], rows: Mapping[int, Mapping[str, float]]
) -> str | None:
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
                return key[len("rewards/") : -len("/mean")]
    return None


def check_labels(runs: Sequence[Run]) -> None:
    seen: dict[str, Path] = {}
    for run in runs:
        if run.label in seen:
            raise RunFolderError(
                f"two runs have the label {run.label!r} ({seen[run.label]} and {run.path}); "
                "give each run its own with --label"
            )
        seen[run.label] = run.path


# -- which metrics ---------------------------------------------------------------------------


# -- values ----------------------------------------------------------------------------------


def smooth(points: Sequence[Point], window: int) -> list[Point]:
    """Trailing moving average: each value becomes the mean of itself and the ``window - 1`` values logged before it.

    >>> smooth([(1, 0.0), (2, 1.0), (3, 2.0), (4, 6.0)], 2)
    [(1, 0.0), (2, 0.5), (3, 1.5), (4, 4.0)]
    """
    if window < 1:
        raise ValueError(f"smoothing window must be >= 1, got {window}")
    values = [v for _, v in points]
    return [
        (step, sum(values[max(0, i - window + 1) : i + 1]) / (i + 1 - max(0, i - window + 1)))
        for i, (step, _) in enumerate(points)
    ]


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
        out.append((step, last / (1.0 - weight**i)))
    return out


# -- plots -----------------------------------------------------------------------------------


def _figure_class():
    """matplotlib's ``Figure`` (drawn with the Agg canvas; no pyplot, no display needed)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise RLVRError(
            f"The plots are drawn with matplotlib, which is not installed: {PLOTS_HINT} "
            "(or pass --no-plots for the table alone)"
        ) from exc
    return Figure


SHARED_Y = {"length"}
"""Groups whose panels share the y axis (lengths of all, correct and wrong responses read on one scale)."""


def draw_group(figure_class, group, runs: Sequence[Any], window: int, path: Path, ema: float = 0.0) -> bool:
    """One PNG for ``group``: a panel per metric that some run logged, runs overlaid in fixed colours.

    Returns False (and writes nothing) when no run logged any metric of the group.
    """
    from matplotlib.lines import Line2D

    shown = [m for m in group.metrics if any(r.has(m.name) for r in runs)]
    if group.name == "accuracy" and not shown and any(_held_out(r) for r in runs):
        shown = list(group.metrics)
    if not shown:
        return False
    suffix = f" (trailing mean over {window} steps)" if window > 1 else ""
    suffix += f" (faint: raw; solid: EMA {ema})" if ema > 0 else ""
    fig, axes = _panels(figure_class, len(shown), f"{group.title}{suffix}", group.name in SHARED_Y)
    colours = [f"C{i % 10}" for i in range(len(runs))]
    for ax, metric in zip(axes, shown):
        _draw_panel(ax, metric, runs, colours, window, ema)
    axes[0].legend(
        handles=[Line2D([], [], color=c, marker=".", label=r.label) for r, c in zip(runs, colours)], fontsize=8
    )
    save_atomic(path, lambda tmp: fig.savefig(tmp, dpi=100, format="png"), what="plot")
    return True


def _panels(figure_class, count: int, title: str, share_y: bool):
    """A figure with ``count`` panels, three a row, fixed margins (a layout engine costs ~1 s a figure)."""
    cols = min(3, count)
    rows = math.ceil(count / cols)
    width, height = max(6.5, 5.2 * cols), 3.8 * rows + 0.5
    fig = figure_class(figsize=(width, height))
    fig.subplots_adjust(
        left=0.7 / width, right=1 - 0.2 / width, bottom=0.55 / height, top=1 - 0.7 / height, wspace=0.3, hspace=0.45
    )
    fig.suptitle(title)
    axes = [fig.add_subplot(rows, cols, 1)]
    for i in range(1, count):
        axes.append(fig.add_subplot(rows, cols, i + 1, sharey=axes[0] if share_y else None))
    return fig, axes


def _draw_panel(ax, metric, runs: Sequence[Any], colours: Sequence[str], window: int, ema_weight: float = 0.0) -> None:
    from matplotlib.ticker import MaxNLocator

    for run, colour in zip(runs, colours):
        points = smooth(run.series(metric.name), window)
        if points and ema_weight > 0:
            _line(ax, points, colour, alpha=0.3, linewidth=1)
            points = ema(points, ema_weight)
        if points:
            _line(ax, points, colour)
        if metric.name == TRAIN_ACCURACY:
            _draw_held_out(ax, run, colour)
    title = metric.title
    if metric.name == TRAIN_ACCURACY:
        keys = sorted({r.key(metric.name) for r in runs if r.has(metric.name)})
        title = f"{title}: {', '.join(keys) or 'not logged'}\n◆ held-out (summary.json): before GRPO, after GRPO"
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)


def _line(ax, points, colour: str, **style) -> None:
    ax.plot(
        [s for s, _ in points], [v for _, v in points], color=colour, marker="." if len(points) < 30 else None, **style
    )


CURVES = (
    ("eval/accuracy", "held-out accuracy (greedy; step 0: before GRPO)"),
    ("eval/tools/call_frequency", "held-out tool calls per episode (greedy)"),
    ("reward", "train reward (weighted total, mean over completions)"),
    ("tools/call_frequency", "tool calls per episode"),
    ("tools/failure_frequency", "failed tool calls per call"),
    ("tools/turns_mean", "assistant turns per episode"),
)
"""What a run's ``curves.png`` shows: held-out accuracy during GRPO and the train reward, against step; with an
environment enabled, also the held-out and the train tool-call rate, the failed share and the turns per episode
(a panel is drawn only for what the run logged)."""


def draw_curves(folder: str | Path, ema: float = DEFAULT_EMA) -> Path | None:
    """Write ``curves.png`` into a run folder; ``None`` (nothing written) when matplotlib is missing."""
    try:
        figure_class = _figure_class()
    except RLVRError:
        return None
    run = load_run(folder)
    group = Group("curves", f"Learning curves: {run.label}", tuple(Metric(k, title, "max") for k, title in CURVES))
    path = Path(folder) / CURVES_FILE
    return path if draw_group(figure_class, group, [run], 1, path, ema) else None


def _held_out(run) -> list[tuple[int, float]]:
    """Held-out accuracy of ``summary.json`` as points: before GRPO at step 0, after it at the last step."""
    points = [(0, run.eval_accuracy("before")), (run.last_step, run.eval_accuracy("after"))]
    return [(s, v) for s, v in points if v is not None]


def _draw_held_out(ax, run, colour: str) -> None:
    points = _held_out(run)
    if points:
        ax.plot([s for s, _ in points], [v for _, v in points], linestyle=":", marker="D", color=colour)
