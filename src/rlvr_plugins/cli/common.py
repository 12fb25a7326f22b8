"""The commands around training: ``rlvr eval``, ``rlvr sft``, ``rlvr filter``, ``rlvr distill``.

Each reads the same YAML config as ``rlvr train`` (``model``, ``data``, ``plugins``,
``engine``, ``output_dir``, ``seed``) plus its own section, renders prompts with the
enabled template plugin and scores completions with the enabled reward plugins through the
reward engine, exactly as training does. Shared plumbing lives here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, RLVRError
from ..manager import PluginSet, build_plugin_set
from ..plugin import RewardFunction
from ..train.validate import run_config


def quiet_libraries() -> None:
    """Keep the console for the run: no dataset-map progress bars, no deprecation chatter.

    Imports nothing heavy: the libraries read the environment when they are imported
    (``HF_DATASETS_DISABLE_PROGRESS_BARS``, ``TRANSFORMERS_VERBOSITY``, ``HF_HUB_DISABLE_PROGRESS_BARS``,
    which transformers' own ``disable_progress_bar`` sets too); one already imported is told directly.
    A value the user set in the environment wins."""
    import os
    import sys
    import warnings

    for name, value in QUIET_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="transformers")
    if "datasets" in sys.modules:
        sys.modules["datasets"].disable_progress_bars()
    if "transformers" in sys.modules:
        transformers = sys.modules["transformers"]
        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()


QUIET_ENVIRONMENT = {
    "TOKENIZERS_PARALLELISM": "false",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
}


@dataclass
class Context:
    """What every command needs before a model is loaded: plugins, rewards, run folder, seed."""

    config: dict[str, Any]
    plugin_set: PluginSet
    rewards: list[tuple[str, RewardFunction]]
    out: Path
    seed: int

    @property
    def reward_names(self) -> list[str]:
        return [r.name for _, r in self.rewards]


def setup(
    config: dict[str, Any], section: str, need_rewards: bool = True, check: Callable[[PluginSet], None] | None = None
) -> Context:
    """Resolve the plugins and the run folder; write ``<section>_config.yaml`` and
    ``<section>_plugins.json`` there (prefixed, so a command run in a training run's folder
    does not overwrite that run's ``config.yaml`` and ``plugins.json``). ``check(plugin_set)``: the
    command's own refusals, before anything is written."""
    sections = run_config(config)
    plugin_set = build_plugin_set(sections.plugins)
    if need_rewards:
        from ..train.run import validate_scoring

        try:  # the hooks in rlvr train's order: adjust the GRPOConfig, collect the rewards, validate
            validate_scoring(config, plugin_set)
        except RLVRError:
            if not plugin_set.reward_functions():
                raise ConfigError(
                    f"rlvr {section} scores completions with the reward plugins, but the config enables "
                    "none; enable one (e.g. plugins: {r1-accuracy: {}})",
                    source="plugins",
                ) from None
            raise
    if check is not None:
        check(plugin_set)
    rewards = plugin_set.reward_functions()
    out = Path(sections.output_dir or f"runs/{section}").expanduser()  # as rlvr train and transformers read it
    write_header(out, section, config, plugin_set)
    return Context(config, plugin_set, rewards, out, sections.seed)


def write_header(out: Path, section: str, config: Mapping[str, Any], plugin_set: PluginSet) -> None:
    from ..train.config import dump_public
    from ..train.runfolder import run_header

    out.mkdir(parents=True, exist_ok=True)
    (out / f"{section}_config.yaml").write_text(dump_public(config), encoding="utf-8")
    write_json(out / f"{section}_plugins.json", run_header(plugin_set))


def target_reward(ctx: Context, section: str, name: str | None) -> str:
    """The reward that defines *correct* (``<section>.reward``, default the first registered one)."""
    target = name or ctx.reward_names[0]
    if target not in ctx.reward_names:
        raise ConfigError(
            f"{section}.reward {target!r} is not a registered reward; registered: {ctx.reward_names}", source=section
        )
    return target


def load_policy(config: Mapping[str, Any], tokenizer, seed: int):
    """The model of ``model:``, on the GPU when there is one."""
    import torch

    from ..train.modeling import load_model

    model = load_model(config, tokenizer, seed)
    if torch.cuda.is_available():
        model = model.to("cuda")
    return model


def with_suffix(prompt: str | list, suffix: str) -> str | list:
    """``prompt`` with ``suffix`` appended: to the text, or to the last user message of a chat prompt."""
    if isinstance(prompt, str):
        return f"{prompt}{suffix}"
    messages = [dict(m) for m in prompt]
    for message in reversed(messages):
        if message.get("role") == "user":
            message["content"] = f"{message.get('content') or ''}{suffix}"
            return messages
    raise ConfigError(f"cannot add an instruction to a chat prompt without a user message: {prompt!r}")


def render_texts(rows: list[dict[str, Any]], ctx: Context, tokenizer, seed: int) -> list[str]:
    """Render every row's ``prompt`` with the template plugin, then chat messages with the chat template."""
    from ..train.data import render
    from ..train.evaluation import prompt_texts

    return prompt_texts(render(rows, ctx.plugin_set, tokenizer, seed), tokenizer)


def sample_rows(config: Mapping[str, Any], ctx: Context, rows: list[dict[str, Any]], options, desc: str):
    """Render ``rows`` with the template plugin and sample ``options.n`` completions per prompt.

    Returns ``(tokenizer, model, texts, samples)``; ``model`` is None with the vLLM backend.
    """
    from ..train.modeling import load_tokenizer
    from ..train.sampling import sample

    tokenizer = load_tokenizer(config)
    texts = render_texts(rows, ctx, tokenizer, ctx.seed)
    model = load_policy(config, tokenizer, ctx.seed) if options.backend == "transformers" else None
    samples = sample(texts, options, model=model, tokenizer=tokenizer, config=config, seed=ctx.seed, desc=desc)
    return tokenizer, model, texts, samples


def score(
    ctx: Context, engines, prompts: Sequence[str], completions: Sequence[str], rows: Sequence[Mapping[str, Any]]
) -> dict[str, list[float]]:
    """Every reward's raw value per completion (NaN where it did not apply or could not score)."""
    return score_with_failures(ctx, engines, prompts, completions, rows)[0]


def score_with_failures(
    ctx: Context, engines, prompts: Sequence[str], completions: Sequence[str], rows: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, list[float]], dict[str, list[bool]]]:
    """:func:`score`, and per reward and completion whether the engine could not score it (failed, timed out,
    returned no usable value) rather than the reward not applying (NaN both)."""
    from ..rewards import score_all

    table = score_all(ctx.rewards, engines, prompts, completions, rows)
    failed = {name: table.failed[:, k].tolist() for k, name in enumerate(table.names)}
    return {name: table.column(name) for name in table.names}, failed


UNSCORED_REASONS = {
    False: "did not apply (the reward returned None)",
    True: "could not score (the reward failed, timed out or returned no usable value)",
}


def reward_fields(values: Mapping[str, float], failed: Mapping[str, bool]) -> dict[str, Any]:
    """One completion's rewards as JSON fields: the value, or ``null`` with the reason under ``unscored``
    (never a bare ``NaN``, which is not JSON).

    >>> nan = float("nan")
    >>> fields = reward_fields({"acc": 1.0, "fmt": nan, "judge": nan}, {"acc": False, "fmt": False, "judge": True})
    >>> fields["acc"], fields["fmt"], fields["judge"], fields["unscored"]["fmt"]
    (1.0, None, None, 'did not apply (the reward returned None)')
    >>> fields["unscored"]["judge"]
    'could not score (the reward failed, timed out or returned no usable value)'
    """
    out: dict[str, Any] = {name: (v if math.isfinite(v) else None) for name, v in values.items()}
    unscored = {name: UNSCORED_REASONS[bool(failed.get(name))] for name, v in values.items() if not math.isfinite(v)}
    if unscored:
        out["unscored"] = unscored
    return out


def reaches(value: float, threshold: float) -> bool:
    """``value >= threshold``; no score (NaN) never does."""
    return not math.isnan(value) and value >= threshold


def source_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A loaded row as it can be written back and loaded again with the same ``data`` config:
    the answer before normalisation, no framework columns."""
    out = {k: v for k, v in row.items() if k not in ("rlvr_index", "raw_prompt", "raw_answer")}
    if "raw_answer" in row:
        out["answer"] = row["raw_answer"]
    return out


def write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """One JSON object per line, written whole or not at all (:func:`rlvr_plugins.outputs.write_atomic`);
    a non-finite float is written as ``null`` (``NaN`` is not JSON)."""
    from ..outputs import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(_finite(row), ensure_ascii=False, default=_jsonable) + "\n" for row in rows))


def write_json(path: Path, value: Any) -> None:
    write_text(path, json.dumps(_finite(value), indent=2, ensure_ascii=False, default=_jsonable))


def write_text(path: Path, text: str) -> None:
    """``text`` written whole or not at all (:func:`rlvr_plugins.outputs.write_atomic`)."""
    from ..outputs import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, [text])


def _jsonable(value: Any) -> Any:
    return str(value)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def engines_for(config: Mapping[str, Any]):
    from ..rewards import Engines
    from ..train.run import engine_options

    return Engines(**engine_options(config))


def split_rows(
    config: Mapping[str, Any], section: str, split: str | None, default: str, plugin_set: PluginSet | None = None
) -> tuple[str, list[dict]]:
    """``(split name, rows)`` of ``data.<split>``; a missing split is a config error. With
    ``plugin_set`` (the split is scored), every plugin checks the rows (``rlvr_check_dataset``)."""
    from ..train.data import load_rows

    name = split or default
    if name == "eval" and run_config(config).data.eval is None:
        name = "train" if split is None else name
    rows = load_rows(config, name, plugin_set)
    if rows is None:
        raise ConfigError(f"{section}.split {name!r}: the config has no data.{name}", source=section)
    return name, rows
