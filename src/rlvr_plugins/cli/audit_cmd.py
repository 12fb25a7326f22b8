"""``rlvr audit``: the estimator lab.

Audits every installed advantage estimator (the plugins implementing
``rlvr_compute_advantages``, built-in or third-party) on problems whose exact policy
gradient is known: prompts of equal and of mixed difficulty, each a softmax policy over a
few answers. Over many Monte-Carlo draws of G answers per prompt it measures the expected
score-function gradient's cosine to the exact gradient, its bias after the best rescaling,
and its variance; a length experiment measures how hard long and short answers are pushed
under per-response, constant and token-mean loss normalisation.

Writes audit.md (tables), audit.json and PNG plots to --output. The default size takes
seconds; --full is the publication size.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PLOTS = ("audit-bias.png", "audit-prompt-weights.png", "audit-length.png")
COLORS = {"equal": "#4C72B0", "mixed": "#DD8452"}


def add_arguments(parser) -> None:
    """Add this command's arguments to its argparse sub-parser (keep imports here light)."""
    parser.add_argument(
        "--estimator",
        dest="estimators",
        action="append",
        default=[],
        metavar="NAME",
        help="audit only this estimator (repeatable; default: every installed one)",
    )
    parser.add_argument(
        "--output",
        default="runs/audit",
        metavar="DIR",
        help="folder for audit.md, audit.json and the plots (default: runs/audit)",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="publication size: 16 prompts, 100000 draws (default: 8 prompts, 4000 draws)",
    )
    parser.add_argument("--draws", type=int, help="Monte-Carlo draws (overrides the size)")
    parser.add_argument("--prompts", type=int, help="prompts per batch P (overrides the size)")
    parser.add_argument("--generations", type=int, help="completions per prompt G (default 8)")
    parser.add_argument("--seed", type=int, help="random seed (default 0)")


MAX_CELLS = 2**27  # draws x prompts x generations: one float64 array of the Monte-Carlo draws


def run(args) -> int:
    """Run the command from parsed arguments; return the exit code."""
    from ..errors import ConfigError

    overrides = {
        k: getattr(args, k) for k in ("draws", "prompts", "generations", "seed") if getattr(args, k) is not None
    }
    small = {k: v for k, v in overrides.items() if k != "seed" and v < 2}
    if small:
        raise ConfigError([f"--{k} must be at least 2, got {v}" for k, v in small.items()], source="rlvr audit")
    from ..lab import audit  # torch: after the arguments are checked
    from .common import write_text

    size = audit.FULL if args.full else audit.QUICK
    size = dataclasses.replace(size, **overrides)
    cells = size.draws * size.prompts * size.generations
    if cells > MAX_CELLS:
        raise ConfigError(
            [
                f"--draws x --prompts x --generations must be at most {MAX_CELLS} (about 1 GiB of "
                f"draws), got {size.draws} x {size.prompts} x {size.generations} = {cells}"
            ],
            source="rlvr audit",
        )
    start = time.perf_counter()
    estimators = audit.load_estimators(args.estimators or None)
    results = audit.run_audit(estimators, size)
    results["seconds"] = round(time.perf_counter() - start, 2)
    results["command"] = command_line(args)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "audit.json", json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    write_text(out / "audit.md", table)
    write_plots(results, out)
    print(table)
    print(f"wrote {out / 'audit.md'}, {out / 'audit.json'} and {', '.join(str(out / p) for p in PLOTS)}")
    return 0


def command_line(args) -> str:
    """The ``rlvr audit`` command that reproduces this run (the output folder left out)."""
    words = ["rlvr", "audit", *(f"--estimator {n}" for n in args.estimators)]
    words += ["--full"] if args.full else []
    words += [
        f"--{k} {getattr(args, k)}" for k in ("draws", "prompts", "generations", "seed") if getattr(args, k) is not None
    ]
    return " ".join(words)


def _pm(value: float, se: float) -> str:
    """``value ± se`` with two significant digits of ``se`` (3 to 7 decimals)."""
    digits = 3 if not se > 0 else min(7, max(3, 1 - math.floor(math.log10(se))))
    return f"{value:.{digits}f} ± {se:.{digits}f}"


