"""``rlvr filter CONFIG``: data hygiene, then keep the prompts of useful difficulty for RL
(Kimi k1.5 §2.2, Qwen3 §4.1–4.2).

**Hygiene** (``filter.hygiene``, when the section is given; no model): each row of
``data.<filter.split>`` (default ``train``) is dropped when :mod:`rlvr_plugins.lab.hygiene` finds
it multiple-choice (``drop_multiple_choice``, default true), true/false or yes/no
(``drop_true_false``, default true), or overlapping an evaluation set
(``decontaminate: {eval_sets, n, short_n, threshold}``), checked in that order. It runs first,
so the sampling below never spends time on a dropped prompt.

**Difficulty** (unless ``filter.difficulty: false``): each remaining prompt is sampled
``filter.n`` times with the config's model; its pass rate is the share of samples whose
``filter.reward`` reaches ``filter.threshold``. A prompt is kept when its pass rate is in the
band: by default ``0 < pass rate < 1`` (drop the prompts the model always or never solves,
which give GRPO no signal); ``min_pass_rate`` / ``max_pass_rate`` set inclusive bounds instead.
With ``drop_solved_without_cot``, a kept prompt is also dropped when one greedy answer to
the prompt followed by ``no_cot_instruction`` (no chain of thought) is already correct
(Qwen3's filter). With ``difficulty: false`` no model is loaded and no reward is needed.

Writes to the run folder ``filtered.jsonl`` (the kept rows as loaded, answer as in the source,
plus ``pass_rate`` and ``passes`` when sampled), ``dropped.jsonl`` (the dropped rows, each with
a ``drop`` record: stage, reason, rule and evidence or overlap), ``filter_report.json``
(counts, examples) and ``filter_report.md`` (the same for people).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ..lab import hygiene
from ..train.config import resolve_path
from ..train.sampling import SamplingOptions, require_backend, sample
from ..train.sections import EvalSetSection, HygieneSection
from ..train.validate import run_config
from .common import (
    engines_for,
    reaches,
    render_texts,
    sample_rows,
    score,
    setup,
    source_row,
    split_rows,
    target_reward,
    with_suffix,
    write_json,
    write_jsonl,
    write_text,
)

EXAMPLES = """examples:
  rlvr filter configs/cpu/r1.yaml --set filter.n=8 --set output_dir=runs/filtered
  rlvr filter configs/cpu/r1.yaml --set filter.difficulty=false --set filter.hygiene={}   # hygiene only, no model
