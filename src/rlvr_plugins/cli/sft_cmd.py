"""``rlvr sft CONFIG``: the SFT cold start alone (TRL's ``SFTTrainer``), the model saved to the run folder.

Rows: ``data.train`` (the first ``sft.examples`` rows when set), prompts rendered by the
template plugin, targets from ``sft.completion_column`` (default ``solution``). With the
``qwen-thinking`` plugin enabled and ``no_think_share > 0``, the rows are first mixed
into thinking and non-thinking examples by ``rlvr_qwen_thinking.sft.build_fusion_sft``
(Qwen3 §4.3, thinking-mode fusion); when that function is not installed, the rows are used
as they are and the command says so.

Writes ``model/`` (model and tokenizer, loadable with ``model.name_or_path``),
``sft/`` (TRL's output) and ``sft_summary.json``.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import ConfigError
from .common import Context, load_policy, setup, write_json
from ..train.validate import run_config

EXAMPLES = """examples:
  rlvr sft configs/homework/sft.yaml                   # the shared SFT start of the homework configs
  rlvr sft configs/cpu/r1.yaml --set output_dir=runs/sft-only --set sft.examples=16
"""

FUSION_PLUGIN = "qwen-thinking"


def fusion_builder():
    """``rlvr_qwen_thinking.sft.build_fusion_sft``, or None when that plugin is not installed."""
    try:
        from rlvr_qwen_thinking.sft import build_fusion_sft
    except ImportError:
        return None
    return build_fusion_sft


def sft_rows(ctx: Context, rows: list[dict[str, Any]], column: str, tokenizer) -> tuple[list[dict], dict[str, Any]]:
    """``([{prompt (rendered), completion_column: target}], info)``, fused when qwen-thinking asks for it."""
    from ..train.data import render

    info: dict[str, Any] = {"fusion": False}
    if FUSION_PLUGIN in ctx.plugin_set.names:
        share = float(getattr(ctx.plugin_set.get(FUSION_PLUGIN).options, "no_think_share", 0.0))
        build = fusion_builder()
        if share > 0 and build is None:
            info["fusion_note"] = ("qwen-thinking is enabled but rlvr_qwen_thinking.sft.build_fusion_sft is not "
                                   "installed: SFT on the rows as they are")
            print(f"note: {info['fusion_note']}", flush=True)
        elif share > 0:
            try:
                fused = build(rows, no_think_share=share, seed=ctx.seed, think_column=column)
            except ValueError as exc:
                raise ConfigError(f"sft with qwen-thinking fusion: {exc}", source="sft") from exc
            rows = [{**r, column: r.pop("completion")} for r in fused]
            info = {"fusion": True, "no_think_share": share,
                    "thinking": sum(r["thinking"] for r in rows), "non_thinking": sum(not r["thinking"] for r in rows)}
    rendered = render(rows, ctx.plugin_set, tokenizer, ctx.seed)
    return [_drop_repeated_block(r, column) for r in rendered], info


def _drop_repeated_block(row: dict[str, Any], column: str) -> dict[str, Any]:
    """A non-thinking prompt rendered with Qwen3's empty think block already at its end: the
    target must not repeat the block."""
    try:
        from rlvr_qwen_thinking.modes import EMPTY_THINK_BLOCK
    except ImportError:
        return row
    prompt, target = row["prompt"], row.get(column)
    if isinstance(prompt, str) and isinstance(target, str) and prompt.endswith(EMPTY_THINK_BLOCK) \
            and target.startswith(EMPTY_THINK_BLOCK):
        return {**row, column: target[len(EMPTY_THINK_BLOCK):]}
    return row


def check_config(config: dict[str, Any]) -> None:
    """What ``rlvr sft`` needs beyond a valid config, checked before anything heavy is imported."""
    if run_config(config).sft is None:
        raise ConfigError("rlvr sft needs an sft: section (any trl.SFTConfig field, plus completion_column and "
                          "examples)", source="sft")


def run_sft_command(config: dict[str, Any]) -> dict[str, Any]:
    """Fine-tune ``model`` on ``data.train``; return the summary (also ``sft_summary.json``)."""
    from ..train.data import load_rows
    from ..train.modeling import load_tokenizer
    from ..train.sft import run_sft, save_trained

    check_config(config)
    sections = run_config(config)
    section = sections.sft
    started = time.perf_counter()
    ctx = setup(config, "sft", need_rewards=False)
    column = section.completion_column
    rows = load_rows(config, "train")
    if section.examples is not None:
        rows = rows[: section.examples]
    missing = [i for i, r in enumerate(rows) if column not in r]
    if missing:
        raise ConfigError(f"sft.completion_column {column!r}: train row {missing[0]} has no such column; "
                          f"columns present: {sorted(rows[missing[0]])}", source="sft")
    tokenizer = load_tokenizer(config)
    rows, info = sft_rows(ctx, rows, column, tokenizer)
    max_completion = sections.max_completion_length
    if max_completion is None:
        max_completion = max(len(tokenizer(str(r[column]), add_special_tokens=False)["input_ids"]) for r in rows) + 1
    model = load_policy(config, tokenizer, ctx.seed)
    trainer = run_sft(model, tokenizer, rows, section, ctx.out / "sft", ctx.seed,
                      int(max_completion))
    folder = ctx.out / "model"
    save_trained(trainer, folder)
    summary = {"examples": len(rows), "completion_column": column, "model": str(folder), **info,
               "seconds": round(time.perf_counter() - started, 1)}
    if trainer.is_world_process_zero():
        write_json(ctx.out / "sft_summary.json", summary)
        print(f"SFT on {len(rows)} examples; model saved to {folder}" +
              (f" (fusion: {info['thinking']} thinking, {info['non_thinking']} non-thinking)" if info["fusion"]
               else ""), flush=True)
    return summary
