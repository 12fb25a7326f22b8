"""SFT data for the thinking-mode fusion stage: thinking and non-thinking examples, mixed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .budget import THINK_END
from .modes import EMPTY_THINK_BLOCK, explicit_flag, fused_no_think, with_no_think_flag


def build_fusion_sft(
    rows: Iterable[Mapping[str, Any]], *, no_think_share: float, seed: int, think_column: str = "solution"
) -> list[dict[str, Any]]:
    """Prompt/completion rows mixing thinking and non-thinking examples, reproducibly.

    Row ``i``'s mode: its prompt's explicit flag if it has one, else non-thinking iff
    :func:`~rlvr_qwen_thinking.modes.fused_no_think` ``(seed, i, no_think_share)`` (the same
    decision as the template's fusion).

    * Thinking: ``prompt`` as written (unflagged prompts stay unflagged: no flag means
      thinking), ``completion`` = ``row[think_column]`` (the full worked solution, think block
      included).
    * Non-thinking: ``prompt`` flagged `` /no_think`` (unless it already says so),
      ``completion`` = ``"<think>\\n\\n</think>\\n\\n"`` + the answer part of the solution
      (the text after its first ``</think>``, leading whitespace removed).

    Each output row keeps the input's other columns (not ``think_column``) and adds
    ``completion`` and ``thinking`` (bool). A solution without ``</think>`` is a ValueError
    naming the row.

    >>> build_fusion_sft([{"prompt": "2+2=", "solution": "<think>4</think><answer>4</answer>"}],
    ...                  no_think_share=1.0, seed=0)
    [{'prompt': '2+2= /no_think', 'completion': '<think>\\n\\n</think>\\n\\n<answer>4</answer>', 'thinking': False}]
    """
    if not 0.0 <= no_think_share <= 1.0:
        raise ValueError(f"no_think_share must be in [0, 1], got {no_think_share}")
    out = []
    for i, row in enumerate(rows):
        solution = row.get(think_column)
        if not isinstance(solution, str) or THINK_END not in solution:
            raise ValueError(
                f"row {i}: column {think_column!r} must hold a worked solution with a think block "
                f"(<think>...</think> then the answer), got {solution!r}"
            )
        prompt = row["prompt"]
        flag = explicit_flag(prompt)
        thinking = flag if flag is not None else not fused_no_think(seed, i, no_think_share)
        rest = {k: v for k, v in row.items() if k not in (think_column, "prompt")}
        if thinking:
            out.append({"prompt": prompt, **rest, "completion": solution, "thinking": True})
            continue
        answer = solution.split(THINK_END, 1)[1].lstrip()
        flagged = prompt if flag is False else with_no_think_flag(prompt)
        out.append({"prompt": flagged, **rest, "completion": EMPTY_THINK_BLOCK + answer, "thinking": False})
    return out


def sft_examples(
    rows: list[dict[str, Any]], *, column: str, no_think_share: float, seed: int
) -> list[dict[str, Any]] | None:
    """The SFT rows for the plugin's template (the ``rlvr_sft_examples`` hook), or ``None`` when they need no change.

    With ``no_think_share > 0`` the rows are mixed by :func:`build_fusion_sft` (target in
    ``column``). Then a row the template renders in non-thinking mode (its prompt already
    ends with Qwen3's empty think block) loses that block from the start of its target, so
    the target does not repeat it.

    >>> sft_examples([{"prompt": "2+2=", "solution": "<think>4</think><answer>4</answer>"}], column="solution",
    ...              no_think_share=1.0, seed=0)
    [{'prompt': '2+2= /no_think', 'thinking': False, 'solution': '<answer>4</answer>'}]
    >>> sft_examples([{"prompt": "2+2=", "solution": "<think>4</think>4"}], column="solution", no_think_share=0.0,
    ...              seed=0) is None
    True
    """
    changed = no_think_share > 0
    if changed:
        fused = build_fusion_sft(rows, no_think_share=no_think_share, seed=seed, think_column=column)
        rows = [{**{k: v for k, v in r.items() if k != "completion"}, column: r["completion"]} for r in fused]
    out = []
    for i, row in enumerate(rows):
        flag = explicit_flag(row["prompt"])
        non_thinking = flag is False or (flag is None and fused_no_think(seed, i, no_think_share))
        target = row.get(column)
        if non_thinking and isinstance(target, str) and target.startswith(EMPTY_THINK_BLOCK):
            row, changed = {**row, column: target[len(EMPTY_THINK_BLOCK) :]}, True
        out.append(row)
    return out if changed else None
