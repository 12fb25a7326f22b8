"""rlvr compare RUN_DIR [RUN_DIR ...]: compare training runs.

Reads each run folder (the output_dir of rlvr train: metrics.jsonl, summary.json,
config.yaml, plugins.json) and writes to --output:

  compare.md    a table, one row per run: final / best of every metric, held-out accuracy
  compare.json  the same values, with the step of each best value
  *.png         one plot per metric group against steps, runs overlaid: rewards.png (total and
                per reward plugin), accuracy.png, length.png (all, correct, wrong responses),
                kl.png, entropy.png, clip_ratio.png; metric-<NAME>.png for each --metric NAME

Plots show the raw series faintly and, over it, TensorBoard's debiased EMA (--ema WEIGHT).

A metric a run did not log is skipped for that run and listed in compare.md.
Plots need matplotlib: pip install rlvr-plugins[plots] (--no-plots writes the table alone).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, Sequence

from ..errors import RLVRError

PLOTS_HINT = "pip install rlvr-plugins[plots]"
DEFAULT_EMA = 0.6
"""TensorBoard's default smoothing weight."""


def add_arguments(parser) -> None:
    """Add this command's arguments to its argparse sub-parser (keep imports here light)."""
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders (output_dir of rlvr train)")
    parser.add_argument("--label", action="append", default=[], metavar="NAME",
                        help="legend and table name of each run, in the order of RUN_DIR (repeat once per run; "
                             "default: the folder name)")
    parser.add_argument("--output", default="runs/compare", metavar="DIR",
                        help="where compare.md, compare.json and the PNGs go (default: runs/compare)")
    parser.add_argument("--smooth", type=_window, default=1, metavar="N",
                        help="trailing mean over N logged steps, for plots and table (default: 1, no smoothing)")
    parser.add_argument("--ema", type=_ema_weight, default=DEFAULT_EMA, metavar="WEIGHT",
                        help="plots: smoothed line (TensorBoard's debiased EMA of this weight, in [0, 1)) over the "
                             f"raw one (default: {DEFAULT_EMA}; 0: raw only)")
    parser.add_argument("--metric", action="append", default=[], metavar="NAME",
                        help="also plot (and tabulate) this logged metric; a glob such as 'rewards/*' or 'eval/*' "
                             "plots every match (repeatable)")
    parser.add_argument("--no-plots", action="store_true",
                        help="write compare.md and compare.json only (no PNGs; matplotlib not needed)")


