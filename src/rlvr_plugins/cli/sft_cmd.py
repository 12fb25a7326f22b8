"""``rlvr sft CONFIG``: the SFT cold start alone (TRL's ``SFTTrainer``), the model saved to the run folder.

Rows: ``data.train`` (the first ``sft.examples`` rows when set), prompts rendered by the
template plugin, targets from ``sft.completion_column`` (default ``solution``). A plugin
may rewrite the rows first (``rlvr_sft_examples``, e.g. qwen-thinking's thinking-mode
fusion), exactly as in ``rlvr train``'s SFT stage.

Writes ``model/`` (model and tokenizer, loadable with ``model.name_or_path``),
``sft/`` (TRL's output) and ``sft_summary.json``.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import ConfigError
from ..train.validate import run_config
from .common import Context, load_policy, setup, write_json

EXAMPLES = """examples:
  rlvr sft configs/homework/sft.yaml                   # the shared SFT start of the homework configs
  rlvr sft configs/cpu/r1.yaml --set output_dir=runs/sft-only --set sft.examples=16
"""


def sft_rows(ctx: Context, rows: list[dict[str, Any]], column: str, tokenizer) -> tuple[list[dict], dict[str, Any]]:
    """``([{prompt (rendered), completion_column: target}], info)``: the rows as a plugin's
    ``rlvr_sft_examples`` rewrites them (the same rows as ``rlvr train``'s SFT stage)."""
    from ..train.sft import sft_examples

    out, plugin = sft_examples(ctx.plugin_set, rows, column, ctx.seed, tokenizer)
    return out, {"examples_from": plugin}


def check_config(config: dict[str, Any]) -> None:
    """What ``rlvr sft`` needs beyond a valid config, checked before anything heavy is imported."""
    if run_config(config).sft is None:
        raise ConfigError(
            "rlvr sft needs an sft: section (any trl.SFTConfig field, plus completion_column and examples)",
            source="sft",
        )


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
        raise ConfigError(
            f"sft.completion_column {column!r}: train row {missing[0]} has no such column; "
            f"columns present: {sorted(rows[missing[0]])}",
            source="sft",
        )
    tokenizer = load_tokenizer(config)
    rows, info = sft_rows(ctx, rows, column, tokenizer)
    max_completion = sections.max_completion_length
    if max_completion is None:
        max_completion = max(len(tokenizer(str(r[column]), add_special_tokens=False)["input_ids"]) for r in rows) + 1
    model = load_policy(config, tokenizer, ctx.seed)
    trainer = run_sft(model, tokenizer, rows, section, ctx.out / "sft", ctx.seed, int(max_completion))
    folder = ctx.out / "model"
    save_trained(trainer, folder)
    summary = {
        "examples": len(rows),
        "completion_column": column,
        "model": str(folder),
        **info,
        "seconds": round(time.perf_counter() - started, 1),
    }
    if trainer.is_world_process_zero():
        write_json(ctx.out / "sft_summary.json", summary)
        print(
            f"SFT on {len(rows)} examples; model saved to {folder}"
            + (f" (examples from plugin {info['examples_from']!r})" if info["examples_from"] else ""),
            flush=True,
        )
    return summary
