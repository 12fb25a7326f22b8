"""The SFT cold start (DeepSeek-R1's recipe): TRL's SFTTrainer on prompt → worked-solution pairs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .validate import SFTSection

SFT_DEFAULTS = {
    "report_to": "none",
    "save_strategy": "no",
    "logging_steps": 25,
    "completion_only_loss": True,
    "num_train_epochs": 1.0,
}


def sft_examples(
    plugin_set,
    rows: list[dict[str, Any]],
    column: str,
    seed: int,
    tokenizer,
    rendered: list[dict[str, Any]] | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """The rendered SFT rows of ``rows`` (the SFT split, before rendering) and the plugin that rewrote
    them (``rlvr_sft_examples``; ``None`` when every plugin abstains). Used by ``rlvr sft`` and ``rlvr train``.
    ``rendered``: ``rows`` already rendered, used as they are when every plugin abstains."""
    from ..errors import PluginError
    from .data import render

    missing = [i for i, r in enumerate(rows) if column not in r]
    if missing:
        raise ConfigError(
            f"sft.completion_column {column!r}: train row {missing[0]} has no such column; "
            f"columns present: {sorted(rows[missing[0]])}"
        )
    found = plugin_set.first("rlvr_sft_examples", rows=[dict(r) for r in rows], completion_column=column, seed=seed)
    if found is None:
        return (rendered if rendered is not None else render(rows, plugin_set, tokenizer, seed)), None
    plugin, examples = found
    bad = [i for i, r in enumerate(examples) if not isinstance(r, dict) or "prompt" not in r or column not in r]
    if not isinstance(examples, list) or bad:
        raise PluginError(
            f"plugin {plugin!r}: rlvr_sft_examples must return a list of rows with 'prompt' and "
            f"{column!r}; row {bad[0] if bad else '?'} is {examples[bad[0]] if bad else examples!r}"
        )
    return render(examples, plugin_set, tokenizer, seed), plugin


def run_sft(
    model,
    tokenizer,
    rows: list[dict[str, Any]],
    section: SFTSection,
    output_dir: Path,
    seed: int,
    max_completion_length: int,
):
    """Fine-tune ``model`` on ``{"prompt", "completion": row[completion_column]}``; return the ``SFTTrainer``.

    Its ``model`` is the trained policy (under ZeRO-3 still partitioned: save it with
    :func:`save_trained`, generate with it inside :func:`rlvr_plugins.train.modeling.full_weights`).
    """
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    column = section.completion_column
    missing = [i for i, r in enumerate(rows) if column not in r]
    if missing:
        raise ConfigError(
            f"sft.completion_column {column!r}: train row {missing[0]} has no such column; "
            f"columns present: {sorted(rows[missing[0]])}"
        )
    options = section.trl
    from .modeling import cpu_defaults

    kwargs = cpu_defaults({**SFT_DEFAULTS, "seed": seed, "data_seed": seed, **options, "output_dir": str(output_dir)})
    if "max_length" not in kwargs:
        kwargs["max_length"] = longest_prompt(rows, tokenizer) + max_completion_length
    try:
        args = SFTConfig(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"sft: {exc}") from exc
    dataset = Dataset.from_list([{"prompt": r["prompt"], "completion": r[column]} for r in rows])
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    from .runlog import compact_console, interrupted_by_signal

    compact_console(trainer, show_bar=not args.disable_tqdm, label="sft")
    with interrupted_by_signal(
        "the SFT cold start",
        lambda: f"step {trainer.state.global_step} of {trainer.state.max_steps}",
        "SFT keeps no checkpoint, so nothing of it was saved: run the command again (rlvr train: with --overwrite)",
    ):
        trainer.train()
    return trainer


def longest_prompt(rows: Sequence[Mapping[str, Any]], tokenizer) -> int:
    """The most tokens any row's prompt takes (0 for no rows): a chat prompt counted after the
    tokenizer's chat template (:func:`rlvr_plugins.train.evaluation.prompt_texts`), as SFT sees it."""
    from .evaluation import prompt_texts

    return max((len(tokenizer(text)["input_ids"]) for text in prompt_texts(rows, tokenizer)), default=0)


def last_logged_loss(log_history: list[dict[str, Any]]) -> float | None:
    """The training loss of the last logging window (the mean over its ``logging_steps``), or None."""
    losses = [row["loss"] for row in log_history if isinstance(row.get("loss"), (int, float))]
    return round(float(losses[-1]), 4) if losses else None


def save_trained(trainer, folder: Path) -> None:
    """Write ``trainer``'s model and tokenizer to ``folder`` as ``from_pretrained`` loads them.

    Collective (every rank calls it): under ZeRO-3 the weights are gathered from every rank's
    partition, and only the main process writes.
    """
    trainer.save_model(str(folder))
    trainer.accelerator.wait_for_everyone()


def end_stage(trainer, next_args) -> None:
    """Release ``trainer``'s DeepSpeed engine and accelerate state so the next stage builds its own.

    accelerate keeps one process-wide DeepSpeed state and refuses a second ``Accelerator`` with a
    ``deepspeed_plugin``; the process group (``PartialState``) is kept. ``next_args`` (the next
    stage's ``TrainingArguments``) becomes the DeepSpeed config that ``from_pretrained`` reads.
    """
    import gc

    from accelerate.state import AcceleratorState, GradientState

    trainer.accelerator.free_memory()
    AcceleratorState._reset_state()
    GradientState._reset_state()
    ds_config = getattr(next_args, "hf_deepspeed_config", None)
    if ds_config is not None:
        from transformers.integrations.deepspeed import set_hf_deepspeed_config

        set_hf_deepspeed_config(ds_config)
    gc.collect()
