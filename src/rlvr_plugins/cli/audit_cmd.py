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

``rlvr audit rewards CONFIG`` audits the config's rewards instead: recall on the data's
references and a battery of known hacks (``rlvr audit rewards --help``).
"""

from __future__ import annotations

import argparse
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
    parser.set_defaults(audit_target=None)
    targets = parser.add_subparsers(dest="audit_target", metavar="{rewards}")
    rewards = targets.add_parser(
        "rewards",
        help="audit the config's rewards: recall on the data's references, and a battery of known hacks",
        description=REWARDS_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_reward_arguments(rewards)


REWARDS_DESCRIPTION = """\
rlvr audit rewards CONFIG: for every reward the config enables, (a) recall: completions built
from the data's own references in the reward's documented form must score what its example
scores; (b) exploits: classes of known hacks (answer spraying, hedges, several answers, the
answer only in the thinking, look-alike digits, near-miss decimals, huge outputs, empty or
invisible thinking, ...; plus the classes plugins ship through rlvr_reward_exploits), each
with its accept rate, masked rate and cost. Writes reward_audit.md, reward_audit.json and
reward_audit.png to --report; exit status 1 when a class is accepted above --threshold (or
recall is below --min-recall), 2 on bad input.

examples:
  rlvr audit rewards configs/cpu/r1.yaml
  rlvr audit rewards configs/r1_zero.yaml --data ../shared/data/eval/minerva_math.jsonl --limit 32
