"""Held-out evaluation: greedy completions scored by the same reward plugins as training."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from ..rewards import Engines, score_all
from .sampling import sample
from .sections import EvalSection, SamplingOptions


def prompt_texts(rows: Sequence[Mapping[str, Any]], tokenizer) -> list[str]:
    """Rendered prompts as text: chat messages go through the tokenizer's chat template."""
    out = []
    for row in rows:
        prompt = row["prompt"]
        if isinstance(prompt, list):
            prompt = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        out.append(prompt)
    return out


def evaluate(
    model, tokenizer, rows: list[dict[str, Any]], rewards, engines: Engines, section: EvalSection
) -> dict[str, Any]:
    """Greedy-decode ``rows`` and score them with every reward; ``accuracy`` uses ``eval.reward``.

    :param rewards: ``[(plugin, RewardFunction)]`` from the plugin set.
    :param section: the ``eval`` section with ``rlvr train``'s values (:meth:`EvalSection.in_train`).
    :returns: ``{"accuracy", "n", "rewards": {name: mean}, "no_score": count, "samples": [...]}``.
    """
    names = [r.name for _, r in rewards]
    target = section.reward or (names[0] if names else None)
    if target not in names:
        raise ConfigError(f"eval.reward {target!r} is not a registered reward; registered: {names}")
    threshold = section.threshold
    greedy = SamplingOptions(temperature=0.0, max_new_tokens=section.max_new_tokens, batch_size=section.batch_size)
    completions = [
        s[0].text for s in sample(prompt_texts(rows, tokenizer), greedy, model=model, tokenizer=tokenizer, desc=None)
    ]
    table = score_all(rewards, engines, [r["prompt"] for r in rows], completions, rows)
    means, values = {}, {}
    for name in names:
        values[name] = table.column(name)
        scored = [v for v in values[name] if not math.isnan(v)]
        means[name] = sum(scored) / len(scored) if scored else float("nan")
    correct = [v >= threshold for v in values[target]]
    samples = [
        {
            "prompt": rows[i]["prompt"],
            "completion": completions[i],
            "answer": rows[i].get("answer"),
            **{n: values[n][i] for n in names},
        }
        for i in range(min(5, len(rows)))
    ]
    return {
        "accuracy": sum(correct) / len(correct) if correct else 0.0,
        "n": len(rows),
        "reward": target,
        "rewards": means,
        "no_score": sum(math.isnan(v) for v in values[target]),
        "samples": samples,
    }


def metric_row(result: Mapping[str, Any]) -> dict[str, float]:
    """An evaluation as ``metrics.jsonl`` values: ``eval/accuracy``, ``eval/rewards/<name>``, ``eval/no_score``."""
    return {
        "eval/accuracy": result["accuracy"],
        **{f"eval/rewards/{k}": v for k, v in result["rewards"].items()},
        "eval/no_score": result["no_score"],
    }