def markdown(results: dict[str, Any]) -> str:
    """The audit's tables as markdown."""
    from ..lab.audit import verdict

    size = results["size"]
    lines = [
        "# Estimator audit",
        "",
        f"`{results.get('command', 'rlvr audit')}`: P={size['prompts']} prompts per batch, G={size['generations']} "
        f"completions per prompt, {size['draws']} Monte-Carlo draws, seed {size['seed']}; "
        f"{results.get('seconds', 0):.1f} s.",
        "",
    ]
    for name, sc in results["scenarios"].items():
        lines.append(f"- **{name}**: {sc['description']}; J = {sc['expected_reward']:.3f}")
    for skipped in results.get("skipped", []):
        lines.append(f"- **skipped** `{skipped['name']}` ({skipped['distribution']}): it failed, {skipped['error']}")
    lines += [
        "",
        "## Bias and variance against the exact gradient",
        "",
        "`scale`: E[g] ≈ scale · ∇J. `bias`: min over c ≥ 0 of ‖c·E[g] − ∇J‖ / ‖∇J‖. `noise`: the bias an "
        "exactly unbiased estimator shows from Monte-Carlo error alone. `rel. variance`: tr Cov(g) / ‖E[g]‖² "
        "(variance after rescaling E[g] to the exact gradient's norm). ± is one bootstrap standard error.",
        "",
        "| estimator | scenario | cosine | scale | bias | noise | verdict | rel. variance |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for est in results["estimators"]:
        for name, st in est["scenarios"].items():
            lines.append(
                f"| {est['name']} | {name} | {_pm(st['cosine'], st['cosine_se'])} | {_pm(st['scale'], st['scale_se'])} "
                f"| {_pm(st['bias'], st['bias_se'])} | {st['noise']:.4f} | {verdict(st)} "
                f"| {_pm(st['rel_variance'], st['rel_variance_se'])} |"
            )
    success = results["scenarios"]["mixed"]["success"]
    lines += [
        "",
        "## Weight of each prompt (mixed difficulty)",
        "",
        "κ_p = ⟨E[g_p], ∇_p J⟩ / ‖∇_p J‖², divided by its mean over prompts; the exact gradient has 1 everywhere.",
        "",
        "| estimator | " + " | ".join(f"J_p={s:.2f}" for s in success) + " | max/min |",
        "|---|" + "---|" * (len(success) + 1),
    ]
    for est in results["estimators"]:
        kappa = est["scenarios"]["mixed"]["prompt_scale"]
        mean = sum(kappa) / len(kappa)
        cells = " | ".join(f"{k / mean:.3f}" for k in kappa)
        lines.append(f"| {est['name']} | {cells} | {max(kappa) / min(kappa):.3f} |")
    lines += [
        "",
        "## Length: long versus short answers",
        "",
        f"Answers of {size['short']} and {size['long']} tokens, equally likely within right and within wrong. "
        "Ratio of the expected gradient on the long answer's logit to that on the short one "
        "(the exact gradient gives 1). `per-response`: loss divided by |o| (GRPO); `constant`: by a constant "
        "(Dr. GRPO); `token-mean`: by the group's total tokens (DAPO).",
        "",
        "| estimator | normalisation | wrong long / wrong short | right long / right short |",
        "|---|---|---|---|",
    ]
    for est in results["estimators"]:
        for norm, lp in est["length"].items():
            lines.append(
                f"| {est['name']} | {norm} | {_pm(lp['wrong_ratio'], lp['wrong_ratio_se'])} "
                f"| {_pm(lp['right_ratio'], lp['right_ratio_se'])} |"
            )
    lines += ["", "| estimator | distribution | version | hook calls |", "|---|---|---|---|"]
    for est in results["estimators"]:
        lines.append(f"| {est['name']} | {est['distribution']} | {est['version']} | {est['calls']} |")
    return "\n".join(lines) + "\n"


MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":")


def line_styles(n: int) -> list[tuple[str, str]]:
    """``n`` distinct (marker, line style) pairs: estimators whose curves coincide (equal up to scale, such
    as rloo and mean-baseline) stay distinguishable instead of the last one hiding the others."""
    pairs = [(m, ls) for ls in LINESTYLES for m in MARKERS]
    return [pairs[(i * (len(MARKERS) + 1)) % len(pairs)] for i in range(n)]


