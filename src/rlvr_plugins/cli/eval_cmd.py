"""``rlvr eval CONFIG``: prompting baselines and sampled metrics for a model, scored by the reward plugins.

Prompting (``eval.mode``):

* ``zero-shot``: the problem as written, through the template plugin;
* ``few-shot``: ``eval.shots`` worked examples from the train split, ``Question: … / Answer: …``,
  before the problem;
* ``cot``: the problem followed by ``eval.cot_instruction`` (default: Qwen2.5-Math's
  "Please reason step by step, and put your final answer within \\boxed{}.").

Each problem is sampled ``eval.n`` times at ``eval.temperature`` (0 = greedy), scored by
every enabled reward through the reward engine, and summarised by
:func:`rlvr_plugins.lab.metrics.summarise`. The run folder receives ``eval.json``, ``eval.md``
and ``eval_samples.jsonl`` (every completion with its rewards).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ..lab import metrics
from ..manager import PluginSet
from ..text import message_text
from ..train.sampling import require_backend
from ..train.sections import EvalSection
from ..train.validate import run_config
from .common import (
    engines_for,
    reaches,
    reward_fields,
    sample_rows,
    score_with_failures,
    setup,
    split_rows,
    target_reward,
    with_suffix,
    write_json,
    write_jsonl,
    write_text,
)

EXAMPLES = """examples:
  rlvr eval runs/demo                                  # the demo run's final/ model, with its own config
  rlvr eval configs/cpu/r1.yaml --set eval.n=4 --set eval.mode=few-shot
"""

SHOT_TEMPLATE = "Question: {question}\nAnswer: {solution}\n\n"
QUESTION_TEMPLATE = "Question: {question}\nAnswer:"


def eval_section(config: Mapping[str, Any]) -> EvalSection:
    """The ``eval`` section with ``rlvr eval``'s defaults (see :class:`~rlvr_plugins.train.sections.EvalSection`)."""
    sections = run_config(config)
    return sections.eval.in_command(sections.max_completion_length)


def default_ks(n: int) -> list[int]:
    """1, then powers of two up to ``n``, and ``n``."""
    ks, k = [1], 2
    while k < n:
        ks.append(k)
        k *= 2
    return ks + ([n] if n > 1 else [])


def few_shot_prompt(question: str, shots: list[tuple[str, str]]) -> str:
    """``shots`` (question, worked solution) pairs, then the question, in ``Question:/Answer:`` form."""
    head = "".join(SHOT_TEMPLATE.format(question=q, solution=s) for q, s in shots)
    return head + QUESTION_TEMPLATE.format(question=question)


