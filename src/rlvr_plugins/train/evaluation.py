"""Held-out evaluation: greedy completions scored by the same reward plugins as training.

Single-turn runs decode with :func:`evaluate`; runs with an environment (a tool) play greedy episodes
through the trainer's own generation path and TRL's tool loop (:func:`evaluate_episodes`)."""

from __future__ import annotations

import contextlib
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


@contextlib.contextmanager
def greedy(trainer):
    """TRL's generation config switched to greedy decoding for the block, then put back with the model's
    train/eval mode (``evaluate()`` leaves the model in eval mode, and TRL files logged metrics by that mode) and
    the step's ``should_log`` (``evaluate()`` logs, which clears it: a mid-run evaluation would drop the step's
    train metrics)."""
    config, training, should_log = trainer.generation_config, trainer.model.training, trainer.control.should_log
    before = config.do_sample
    config.do_sample = False
    try:
        yield
    finally:
        config.do_sample = before
        trainer.model.train(training)
        trainer.control.should_log = should_log


TOOL_CALLS = "tools/call_frequency"
"""TRL's tool-loop metric: tool calls per episode."""


def evaluate_episodes(trainer, reward: str | None) -> dict[str, Any]:
    """Greedy held-out episodes through ``trainer.evaluate()`` (its ``eval_dataset``; TRL's generation path
    and tool loop, as in training), in :func:`evaluate`'s shape plus ``tool_calls`` (calls per episode).
    ``accuracy``: the share of episodes whose ``reward`` (default: the trainer's correctness reward) reaches
    the trainer's threshold (``rlvr/correct_rate``)."""
    with greedy(trainer):
        metrics = trainer.evaluate()
    target = reward or trainer.correctness_reward
    prefix = "eval_rewards/"
    means = {
        k[len(prefix) : -len("/mean")]: v for k, v in metrics.items() if k.startswith(prefix) and k.endswith("/mean")
    }
    n = len(trainer.eval_dataset)
    return {
        "accuracy": metrics.get("eval_rlvr/correct_rate", means.get(target, 0.0)),
        "n": n,
        "reward": target,
        "rewards": means,
        "no_score": round(metrics.get("eval_rlvr/frac_no_score", 0.0) * n),
        "tool_calls": metrics.get(f"eval_{TOOL_CALLS}", 0.0),
    }


def metric_row(result: Mapping[str, Any]) -> dict[str, float]:
    """An evaluation as ``metrics.jsonl`` values: ``eval/accuracy``, ``eval/rewards/<name>``, ``eval/no_score``
    and, for episodes with tools, ``eval/tools/call_frequency``."""
    return {
        "eval/accuracy": result["accuracy"],
        **{f"eval/rewards/{k}": v for k, v in result["rewards"].items()},
        "eval/no_score": result["no_score"],
        **({f"eval/{TOOL_CALLS}": result["tool_calls"]} if "tool_calls" in result else {}),
    }