"""


def add_reward_arguments(parser) -> None:
    """The arguments of ``rlvr audit rewards``."""
    parser.add_argument("config", help="the YAML config of a run (its plugins, data, engine)")
    parser.add_argument("--data", metavar="FILE", help="a JSONL file to audit on instead of data.train")
    parser.add_argument("--report", default="runs/reward-audit", metavar="DIR", help="default: runs/reward-audit")
    parser.add_argument(
        "--threshold",
        type=float,
        default=0.0,
        metavar="X",
        help="exit 1 when a class's accept rate is above X (default 0: one accepted hack fails)",
    )
    parser.add_argument(
        "--min-recall",
        type=float,
        default=0.0,
        metavar="R",
        help="exit 1 when a reward's recall is below R (default 0: recall is reported, not gated)",
    )
    parser.add_argument("--limit", type=int, default=64, metavar="N", help="audit the first N rows (default 64)")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override a config value"
    )
    parser.set_defaults(func=run_rewards)


def run_rewards(args) -> int:
    """``rlvr audit rewards``: every check first, then the audit; exit 1 when a gate fails."""
    from ..errors import ConfigError
    from ..manager import check_plugins_config
    from ..outputs import check_output_file
    from ..train.config import load_config, run_config
    from ..train.validate import where_of

    problems = []
    if not 0.0 <= args.threshold <= 1.0:
        problems.append(f"--threshold must be between 0 and 1, got {args.threshold:g}")
    if not 0.0 <= args.min_recall <= 1.0:
        problems.append(f"--min-recall must be between 0 and 1, got {args.min_recall:g}")
    if args.limit < 1:
        problems.append(f"--limit must be at least 1, got {args.limit}")
    if args.data is not None and not Path(args.data).is_file():
        problems.append(f"--data {args.data}: no such file (give a JSONL file of rows)")
    if problems:
        raise ConfigError(problems, source="rlvr audit rewards")
    overrides = list(args.overrides)
    if args.data is not None:
        path = json.dumps(str(Path(args.data).resolve()))  # a JSON string is a YAML string
        overrides += [f"data.train={{source: jsonl, path: {path}}}"]
    config = load_config(args.config, overrides, need_model=False)
    check_plugins_config(run_config(config).plugins, where=where_of(config))
    report = Path(args.report)
    try:
        report.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--report {report}: cannot make the folder ({exc.strerror or exc})") from None
    for name in REWARD_FILES:
        check_output_file(report / name, "--report")
    from ..lab.reward_audit import failing, run_reward_audit
    from ..rewards import Engines
    from ..train.data import load_rows
    from ..train.run import engine_options, validate_scoring
    from .common import quiet_libraries, write_json, write_text

    quiet_libraries()
    plugin_set = validate_scoring(config)
    rewards = plugin_set.reward_functions()
    if not rewards:
        raise ConfigError(
            "the config enables no reward; enable one (e.g. plugins: {r1-accuracy: {}})", source="plugins"
        )
    rows = load_rows(config, "train", plugin_set)
    if not rows:
        raise ConfigError("data.train has no rows to audit (set data.train, or pass --data FILE)", source="data")
    rows = rows[: args.limit]
    exploits = plugin_set.reward_exploits()
    engines = Engines(**engine_options(config))
    try:
        result = run_reward_audit(rewards, rows, engines, exploits, progress=lambda m: print(m, flush=True))
    finally:
        engines.close()
    result.update(
        config=str(args.config),
        data=str(args.data) if args.data else "data.train",
        threshold=args.threshold,
        min_recall=args.min_recall,
    )
    result["failing"] = failing(result, args.threshold, args.min_recall)
    write_json(report / "reward_audit.json", result)
    table = reward_markdown(result)
    write_text(report / "reward_audit.md", table)
    write_reward_plot(result, report / "reward_audit.png")
    print(table)
    print(f"wrote {', '.join(str(report / n) for n in REWARD_FILES)}")
    if result["failing"]:
        print(f"reward audit FAILED: {', '.join(result['failing'])}", flush=True)
        return 1
    return 0


REWARD_FILES = ("reward_audit.md", "reward_audit.json", "reward_audit.png")


def _rate(value: float) -> str:
    return f"{100 * value:.0f}%" if value in (0.0, 1.0) else f"{100 * value:.1f}%"


def reward_markdown(result: dict[str, Any]) -> str:
    """The reward audit as markdown: one table per reward."""
    lines = [
        "# Reward audit",
        "",
        f"`rlvr audit rewards {result.get('config', '')}` on {result['rows']} rows of "
        f"{result.get('data', 'data.train')}; threshold {result.get('threshold', 0):g}; {result['seconds']:.1f} s.",
        "",
        "accept: scored above the reward's *wrong* value (0 unless the class says otherwise); masked: the engine "
        "could not score (timeout, exception); n/a: the reward does not apply; cost: seconds per completion.",
    ]
    for reward in result["rewards"]:
        recall = reward["recall"]
        lines += ["", f"## {reward['reward']} (plugin {reward['plugin']}; judges the {reward['target']})", ""]
        if recall is None:
            lines.append("recall: not measured (the reward carries no example to read its form from)")
        else:
            lines.append(
                f"recall: **{_rate(recall['recall'])}** of {recall['items']} completions built from the references "
                f"({', '.join(recall['styles'])}) scored {recall['expected']:g}, as the reward's own example does; "
                f"masked {_rate(recall['masked_rate'])}."
            )
            for shown in recall["shown"]:
                text = shown["completion"].replace("\n", " ")
                lines.append(f"- not credited (row {shown['row']}, score {shown['score']:g}): `{text}`")
        lines += [
            "",
            "| class | from | completions | accept | masked | n/a | cost (s) | description |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for c in reward["classes"]:
            flag = " **FAIL**" if f"{reward['reward']}/{c['name']}" in result.get("failing", []) else ""
            cost = "" if c["seconds_per_item"] is None else f"{c['seconds_per_item']:.4f}"
            lines.append(
                f"| {c['name']}{flag} | {c['source']} | {c['items']} | {_rate(c['accept_rate'])} | "
                f"{_rate(c['masked_rate'])} | {c['not_applicable']} | {cost} | {c['description']} |"
            )
        for c in reward["classes"]:
            for shown in c["shown"][:1]:
                text = shown["completion"].replace("|", "\\|").replace("\n", " ")
                lines.append(f"\n- accepted `{c['name']}` ({shown['score']:g}): `{text}`")
    verdict = ", ".join(result.get("failing", [])) or "none"
    lines += ["", f"Failing (accept rate above {result.get('threshold', 0):g}): {verdict}"]
    return "\n".join(lines) + "\n"


def write_reward_plot(result: dict[str, Any], path: Path) -> Path:
    """One horizontal bar per (reward, class): accept rate (red above the threshold) and masked rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = [
        (f"{r['reward']} / {c['name']}", c["accept_rate"], c["masked_rate"])
        for r in result["rewards"]
        for c in r["classes"]
    ]
    bars += [
        (f"{r['reward']} / recall", r["recall"]["recall"], r["recall"]["masked_rate"])
        for r in result["rewards"]
        if r["recall"]
    ]
    threshold = result.get("threshold", 0.0)
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(bars) + 1.2))
    y = list(range(len(bars)))
    colors = ["#4C72B0" if n.endswith("/ recall") else ("#C44E52" if a > threshold else "#55A868") for n, a, _ in bars]
    ax.barh(y, [a for _, a, _ in bars], color=colors, height=0.6, label="accept rate (recall: share credited)")
    ax.barh(y, [m for _, _, m in bars], left=[a for _, a, _ in bars], color="#BBBBBB", height=0.6, label="masked")
    ax.set_yticks(y, [n for n, _, _ in bars], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.axvline(threshold, color="black", lw=0.8, ls="--")
    ax.set_xlabel("share of completions")
    ax.set_title("Reward audit. Red: hack accepted; blue: recall", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


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
    lines += pass_lines(results)
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


def pass_lines(results: dict[str, Any]) -> list[str]:
    """The pass@k table: pass@1 and pass@k gained by one step of fixed length along each expected update."""
    from ..lab.audit import PASS_STEP

    scenarios = results["scenarios"]
    if not all("pass_k" in sc for sc in scenarios.values()) or not all(
        "passk_gain" in st for est in results["estimators"] for st in est["scenarios"].values()
    ):
        return []  # an audit.json written before the pass@k columns
    k = next(iter(scenarios.values()))["pass_k"]
    lines = [
        "",
        f"## pass@1 and pass@{k} after one step",
        "",
        f"θ + {PASS_STEP:g} · E[g] / ‖E[g]‖: the gain in expected reward (pass@1) and in pass@{k} "
        f"(1 − (1 − J_p)^{k}, averaged over prompts); `cos` is the cosine of E[g] to ∇pass@{k}. "
        f"The two exact rows step along ∇pass@1 and ∇pass@{k} themselves.",
        "",
        f"| estimator | scenario | pass@1 gain | pass@{k} gain | cos to ∇pass@{k} |",
        "|---|---|---|---|---|",
    ]
    for label, key in (("exact ∇pass@1", "exact_pass1_step"), (f"exact ∇pass@{k}", "exact_passk_step")):
        for name, sc in scenarios.items():
            st = sc[key]
            lines.append(
                f"| *{label}* | {name} | {st['pass1_gain']:.5f} | {st['passk_gain']:.5f} | {st['passk_cosine']:.4f} |"
            )
    for est in results["estimators"]:
        for name, st in est["scenarios"].items():
            lines.append(
                f"| {est['name']} | {name} | {st['pass1_gain']:.5f} | {st['passk_gain']:.5f} "
                f"| {st['passk_cosine']:.4f} |"
            )
    return lines


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