"""


def in_band(passes: int, n: int, min_pass_rate: float | None, max_pass_rate: float | None) -> bool:
    """Whether ``passes / n`` is in the band: ``(0, 1)`` exclusive by default; given bounds are inclusive.

    >>> [in_band(c, 4, None, None) for c in range(5)]
    [False, True, True, True, False]
    >>> [in_band(c, 4, 0.5, 1.0) for c in range(5)]
    [False, False, True, True, True]
    """
    rate = passes / n
    low_ok = rate >= min_pass_rate if min_pass_rate is not None else passes > 0
    high_ok = rate <= max_pass_rate if max_pass_rate is not None else passes < n
    return low_ok and high_ok


def check_config(config: Mapping[str, Any]) -> None:
    """What ``rlvr filter`` needs beyond a valid config, checked before anything heavy is imported."""
    if run_config(config).filter.difficulty and run_config(config).model is None:
        raise ConfigError(
            "filter.difficulty samples every prompt with the model, but the config has no model "
            "section: give model.name_or_path (or model.tiny), or set filter.difficulty: false "
            "for hygiene only",
            source="filter",
        )


def run_filter(config: dict[str, Any]) -> dict[str, Any]:
    """Filter the split; return the report (also written to ``filter_report.json`` and ``.md``)."""

    check_config(config)
    sections = run_config(config)
    section = sections.filter
    difficulty = section.difficulty
    options = section.sampling()
    if difficulty:
        require_backend(options.backend, "filter", config)
    started = time.perf_counter()
    ctx = setup(config, "filter", need_rewards=difficulty)
    split, rows = split_rows(config, "filter", section.split, "train", ctx.plugin_set if difficulty else None)
    drops: dict[int, dict[str, Any]] = {}
    report: dict[str, Any] = {"split": split}
    if sections.hygiene is not None:
        report["hygiene"], hygiene_drops = run_hygiene(config, sections.hygiene, rows)
        drops.update(hygiene_drops)
    candidates = [i for i in range(len(rows)) if i not in drops]
    extra: dict[int, dict[str, Any]] = {}
    if difficulty:
        stage, difficulty_drops, extra = _difficulty(config, ctx, section, options, rows, candidates)
        report.update(stage)
        drops.update(difficulty_drops)
    else:
        report["difficulty"] = "skipped (filter.difficulty: false)"
    kept = [i for i in candidates if i not in drops]
    output = ctx.out / section.output
    dropped_output = ctx.out / "dropped.jsonl"
    write_jsonl(output, [{**source_row(rows[i]), **extra.get(i, {})} for i in kept])
    write_jsonl(dropped_output, [{**source_row(rows[i]), "drop": drops[i]} for i in sorted(drops)])
    report = {
        "split": split,
        "prompts": len(rows),
        "kept": len(kept),
        **report,
        "output": str(output),
        "dropped_output": str(dropped_output),
        "seconds": round(time.perf_counter() - started, 1),
    }
    write_json(ctx.out / "filter_report.json", report)
    write_text(ctx.out / "filter_report.md", report_markdown(report))
    summary = f"hygiene dropped {report['hygiene']['dropped']}; " if "hygiene" in report else ""
    if difficulty:
        summary += f"pass rate band {report['band']['rule']} dropped {report['dropped']}; "
    print(f"kept {len(kept)} of {len(rows)} prompts; {summary}wrote {output}", flush=True)
    return report


PROMPT_COLUMNS = ("prompt", "question", "problem")


def run_hygiene(config: Mapping[str, Any], spec: HygieneSection, rows: list[dict[str, Any]]):
    """The ``filter.hygiene`` stage: ``(report part, {index: drop record})`` (see :func:`hygiene.screen`)."""
    started = time.perf_counter()
    decontaminate = spec.decontaminate
    index, threshold, eval_sets, part = None, 0.0, {}, {}
    if decontaminate is not None:
        eval_sets = load_eval_sets(config, decontaminate.eval_sets)
        threshold = decontaminate.threshold
        index = hygiene.EvalIndex(
            {name: s["prompts"] for name, s in eval_sets.items()}, n=decontaminate.n, short_n=decontaminate.short_n
        )
    records, overlaps = hygiene.screen(
        rows,
        multiple_choice=spec.drop_multiple_choice,
        true_false=spec.drop_true_false,
        index=index,
        threshold=threshold,
    )
    for record in records:
        if record is not None and record["reason"] == hygiene.CONTAMINATED:
            record["eval_prompt"] = hygiene.excerpt(eval_sets[record["eval_set"]]["prompts"][record["eval_row"]])
    if index is not None:
        part["decontamination"] = {
            "n": index.n,
            "short_n": index.short_n,
            "threshold": threshold,
            "overlap": "distinct n-grams of the training prompt found in any eval prompt / its distinct n-grams; "
            "dropped when > threshold",
            "eval_sets": {
                name: {"source": s["source"], "column": s["column"], "prompts": len(s["prompts"])}
                for name, s in eval_sets.items()
            },
            "eval_ngrams": len(index),
            "dropped_per_eval_set": dict(
                Counter(r["eval_set"] for r in records if r is not None and r["reason"] == hygiene.CONTAMINATED)
            ),
            "not_measured_too_short": sum(o is not None and o.grams == 0 for o in overlaps),
            "kept_with_overlap": sum(o is not None and 0 < o.overlap <= threshold for o in overlaps),
        }
    summary = hygiene.summarise(rows, records, spec.examples)
    report = {
        "drop_multiple_choice": spec.drop_multiple_choice,
        "drop_true_false": spec.drop_true_false,
        **summary,
        **part,
        "seconds": round(time.perf_counter() - started, 2),
    }
    return report, {i: {"stage": "hygiene", **r} for i, r in enumerate(records) if r is not None}


def load_eval_sets(config: Mapping[str, Any], specs: list) -> dict[str, dict[str, Any]]:
    """``{name: {source, column, prompts}}`` for ``filter.hygiene.decontaminate.eval_sets``.

    An entry is ``data.eval`` (the config's eval split, its ``prompt`` column), a JSONL path, or
    ``{path, column, name}``; without ``column`` the first of ``prompt``, ``question``,
    ``problem`` that the first row has. The name defaults to the path as written.
    """
    from ..train.data import DataError, load_rows, read_jsonl

    out: dict[str, dict[str, Any]] = {}
    for spec in specs:
        if spec == "data.eval":
            rows = load_rows(config, "eval") or []
            out["data.eval"] = {"source": "data.eval", "column": "prompt", "prompts": [r["prompt"] for r in rows]}
            continue
        spec = spec if isinstance(spec, EvalSetSection) else EvalSetSection(path=spec)
        path = resolve_path(config, spec.path)
        rows = read_jsonl(path)
        column = spec.column or next((c for c in PROMPT_COLUMNS if c in rows[0]), None)
        missing = next((i for i, r in enumerate(rows) if column not in r), None)
        if missing is not None:
            raise DataError(
                f"eval set {spec.path!r}: row {missing} has no {column or 'prompt'!r} column; "
                f"columns present: {sorted(rows[missing])}; set column: in "
                f"filter.hygiene.decontaminate.eval_sets"
            )
        out[spec.name or spec.path] = {"source": path, "column": column, "prompts": [r[column] for r in rows]}
    return out


def report_markdown(report: Mapping[str, Any]) -> str:
    """``filter_report.md``: the report for people, with the dropped examples."""
    lines = [
        f"# rlvr filter: data.{report['split']}",
        "",
        f"Kept **{report['kept']}** of {report['prompts']} prompts.",
        "",
    ]
    hyg = report.get("hygiene")
    if hyg is not None:
        switches = (
            f"Multiple-choice detector: {'on' if hyg['drop_multiple_choice'] else 'off'}; "
            f"true/false detector: {'on' if hyg['drop_true_false'] else 'off'}; "
            f"decontamination: {'on' if 'decontamination' in hyg else 'off'}. "
            "A row is dropped by the first check that fires, in that order."
        )
        lines += ["## Hygiene", "", switches, "", "| reason | dropped |", "|---|---|"]
        lines += [f"| {reason} | {count} |" for reason, count in hyg["dropped"].items()]
        if hyg["by_rule"]:
            lines += ["", "| rule | dropped |", "|---|---|"]
            lines += [f"| `{rule}` | {count} |" for rule, count in hyg["by_rule"].items()]
        decon = hyg.get("decontamination")
        if decon is not None:
            lines += [
                "",
                f"Decontamination: word {decon['n']}-grams"
                + (f" ({decon['short_n']}-grams for shorter prompts)" if decon["short_n"] else "")
                + f"; overlap = {decon['overlap']} ({decon['threshold']}); "
                f"{decon['eval_ngrams']} distinct eval n-grams from:",
                "",
            ]
            lines += [
                f"- `{name}`: {s['prompts']} prompts (column `{s['column']}`), "
                f"{decon['dropped_per_eval_set'].get(name, 0)} training prompts dropped"
                for name, s in decon["eval_sets"].items()
            ]
            lines += [
                "",
                f"Kept with some overlap at or below the threshold: {decon['kept_with_overlap']}; "
                f"too short to measure (no n-gram): {decon['not_measured_too_short']}.",
            ]
        for rule, shown in hyg["examples"].items():
            lines += ["", f"### `{rule}`", ""]
            for ex in shown:
                why = (
                    f"overlap {ex['overlap']} with `{ex['eval_set']}` row {ex['eval_row']}: {ex['eval_prompt']}"
                    if "overlap" in ex
                    else f"matched: `{ex['evidence']}`"
                )
                lines.append(
                    f"- row {ex['row']}: {ex['prompt']}"
                    + (f" (answer: {ex['answer']})" if "answer" in ex else "")
                    + f"\n  - {why}"
                )
    if "band" in report:
        how = (
            f"{report['sampled']} prompts sampled {report['n']} times at temperature {report['temperature']} "
            f"with `{report['model']}`; solved: `{report['reward']}` >= {report['threshold']}; "
            f"kept: {report['band']['rule']}."
        )
        lines += ["", "## Difficulty", "", how, "", "| dropped | prompts |", "|---|---|"]
        lines += [f"| {reason} | {count} |" for reason, count in report["dropped"].items()]
        lines += [
            "",
            "Pass-count histogram: "
            + ", ".join(f"{c}/{report['n']}: {k}" for c, k in report["pass_count_histogram"].items()),
        ]
    lines += ["", f"Kept rows: `{report['output']}`; dropped rows with the reason: `{report['dropped_output']}`.", ""]
    return "\n".join(lines)


def _difficulty(config, ctx, section, options, rows, candidates):
    """Sample the ``candidates`` (indices into ``rows``) and keep those in the pass-rate band.

    Returns ``(report part, {index: drop record}, {index: pass_rate and passes columns})``.
    """
    target = target_reward(ctx, "filter", section.reward)
    threshold = section.threshold
    low, high = section.min_pass_rate, section.max_pass_rate
    sampled = [rows[i] for i in candidates]
    n = options.n
    passes: list[int] = []
    solved_direct: set[int] = set()
    if sampled:
        tokenizer, model, texts, samples = sample_rows(config, ctx, sampled, options, desc="filter")
        engines = engines_for(config)
        try:
            values = score(
                ctx,
                engines,
                [t for t in texts for _ in range(n)],
                [s.text for per in samples for s in per],
                [r for r in sampled for _ in range(n)],
            )[target]
            passes = [sum(reaches(v, threshold) for v in values[j * n : (j + 1) * n]) for j in range(len(sampled))]
            banded = [j for j in range(len(sampled)) if in_band(passes[j], n, low, high)]
            if section.drop_solved_without_cot and banded:
                solved_direct = _solved_without_cot(
                    ctx,
                    engines,
                    section,
                    options,
                    config,
                    tokenizer,
                    model,
                    [sampled[j] for j in banded],
                    target,
                    threshold,
                    banded,
                )
        finally:
            engines.close()
    drops, extra = {}, {}
    for j, i in enumerate(candidates):
        columns = {"pass_rate": passes[j] / n, "passes": passes[j]}
        if not in_band(passes[j], n, low, high):
            reason = "never_solved" if passes[j] == 0 else "always_solved" if passes[j] == n else "outside_band"
            drops[i] = {"stage": "difficulty", "reason": reason, **columns}
        elif j in solved_direct:
            drops[i] = {"stage": "difficulty", "reason": "solved_without_cot", **columns}
        else:
            extra[i] = columns
    reasons = Counter(d["reason"] for d in drops.values())
    stage = {
        "model": run_config(config).model.name_or_path or "tiny",
        "reward": target,
        "threshold": threshold,
        "n": n,
        "temperature": options.temperature,
        "band": {
            "min_pass_rate": low,
            "max_pass_rate": high,
            "rule": "0 < pass rate < 1" if low is None and high is None else "inclusive bounds",
        },
        "sampled": len(sampled),
        "dropped": {
            key: reasons[key] for key in ("never_solved", "always_solved", "outside_band", "solved_without_cot")
        },
        "pass_count_histogram": {str(c): count for c, count in sorted(Counter(passes).items())},
        "mean_pass_rate": sum(passes) / (n * len(sampled)) if sampled else float("nan"),
    }
    return stage, drops, extra


def _solved_without_cot(
    ctx, engines, section, options, config, tokenizer, model, rows, target, threshold, indices
) -> set[int]:
    """Indices (into the split) whose greedy answer without chain of thought is already correct."""
    instruction = section.no_cot_instruction
    direct = [{**r, "prompt": with_suffix(r["prompt"], instruction)} for r in rows]
    texts = render_texts(direct, ctx, tokenizer, ctx.seed)
    greedy = SamplingOptions(
        n=1,
        temperature=0.0,
        max_new_tokens=section.no_cot_max_new_tokens,
        batch_size=options.batch_size,
        backend=options.backend,
        vllm_options=options.vllm_options,
    )
    answers = sample(texts, greedy, model=model, tokenizer=tokenizer, config=config, seed=ctx.seed, desc="no-CoT check")
    values = score(ctx, engines, texts, [per[0].text for per in answers], rows)[target]
    return {i for i, v in zip(indices, values, strict=True) if reaches(v, threshold)}
