"""``rlvr filter CONFIG``: keep the prompts of useful difficulty for RL (Kimi k1.5 §2.2, Qwen3 §4.2).

Each prompt of ``data.<filter.split>`` (default ``train``) is sampled ``filter.n`` times
with the config's model; its pass rate is the share of samples whose ``filter.reward``
reaches ``filter.threshold``. A prompt is kept when its pass rate is in the band: by
default ``0 < pass rate < 1`` (drop the prompts the model always or never solves, which
give GRPO no signal); ``min_pass_rate`` / ``max_pass_rate`` set inclusive bounds instead.
With ``drop_solved_without_cot``, a kept prompt is also dropped when one greedy answer to
the prompt followed by ``no_cot_instruction`` (no chain of thought) is already correct
(Qwen3's filter).

Writes ``filtered.jsonl`` (the kept rows as loaded, answer as in the source, plus
``pass_rate`` and ``passes``) and ``filter_report.json`` (counts) to the run folder.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from . import (
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
)
from .sampling import SamplingOptions, require_backend, sample

NO_COT_INSTRUCTION = "\nAnswer with the final answer only, without any explanation."
DEFAULTS = {"n": 8, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 1024, "batch_size": 16,
            "backend": "transformers"}


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


def run_filter(config: dict[str, Any]) -> dict[str, Any]:
    """Filter the split; return the report (also written to ``filter_report.json``)."""

    section = dict(config.get("filter") or {})
    options = SamplingOptions.from_section(section, DEFAULTS)
    require_backend(options.backend, "filter")
    started = time.perf_counter()
    ctx = setup(config, "filter")
    target = target_reward(ctx, "filter", section.get("reward"))
    threshold = float(section.get("threshold", 1.0))
    low, high = section.get("min_pass_rate"), section.get("max_pass_rate")
    split, rows = split_rows(config, "filter", section.get("split"), "train")
    tokenizer, model, texts, samples = sample_rows(config, ctx, rows, options, desc="filter")
    n = options.n
    engines = engines_for(config)
    try:
        values = score(ctx, engines, [t for t in texts for _ in range(n)], [s.text for per in samples for s in per],
                       [r for r in rows for _ in range(n)])[target]
        passes = [sum(reaches(v, threshold) for v in values[i * n:(i + 1) * n]) for i in range(len(rows))]
        banded = [i for i in range(len(rows)) if in_band(passes[i], n, low, high)]
        solved_direct: set[int] = set()
        if section.get("drop_solved_without_cot", False) and banded:
            solved_direct = _solved_without_cot(ctx, engines, section, options, config, tokenizer, model,
                                                [rows[i] for i in banded], target, threshold, banded)
    finally:
        engines.close()
    kept = [i for i in banded if i not in solved_direct]
    out_of_band = [p for p in passes if not in_band(p, n, low, high)]
    out_rows = [{**source_row(rows[i]), "pass_rate": passes[i] / n, "passes": passes[i]} for i in kept]
    output = ctx.out / section.get("output", "filtered.jsonl")
    write_jsonl(output, out_rows)
    report = {
        "split": split,
        "model": config["model"].get("name_or_path", "tiny"),
        "reward": target,
        "threshold": threshold,
        "n": n,
        "temperature": options.temperature,
        "band": {"min_pass_rate": low, "max_pass_rate": high,
                 "rule": "0 < pass rate < 1" if low is None and high is None else "inclusive bounds"},
        "prompts": len(rows),
        "kept": len(kept),
        "dropped": {
            "never_solved": sum(p == 0 for p in out_of_band),
            "always_solved": sum(p == n for p in out_of_band),
            "outside_band": sum(0 < p < n for p in out_of_band),
            "solved_without_cot": len(solved_direct),
        },
        "pass_count_histogram": {str(c): count for c, count in sorted(Counter(passes).items())},
        "mean_pass_rate": sum(passes) / (n * len(rows)),
        "output": str(output),
        "seconds": round(time.perf_counter() - started, 1),
    }
    write_json(ctx.out / "filter_report.json", report)
    print(f"kept {len(kept)} of {len(rows)} prompts (pass rate band {report['band']['rule']}); "
          f"dropped {report['dropped']}; wrote {output}", flush=True)
    return report


def _solved_without_cot(ctx, engines, section, options, config, tokenizer, model, rows, target, threshold,
                        indices) -> set[int]:
    """Indices (into the split) whose greedy answer without chain of thought is already correct."""
    instruction = section.get("no_cot_instruction", NO_COT_INSTRUCTION)
    direct = [{**r, "prompt": with_suffix(r["prompt"], instruction)} for r in rows]
    texts = render_texts(direct, ctx, tokenizer, ctx.seed)
    greedy = SamplingOptions(n=1, temperature=0.0, max_new_tokens=int(section.get("no_cot_max_new_tokens", 32)),
                             batch_size=options.batch_size, backend=options.backend, vllm_options=options.vllm_options)
    answers = sample(texts, greedy, model=model, tokenizer=tokenizer, config=config, seed=ctx.seed, desc="no-CoT check")
    values = score(ctx, engines, texts, [per[0].text for per in answers], rows)[target]
    return {i for i, v in zip(indices, values, strict=True) if reaches(v, threshold)}
