"""``rlvr distill CONFIG``: rejection sampling of a teacher's traces into an SFT set (DeepSeek-R1 §2.3.3).

The config's ``model`` is the teacher. Each prompt of ``data.<distill.split>`` (default
``train``) is sampled ``distill.n`` times; a trace is accepted when every reward named in
``distill.thresholds`` reaches its threshold (default: every enabled reward at 1.0, e.g.
``r1-accuracy`` correct and ``r1-format`` well formed); no score never passes. Up to
``distill.max_per_prompt`` accepted traces per prompt are kept, in sampling order.

Writes ``distill.jsonl``: per kept trace the source row (prompt unrendered, answer as in
the source), ``completion`` (the trace), ``teacher_prompt`` (the prompt the teacher saw)
and each reward's value under its name; ``rlvr sft`` trains a student on it with
``sft.completion_column: completion``. ``distill_report.json`` has the counts.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ..train.sampling import require_backend
from ..train.validate import run_config
from .common import engines_for, reaches, sample_rows, score, setup, source_row, split_rows, write_json, write_jsonl

EXAMPLES = """examples:
  rlvr distill configs/r1_cold_start.yaml              # R1's cold-start traces from a teacher (GPU, vLLM)
  rlvr distill configs/cpu/r1.yaml --set distill.n=4 --set output_dir=runs/distill
"""


def accepted(values: Mapping[str, float], thresholds: Mapping[str, float]) -> bool:
    """Whether a trace's reward values reach every threshold (NaN never does).

    >>> accepted({"acc": 1.0, "fmt": 0.5}, {"acc": 1.0}), accepted({"acc": 1.0, "fmt": 0.5}, {"acc": 1, "fmt": 1})
    (True, False)
    """
    return all(reaches(values[name], float(minimum)) for name, minimum in thresholds.items())


def run_distill(config: dict[str, Any]) -> dict[str, Any]:
    """Sample, filter and write the SFT set; return the report (also ``distill_report.json``)."""

    section = run_config(config).distill
    options = section.sampling()
    require_backend(options.backend, "distill", config)
    started = time.perf_counter()
    ctx = setup(config, "distill")
    thresholds = dict(section.thresholds or {name: 1.0 for name in ctx.reward_names})
    unknown = [name for name in thresholds if name not in ctx.reward_names]
    if unknown:
        raise ConfigError(
            f"distill.thresholds names reward(s) {unknown} that no enabled plugin registers; "
            f"registered: {ctx.reward_names}",
            source="distill",
        )
    max_per_prompt = section.max_per_prompt
    split, rows = split_rows(config, "distill", section.split, "train", ctx.plugin_set)
    tokenizer, model, texts, samples = sample_rows(config, ctx, rows, options, desc="distill")
    n = options.n
    flat = [s for per in samples for s in per]
    engines = engines_for(config)
    try:
        values = score(
            ctx,
            engines,
            [t for t in texts for _ in range(n)],
            [s.text for s in flat],
            [r for r in rows for _ in range(n)],
        )
    finally:
        engines.close()
    out_rows, accepted_count = [], 0
    passed = {name: 0 for name in thresholds}
    prompts_with_trace = 0
    for i, row in enumerate(rows):
        kept_here = 0
        for j in range(i * n, (i + 1) * n):
            trace_values = {name: values[name][j] for name in ctx.reward_names}
            for name, minimum in thresholds.items():
                passed[name] += reaches(trace_values[name], float(minimum))
            if not accepted(trace_values, thresholds):
                continue
            accepted_count += 1
            if kept_here < max_per_prompt:
                kept_here += 1
                out_rows.append(
                    {
                        **source_row(row),
                        "completion": flat[j].text,
                        "teacher_prompt": texts[i],
                        "completion_length": flat[j].length,
                        **trace_values,
                    }
                )
        prompts_with_trace += kept_here > 0
    output = ctx.out / section.output
    write_jsonl(output, out_rows)
    report = {
        "split": split,
        "teacher": run_config(config).model.name_or_path or "tiny",
        "n": n,
        "temperature": options.temperature,
        "thresholds": thresholds,
        "prompts": len(rows),
        "samples": len(flat),
        "accepted_samples": accepted_count,
        "acceptance_rate": accepted_count / len(flat) if flat else 0.0,
        "passed_per_reward": passed,
        "prompts_with_a_trace": prompts_with_trace,
        "rows_written": len(out_rows),
        "output": str(output),
        "seconds": round(time.perf_counter() - started, 1),
    }
    write_json(ctx.out / "distill_report.json", report)
    print(
        f"accepted {accepted_count} of {len(flat)} traces ({len(rows)} prompts x {n}); wrote {len(out_rows)} rows "
        f"to {output}",
        flush=True,
    )
    return report