def build_prompts(
    rows: list[dict[str, Any]], section: EvalSection, config: Mapping[str, Any], split: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(rows to evaluate, the same rows with the prompt of eval.mode)`` before the template plugin."""
    mode = section.mode
    if mode == "zero-shot":
        return rows, [dict(r) for r in rows]
    if mode == "cot":
        return rows, [{**r, "prompt": with_suffix(r["prompt"], section.cot_instruction)} for r in rows]
    k = section.shots
    column = section.shot_column
    _, train = split_rows(config, "eval", "train", "train")
    if split == "train":
        rows = rows[k:]
    shots = []
    for i, r in enumerate(train[:k]):
        solution = r.get(column, r.get("raw_answer") if column == "solution" else None)
        if solution is None:
            raise ConfigError(
                f"eval.shot_column {column!r}: train row {i} has no such column (nor 'raw_answer'); "
                f"columns present: {sorted(r)}",
                source="eval",
            )
        shots.append((message_text(r["prompt"], roles=("user",)), str(solution).strip()))
    if len(shots) < k:
        raise ConfigError(f"eval.shots={k} but the train split has {len(train)} rows", source="eval")
    return rows, [{**r, "prompt": few_shot_prompt(message_text(r["prompt"], roles=("user",)), shots)} for r in rows]


def refuse_environments(plugin_set: PluginSet) -> None:
    """Refuse a plugin set with an environment: ``rlvr eval`` decodes single-turn, without the tool loop, so its
    numbers would not be the run's (held-out episodes with tools run inside ``rlvr train``)."""
    environments = plugin_set.environments()
    if environments:
        named = ", ".join(f"{environment.name!r} (plugin {owner})" for owner, environment in environments)
        raise ConfigError(
            f"rlvr eval decodes single-turn without tools, but the config enables the environment {named}; its "
            "numbers would leave the tool out. Episodes with the tool are evaluated inside rlvr train "
            "(eval.every_steps: eval/accuracy and eval/tools/call_frequency in metrics.jsonl)"
        )


def run_eval(config: dict[str, Any]) -> dict[str, Any]:
    """Evaluate ``model`` on ``data.<eval.split>``; return the report (also written to ``eval.json``)."""

    section = eval_section(config)
    options = section.sampling()
    require_backend(options.backend, "eval", config)
    ks = list(section.k or default_ks(options.n))
    if any(k > options.n for k in ks):
        raise ConfigError(f"eval.k={ks} asks for more samples than eval.n={options.n}", source="eval")
    started = time.perf_counter()
    ctx = setup(config, "eval", check=refuse_environments)
    target = target_reward(ctx, "eval", section.reward)
    threshold = section.threshold
    format_reward = section.format_reward  # explicit: the core does not guess a reward from its name
    if format_reward is not None and format_reward not in ctx.reward_names:
        raise ConfigError(
            f"eval.format_reward {format_reward!r} is not a registered reward; registered: {ctx.reward_names}",
            source="eval",
        )
    split, rows = split_rows(config, "eval", section.split, "eval", ctx.plugin_set)
    try:
        columns = metrics.breakdown_columns(rows, section.breakdown)
    except KeyError as exc:
        raise ConfigError(f"eval.breakdown: {exc.args[0]}", source="eval") from exc
    rows, prompted = build_prompts(rows, section, config, split)
    tokenizer, model, texts, samples = sample_rows(config, ctx, prompted, options, desc=f"eval {section.mode}")
    flat_rows = [row for row in rows for _ in range(options.n)]
    flat_prompts = [t for t in texts for _ in range(options.n)]
    flat = [s for per in samples for s in per]
    engines = engines_for(config)
    try:
        values, failed = score_with_failures(ctx, engines, flat_prompts, [s.text for s in flat], flat_rows)
    finally:
        engines.close()
    problems, sample_records = [], []
    for i, row in enumerate(rows):
        idx = range(i * options.n, (i + 1) * options.n)
        answers = [metrics.extract_final_answer(flat[j].text) for j in idx]
        correct = [reaches(values[target][j], threshold) for j in idx]
        formatted = (
            [reaches(values[format_reward][j], 1.0) for j in idx] if format_reward else [a is not None for a in answers]
        )
        problems.append(
            metrics.ProblemSamples(
                correct,
                formatted,
                [metrics.answer_key(a) for a in answers],
                [flat[j].length for j in idx],
                {c: row.get(c) for c in columns},
            )
        )
        for s, j in enumerate(idx):
            sample_records.append(
                {
                    "problem": i,
                    "sample": s,
                    "prompt": texts[i],
                    "completion": flat[j].text,
                    "length": flat[j].length,
                    "answer": row.get("answer"),
                    "extracted": answers[s],
                    "correct": correct[s],
                    **reward_fields({n: values[n][j] for n in ctx.reward_names}, {n: failed[n][j] for n in failed}),
                }
            )
    report = {
        "model": run_config(config).model.name_or_path or "tiny",
        "split": split,
        "mode": section.mode,
        "backend": options.backend,
        "n": options.n,
        "temperature": options.temperature,
        "top_p": options.top_p,
        "max_new_tokens": options.max_new_tokens,
        "reward": target,
        "threshold": threshold,
        "format": format_reward or "extractable final answer",
        "metrics": metrics.summarise(problems, ks),
        "rewards": {n: metrics.mean(v for v in values[n] if v == v) for n in ctx.reward_names},
        "breakdown": {c: metrics.breakdown(problems, c, ks) for c in columns},
        "seconds": round(time.perf_counter() - started, 1),
    }
    write_json(ctx.out / "eval.json", report)
    write_jsonl(ctx.out / "eval_samples.jsonl", sample_records)
    write_text(ctx.out / "eval.md", markdown_report(report, ks))
    print(markdown_report(report, ks), flush=True)
    print(f"wrote {ctx.out / 'eval.json'}, eval.md and eval_samples.jsonl", flush=True)
    return report


def markdown_report(report: Mapping[str, Any], ks: list[int]) -> str:
    m = report["metrics"]
    head = (
        f"# Evaluation: {report['model']} on {report['split']} ({m['problems']} problems)\n\n"
        f"mode {report['mode']}, n={report['n']}, temperature {report['temperature']}, top_p {report['top_p']}, "
        f"backend {report['backend']}; correct = {report['reward']} >= {report['threshold']}; "
        f"format = {report['format']}\n\n"
    )
    metric_names = ["accuracy", *[f"pass@{k}" for k in ks], *[f"maj@{k}" for k in ks], "format_rate", "answer_rate"]
    table = metrics.markdown_table(
        [*metric_names, "length (correct)", "length (wrong)"],
        [[*(m[name] for name in metric_names), m["mean_length"]["correct"], m["mean_length"]["wrong"]]],
    )
    parts = [head, table, "\n"]
    for column, groups in report["breakdown"].items():
        parts.append(f"\n## By {column}\n\n")
        parts.append(
            metrics.markdown_table(
                [column, "problems", "accuracy", *[f"pass@{k}" for k in ks]],
                [[value, g["problems"], g["accuracy"], *(g[f"pass@{k}"] for k in ks)] for value, g in groups.items()],
            )
        )
        parts.append("\n")
    return "".join(parts)
