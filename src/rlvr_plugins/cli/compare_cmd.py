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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import RLVRError
from ..train.curves import DEFAULT_EMA, _figure_class, draw_group


def add_arguments(parser) -> None:
    """Add this command's arguments to its argparse sub-parser (keep imports here light)."""
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders (output_dir of rlvr train)")
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="NAME",
        help="legend and table name of each run, in the order of RUN_DIR (repeat once per run; "
        "default: the folder name)",
    )
    parser.add_argument(
        "--output",
        default="runs/compare",
        metavar="DIR",
        help="where compare.md, compare.json and the PNGs go (default: runs/compare)",
    )
    parser.add_argument(
        "--smooth",
        type=_window,
        default=1,
        metavar="N",
        help="trailing mean over N logged steps, for plots and table (default: 1, no smoothing)",
    )
    parser.add_argument(
        "--ema",
        type=_ema_weight,
        default=DEFAULT_EMA,
        metavar="WEIGHT",
        help="plots: smoothed line (TensorBoard's debiased EMA of this weight, in [0, 1)) over the "
        f"raw one (default: {DEFAULT_EMA}; 0: raw only)",
    )
    parser.add_argument(
        "--metric",
        action="append",
        default=[],
        metavar="NAME",
        help="also plot (and tabulate) this logged metric; a glob such as 'rewards/*' or 'eval/*' "
        "plots every match (repeatable)",
    )
    parser.add_argument(
        "--no-plots",
        action="store_true",
        help="write compare.md and compare.json only (no PNGs; matplotlib not needed)",
    )


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
    from ..lab import compare
    from ..train import curves
    from .common import write_json, write_text

    if args.label and len(args.label) != len(args.runs):
        raise RLVRError(
            f"--label given {len(args.label)} time(s) for {len(args.runs)} run folder(s); "
            "give one --label per RUN_DIR, in the same order, or none"
        )
    labels = args.label or [None] * len(args.runs)
    runs = [curves.load_run(path, label) for path, label in zip(args.runs, labels)]
    curves.check_labels(runs)
    figure_class = None if args.no_plots else _figure_class()
    groups = compare.metric_groups(runs, args.metric)
    result = compare.compare(runs, args.smooth, args.metric)
    out = Path(args.output)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RLVRError(f"--output {out}: cannot create the folder ({exc.strerror})") from exc
    plots = None if figure_class is None else draw_all(figure_class, groups, runs, args.smooth, out, args.ema)
    result["plots"] = [name for name, _ in plots or []]
    write_json(out / "compare.json", result)
    write_text(out / "compare.md", compare.report(result, plots))
    print(compare.markdown_table(result))
    for note in result["notes"]:
        print(f"note: {note}")
    print(f"wrote compare.md, compare.json and {len(result['plots'])} plot(s) to {out}")
    return 0


def draw_all(
    figure_class, groups, runs: Sequence[Any], window: int, out: Path, ema: float = 0.0
) -> list[tuple[str, str]]:
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