def _window(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--smooth takes a whole number of steps >= 1, got {text!r}")
    return value


def _ema_weight(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"--ema takes a weight in [0, 1) (0: no smoothing), got {text!r}")
    return value


def run(args) -> int:
    """Run the command from parsed arguments; return the exit code."""
    from .. import compare
    from . import write_json, write_text

    if args.label and len(args.label) != len(args.runs):
        raise RLVRError(f"--label given {len(args.label)} time(s) for {len(args.runs)} run folder(s); "
                        "give one --label per RUN_DIR, in the same order, or none")
    labels = args.label or [None] * len(args.runs)
    runs = [compare.load_run(path, label) for path, label in zip(args.runs, labels)]
    compare.check_labels(runs)
    figure_class = None if args.no_plots else _figure_class()
    groups = compare.metric_groups(runs, args.metric)
    result = compare.compare(runs, args.smooth, args.metric)
    out = Path(args.output)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RLVRError(f"--output {out}: cannot create the folder ({exc.strerror})") from exc
    plots = None if figure_class is None else draw_all(figure_class, groups, runs, args.smooth, out,
                                                       args.ema)
    result["plots"] = [name for name, _ in plots or []]
    write_json(out / "compare.json", result)
    write_text(out / "compare.md", compare.report(result, plots))
    print(compare.markdown_table(result))
    for note in result["notes"]:
        print(f"note: {note}")
    print(f"wrote compare.md, compare.json and {len(result['plots'])} plot(s) to {out}")
    return 0


def _figure_class():
    """matplotlib's ``Figure`` (drawn with the Agg canvas; no pyplot, no display needed)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise RLVRError(f"rlvr compare draws its plots with matplotlib, which is not installed: {PLOTS_HINT} "
                        "(or pass --no-plots for the table alone)") from exc
    return Figure


def draw_all(figure_class, groups, runs: Sequence[Any], window: int, out: Path,
             ema: float = 0.0) -> list[tuple[str, str]]:
    """Draw every group that has data; ``[(file name, title)]`` of the PNGs written. A group without
    data has no PNG (one left in ``out`` by an earlier comparison is removed)."""
    drawn = []
    for group in groups:
        path = out / f"{group.name}.png"
        if draw_group(figure_class, group, runs, window, path, ema):
            drawn.append((path.name, group.title))
        else:
            path.unlink(missing_ok=True)
    return drawn


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
    axes[0].legend(handles=[Line2D([], [], color=c, marker=".", label=r.label) for r, c in zip(runs, colours)],
                   fontsize=8)
    fig.savefig(path, dpi=100)
    return True


def _panels(figure_class, count: int, title: str, share_y: bool):
    """A figure with ``count`` panels, three a row, fixed margins (a layout engine costs ~1 s a figure)."""
    cols = min(3, count)
    rows = math.ceil(count / cols)
    width, height = max(6.5, 5.2 * cols), 3.8 * rows + 0.5
    fig = figure_class(figsize=(width, height))
    fig.subplots_adjust(left=0.7 / width, right=1 - 0.2 / width, bottom=0.55 / height, top=1 - 0.7 / height,
                        wspace=0.3, hspace=0.45)
    fig.suptitle(title)
    axes = [fig.add_subplot(rows, cols, 1)]
    for i in range(1, count):
        axes.append(fig.add_subplot(rows, cols, i + 1, sharey=axes[0] if share_y else None))
    return fig, axes


def _draw_panel(ax, metric, runs: Sequence[Any], colours: Sequence[str], window: int, ema: float = 0.0) -> None:
    from matplotlib.ticker import MaxNLocator

    from .. import compare

    for run, colour in zip(runs, colours):
        points = compare.smooth(run.series(metric.name), window)
        if points and ema > 0:
            _line(ax, points, colour, alpha=0.3, linewidth=1)
            points = compare.ema(points, ema)
        if points:
            _line(ax, points, colour)
        if metric.name == compare.TRAIN_ACCURACY:
            _draw_held_out(ax, run, colour)
    title = metric.title
    if metric.name == compare.TRAIN_ACCURACY:
        keys = sorted({r.key(metric.name) for r in runs if r.has(metric.name)})
        title = f"{title}: {', '.join(keys) or 'not logged'}\n◆ held-out (summary.json): before GRPO, after GRPO"
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)


def _line(ax, points, colour: str, **style) -> None:
    ax.plot([s for s, _ in points], [v for _, v in points], color=colour,
            marker="." if len(points) < 30 else None, **style)


CURVES = (("eval/accuracy", "held-out accuracy (greedy; step 0: before GRPO)"),
          ("reward", "train reward (weighted total, mean over completions)"))
"""What a run's ``curves.png`` shows: held-out accuracy during GRPO and the train reward, against step."""


def draw_curves(folder: str | Path, ema: float = DEFAULT_EMA) -> Path | None:
    """Write ``curves.png`` into a run folder; ``None`` (nothing written) when matplotlib is missing."""
    from .. import compare

    try:
        figure_class = _figure_class()
    except RLVRError:
        return None
    run = compare.load_run(folder)
    group = compare.Group("curves", f"Learning curves: {run.label}",
                          tuple(compare.Metric(k, title, "max") for k, title in CURVES))
    path = Path(folder) / "curves.png"
    return path if draw_group(figure_class, group, [run], 1, path, ema) else None


def _held_out(run) -> list[tuple[int, float]]:
    """Held-out accuracy of ``summary.json`` as points: before GRPO at step 0, after it at the last step."""
    points = [(0, run.eval_accuracy("before")), (run.last_step, run.eval_accuracy("after"))]
    return [(s, v) for s, v in points if v is not None]


def _draw_held_out(ax, run, colour: str) -> None:
    points = _held_out(run)
    if points:
        ax.plot([s for s, _ in points], [v for _, v in points], linestyle=":", marker="D", color=colour)
