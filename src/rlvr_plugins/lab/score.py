"""``rlvr score``: score saved rollouts with the enabled plugins, without training.

Input rows: ``prompt``, ``completion``, ``answer`` (or whatever the reward plugins read),
optional ``group`` (rows with the same group are one prompt's completions). Output: one
row per input row with each reward and each length penalty under its name, the weighted
total ``reward``, and the ``advantage`` the enabled estimator gives within the group.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from ..errors import columns_text
from ..train.data import DataError, read_jsonl_numbered

if TYPE_CHECKING:
    from ..manager import PluginSet
    from ..rewards import Engines

LATE_STEP = 10**9


def group_rows(rows: list[dict[str, Any]]) -> list[list[int]]:
    """Row indices grouped by ``group`` (first-seen order); a row without a group is its own group."""
    groups: OrderedDict[Any, list[int]] = OrderedDict()
    for i, row in enumerate(rows):
        key = ("group", json.dumps(row["group"], sort_keys=True)) if "group" in row else ("row", i)
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def describe_scoring(plugin_set: PluginSet) -> str:
    """One line: the rewards with their weights, the length penalties and the estimator ``rlvr score`` uses."""
    from ..manager import implemented_hooks

    scheduled = {p.name for p in plugin_set.enabled if p.weight_schedule is not None}
    rewards = (
        ", ".join(
            f"{r.name} x{r.weight:g}{' (times its weight schedule)' if p in scheduled else ''}"
            for p, r in plugin_set.reward_functions()
        )
        or "none"
    )
    penalties = [p.name for p in plugin_set.enabled if "rlvr_length_penalty" in implemented_hooks(type(p.instance))]
    return (
        f"scoring with rewards {rewards}; length penalties {', '.join(penalties) or 'none'}; "
        f"advantages by the estimator {plugin_set.winner('rlvr_compute_advantages')!r}, within each group"
    )


def group_warning(rows: list[dict[str, Any]]) -> str | None:
    """A loud warning when rows have no ``group``: each such row is its own group, whose advantage is 0."""
    lone = sum("group" not in row for row in rows)
    if lone == 0 or len(rows) < 2:
        return None
    which = "no row has a" if lone == len(rows) else f"{lone} of {len(rows)} rows have no"
    return (
        f"WARNING: {which} 'group' column, so each such row is its own group of one and its advantage is "
        "0 (there is nothing to compare it with); give the completions of one prompt the same 'group' value"
    )


def load_completions(path: str) -> tuple[list[dict[str, Any]], list[int]]:
    """The rows of a completions file, each with a ``prompt`` and a text ``completion``, and the
    file line of each; errors name ``file:line``. Light: ``rlvr score`` calls it before importing torch."""
    rows, lines = [], []
    for lineno, row in read_jsonl_numbered(path):
        for column in ("prompt", "completion"):
            if column not in row:
                raise DataError(f"{path}:{lineno}: no {column!r} column; columns present: {columns_text(row)}")
        if not isinstance(row["completion"], (str, list)):
            raise DataError(f"{path}:{lineno}: 'completion' must be text, got {type(row['completion']).__name__}")
        rows.append(row)
        lines.append(lineno)
    return rows, lines


def too_large_rows(rows: list[dict[str, Any]], max_completion_mb: float | None) -> dict[int, str]:
    """``{row index: why}`` for the rows whose completion is over ``max_completion_mb`` (the engine's
    ``completion_too_large``): they are not tokenized, not scored, and not part of their group."""
    from ..engine.options import completion_too_large

    found = {i: completion_too_large(row["completion"], max_completion_mb) for i, row in enumerate(rows)}
    return {i: problem for i, problem in found.items() if problem is not None}


def score_rows(
    rows: list[dict[str, Any]], plugin_set: PluginSet, engines: Engines, tokenizer, step: int = LATE_STEP
) -> list[dict[str, Any]]:
    """Every reward, penalty, total and advantage for ``rows``, exactly as training would compute them.

    A row whose completion is over the engine's ``max_completion_mb`` (:func:`too_large_rows`) is left out
    before anything is computed: its rewards and total are ``None``, its advantage 0, ``scored`` is false
    and ``not_scored`` says why; its group is scored without it."""
    refused = too_large_rows(rows, engines.settings().max_completion_mb)
    kept = [i for i in range(len(rows)) if i not in refused]
    names = [r.name for _, r in plugin_set.reward_functions()]
    out: list[dict[str, Any]] = [
        {
            "row": i,
            **({"group": rows[i]["group"]} if "group" in rows[i] else {}),
            **dict.fromkeys(names),
            "reward": None,
            "advantage": 0.0,
            "scored": False,
            "not_scored": problem,
        }
        for i, problem in refused.items()
    ]
    if kept:
        out += _score_kept(rows, kept, plugin_set, engines, tokenizer, step)
    return sorted(out, key=lambda row: row["row"])


def _score_kept(rows, kept, plugin_set, engines, tokenizer, step) -> list[dict[str, Any]]:
    import torch

    from ..rewards import score_all
    from ..text import message_text

    rows = [rows[i] for i in kept]
    rewards = plugin_set.reward_functions()
    names = [r.name for _, r in rewards]
    weights = torch.tensor([float(r.weight) for _, r in rewards])
    completions = [r["completion"] for r in rows]
    lengths = torch.tensor(
        [len(tokenizer(message_text(c, sep=""), add_special_tokens=False)["input_ids"]) for c in completions]
    )
    table = score_all(rewards, engines, [r["prompt"] for r in rows], completions, rows)
    values, failed = table.values.to(torch.float32), table.failed
    out: list[dict[str, Any]] = []
    for i, row in enumerate(rows):
        out.append(
            {
                "row": kept[i],
                **({"group": row["group"]} if "group" in row else {}),
                **{name: _num(values[i, k].item()) for k, name in enumerate(names)},
            }
        )
    for members in group_rows(rows):
        idx = torch.tensor(members)
        _score_group(out, idx, values[idx], failed[idx], lengths[idx], names, weights, plugin_set, step)
    return out


def _score_group(out, idx, values, failed, lengths, names, weights, plugin_set, step) -> None:
    from ..advantages import batch_advantages

    result = batch_advantages(plugin_set, values, weights, failed, lengths, len(idx), step, names)
    for plugin, penalty in result.penalties:
        for j, i in enumerate(idx.tolist()):
            out[i][plugin] = _num(penalty[j].item())
    for j, i in enumerate(idx.tolist()):
        out[i]["reward"] = _num(result.total[j].item())
        out[i]["advantage"] = _num(result.advantages[j].item())
        out[i]["scored"] = bool(result.valid[j])


def _num(x: float) -> float | None:
    return None if math.isnan(x) else round(x, 6)


def format_table(rows: list[dict[str, Any]], limit: int = 30) -> str:
    first = next((row for row in rows if "not_scored" not in row), rows[0] if rows else {})
    columns = [c for c in first if c not in ("scored", "not_scored")]
    lines = ["  ".join(f"{c[:14]:>14}" for c in columns)]
    for row in rows[:limit]:
        lines.append("  ".join(f"{_cell(row.get(c)):>14}" for c in columns))
    if len(rows) > limit:
        lines.append(f"... {len(rows) - limit} more rows")
    means = {
        c: [row[c] for row in rows if isinstance(row.get(c), (int, float)) and not isinstance(row.get(c), bool)]
        for c in columns
        if c not in ("row", "group")
    }
    lines.append("mean: " + ", ".join(f"{c} {sum(v) / len(v):.4f}" for c, v in means.items() if v))
    unscored = sum(not row["scored"] for row in rows)
    if unscored:
        lines.append(f"{unscored} row(s) could not be scored (advantage 0)")
    refused = [row for row in rows if "not_scored" in row]
    lines += [f"row {row['row']}: {row['not_scored']}" for row in refused[:5]]
    if len(refused) > 5:
        lines.append(f"... and {len(refused) - 5} more rows too large to score")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)[:14]