def dodge(i: int, n: int, spread: float) -> float:
    """Horizontal offset of curve ``i`` of ``n``, centred on 0, ``spread`` apart."""
    return (i - (n - 1) / 2) * spread


def tick_labels(ax, x: Sequence[float], names: Sequence[str]) -> None:
    """Estimator names under bars, upright (read bottom to top) so long names never overlap their neighbours."""
    ax.set_xticks(x, names, rotation=90, fontsize=9)


def write_plots(results: dict[str, Any], out: Path) -> list[Path]:
    """The three PNG plots of :data:`PLOTS` (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ests = results["estimators"]
    names = [e["name"] for e in ests]
    x = list(range(len(ests)))
    paths = [out / p for p in PLOTS]

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for j, scenario in enumerate(results["scenarios"]):
        xs = [i + (j - 0.5) * 0.38 for i in x]
        st = [e["scenarios"][scenario] for e in ests]
        kw = {"width": 0.38, "color": COLORS.get(scenario), "label": scenario, "capsize": 3}
        axes[0].bar(xs, [max(1 - s["cosine"], 1e-9) for s in st], yerr=[s["cosine_se"] for s in st], **kw)
        axes[1].bar(xs, [s["bias"] for s in st], yerr=[s["bias_se"] for s in st], **kw)
        axes[1].scatter(
            xs,
            [s["noise"] for s in st],
            marker="_",
            s=300,
            color="black",
            zorder=3,
            label="MC noise floor" if j == 0 else None,
        )
        axes[2].bar(xs, [s["rel_variance"] for s in st], yerr=[s["rel_variance_se"] for s in st], **kw)
    axes[0].set_yscale("log")
    for ax, title in zip(axes, ("1 − cosine(E[g], ∇J)", "bias after best rescaling", "tr Cov(g) / ‖E[g]‖²")):
        tick_labels(ax, x, names)
        ax.set_title(title)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(paths[0], dpi=90)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8.5, 4))
    success = results["scenarios"]["mixed"]["success"]
    spread = 0.6 * min((b - a for a, b in zip(success, success[1:])), default=0.1) / max(len(ests), 1)
    for i, (e, (marker, linestyle)) in enumerate(zip(ests, line_styles(len(ests)))):
        st = e["scenarios"]["mixed"]
        mean = sum(st["prompt_scale"]) / len(st["prompt_scale"])
        ax.errorbar(
            [p + dodge(i, len(ests), spread) for p in success],
            [k / mean for k in st["prompt_scale"]],
            yerr=[s / mean for s in st["prompt_scale_se"]],
            marker=marker,
            linestyle=linestyle,
            capsize=2,
            label=e["name"],
            fillstyle="none" if i % 2 else "full",
        )
    ax.axhline(1, color="gray", lw=1, ls="--", label="exact gradient")
    ax.set_xlabel("prompt success probability J_p")
    ax.set_ylabel("relative weight κ_p / mean κ")
    ax.set_title("Weight each estimator gives a prompt (mixed difficulty)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: the curves stay visible
    fig.tight_layout()
    fig.savefig(paths[1], dpi=90)
    plt.close(fig)

    from ..lab.audit import NORMALISATIONS

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    width = 0.8 / len(NORMALISATIONS)
    for j, norm in enumerate(NORMALISATIONS):
        xs = [i + (j - (len(NORMALISATIONS) - 1) / 2) * width for i in x]
        for ax, label in zip(axes, ("wrong", "right")):
            ax.bar(
                xs,
                [e["length"][norm][f"{label}_ratio"] for e in ests],
                width=width,
                capsize=3,
                yerr=[e["length"][norm][f"{label}_ratio_se"] for e in ests],
                label=norm,
            )
    size = results["size"]
    for ax, label in zip(axes, ("wrong", "right")):
        ax.axhline(1, color="gray", lw=1, ls="--")
        ax.axhline(size["short"] / size["long"], color="gray", lw=1, ls=":")
        tick_labels(ax, x, names)
        ax.set_title(f"push on long / push on short, {label} answers")
    axes[0].set_ylabel(f"ratio (exact 1; dotted: {size['short']}/{size['long']})")
    axes[0].set_ylim(0, 1.3)
    axes[0].legend(fontsize=8, loc="upper center", ncol=3)
    fig.tight_layout()
    fig.savefig(paths[2], dpi=90)
    plt.close(fig)
    return paths
