"""Train and eval splits: a built-in synthetic task, a local JSONL file, or a hub dataset.

After loading, ``data.columns`` renames the source's columns to the canonical ones
(``prompt``, ``answer``, and anything a plugin reads, e.g. ``difficulty``), the enabled
template plugin renders each prompt (``rlvr_render_prompt``), and a column
``rlvr_index`` records each row's position.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from .config import resolve_path
from .errors import ConfigError, RLVRError

SYNTHETIC_TASKS = ("arithmetic",)


class DataError(RLVRError):
    """A data source that cannot be used: the message names the file, line or column."""


def read_jsonl(path: str) -> list[dict[str, Any]]:
    """Rows of a JSONL file; errors name the file and the line."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"data file {path!r} does not exist")
    rows = []
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{lineno}: malformed JSON ({exc.msg} at column {exc.colno})") from exc
            if not isinstance(row, dict):
                raise DataError(f"{path}:{lineno}: each line must be a JSON object, got {type(row).__name__}")
            rows.append(row)
    if not rows:
        raise DataError(f"data file {path!r} is empty")
    return rows


def _synthetic(split: str, spec: Mapping[str, Any], other: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    from .demo.task import split_train_eval

    task = spec["task"]
    if task not in SYNTHETIC_TASKS:
        raise ConfigError(f"data.{split}.task {task!r} is unknown; built-in synthetic tasks: {list(SYNTHETIC_TASKS)}")
    same_stream = other is not None and other.get("source") == "synthetic" and other.get("task") == task
    sizes = {split: int(spec.get("size", 1000)), "other": int(other.get("size", 0)) if same_stream else 0}
    seed = int(spec.get("seed", 0))
    options = dict(spec.get("options") or {})
    if split == "train":
        return split_train_eval(sizes["train"], sizes["other"], seed, **options)[0]
    return split_train_eval(sizes["other"], sizes["eval"], seed, **options)[1]


def _hub(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    import datasets

    ds = datasets.load_dataset(spec["name"], spec.get("config"), split=spec.get("split", "train"))
    return [dict(row) for row in ds]


def load_rows(config: Mapping[str, Any], split: str) -> list[dict[str, Any]] | None:
    """The rows of ``data.<split>`` with canonical column names, or None if the split is absent."""
    data = config["data"]
    spec = data.get(split)
    if spec is None:
        return None
    source = spec["source"]
    where = f"data.{split}"
    if source == "synthetic":
        other = data.get("eval" if split == "train" else "train")
        rows = _synthetic(split, spec, other)
    elif source == "jsonl":
        where = resolve_path(config, spec["path"])
        rows = read_jsonl(where)
    else:
        rows = _hub(spec)
        where = f"hub dataset {spec['name']}"
    if spec.get("limit") is not None:
        rows = rows[: int(spec["limit"])]
    return rename_columns(rows, data.get("columns") or {}, where)


def rename_columns(rows: list[dict[str, Any]], columns: Mapping[str, str], where: str) -> list[dict[str, Any]]:
    """Apply ``{canonical: source_column}``; every row must end up with a ``prompt``."""
    out = []
    for i, row in enumerate(rows):
        missing = [src for src in columns.values() if src not in row]
        if missing:
            raise DataError(
                f"{where}: row {i} has no column {missing[0]!r} (data.columns maps to it); "
                f"columns present: {sorted(row)}"
            )
        new = dict(row)
        for canonical, src in columns.items():
            new[canonical] = row[src]
        if "prompt" not in new:
            raise DataError(
                f"{where}: row {i} has no 'prompt' column; map one with data.columns "
                f"(e.g. columns: {{prompt: question}}); columns present: {sorted(row)}"
            )
        out.append(new)
    return out


def render(rows: list[dict[str, Any]], plugin_set, tokenizer, seed: int) -> list[dict[str, Any]]:
    """Render every prompt with the template plugin and number the rows (``rlvr_index``)."""
    out = []
    for i, row in enumerate(rows):
        prompt = plugin_set.one("rlvr_render_prompt", example=row, index=i, seed=seed, tokenizer=tokenizer)
        out.append({**row, "raw_prompt": row["prompt"], "prompt": prompt, "rlvr_index": i})
    return out
