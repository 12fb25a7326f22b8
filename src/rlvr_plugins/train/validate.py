"""Validating a config as a whole: every section parsed into its dataclass (:mod:`.sections`), every
problem collected into one :class:`~rlvr_plugins.errors.ConfigError`, each naming ``file:line`` where
the key came from the file (through ``config["_lines"]``)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import fields
from ..engine import EngineOptions
from ..errors import ConfigError, shown
from . import sections as s
from .sections import ANSWER_FORMATS  # noqa: F401  (re-exported)
from .yamlfile import resolve_path, why_unreadable

TOP_LEVEL = {
    "model": "the policy: name_or_path (hub id or local folder) or tiny (a config for a model built from scratch)",
    "data": "train and eval splits: {train: {source: synthetic|jsonl|hub, ...}, eval: {...}, columns: {...}}",
    "plugins": "enabled plugins and their options: {plugin-name: {option: value}}",
    "trainer": "any field of trl.GRPOConfig",
    "sft": "optional SFT cold start before RL: any field of trl.SFTConfig, plus completion_column",
    "eval": "held-out accuracy before and after training: {reward, threshold, max_new_tokens, batch_size}; "
    "rlvr eval: {mode, shots, n, temperature, k, backend, ...}",
    "engine": "reward engine: {workers, max_workers, timeout_s, max_consecutive_failures, nonfinite, in_process, "
    "memory_limit_mb, max_abs_reward, max_completion_mb}",
    "filter": "rlvr filter: data hygiene and difficulty filtering by pass rate "
    "{hygiene, difficulty, n, temperature, min_pass_rate, max_pass_rate, ...}",
    "distill": "rlvr distill: rejection sampling of teacher traces {n, temperature, thresholds, max_per_prompt, ...}",
    "output_dir": "the run folder",
    "seed": "the run's seed (also GRPOConfig.seed unless trainer.seed is set)",
}

ENGINE_KEYS = EngineOptions.config_keys()
DEFAULT_SEED = 42
"""The run's seed when the config gives none."""


@dataclass(frozen=True)
class SFTSection(s.SFTExtra):
    """``sft``: the SFT cold start. ``trl`` holds the ``trl.SFTConfig`` fields given (checked against
    TRL's annotations without importing TRL); ``completion_column`` and ``examples`` are ours."""

    trl: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RunConfig:
    """A validated config, section by section. ``trainer`` holds the ``trl.GRPOConfig`` fields given."""

    model: s.ModelSection | None
    data: s.DataSection | None
    plugins: dict
    trainer: dict
    sft: SFTSection | None
    eval: s.EvalSection
    filter: s.FilterSection
    distill: s.DistillSection
    hygiene: s.HygieneSection | None
    engine: EngineOptions
    output_dir: str | None = None
    seed: int = DEFAULT_SEED

    @property
    def max_completion_length(self) -> int | None:
        """``trainer.max_completion_length`` as given (None: TRL's default applies)."""
        return self.trainer.get("max_completion_length")


def where_of(config: Mapping[str, Any]) -> s.Where:
    """``where("a.b")``: ``"file:line: "`` of a dotted key of the config file, or ``""`` (a key from --set)."""
    lines, source = config.get("_lines") or {}, config.get("_config_file")

    def where(key: str) -> str:
        line = lines.get(key)
        return f"{source}:{line}: " if line and source else ""

    return where


def validate(
    config: Mapping[str, Any], source: str | None = None, need_data: bool = True, need_model: bool = True
) -> RunConfig:
    """The :class:`RunConfig` of ``config``, or one :class:`ConfigError` with every problem."""
    built, problems = _build(config, need_data, need_model)
    if problems:
        raise ConfigError(problems, source=source)
    return built


def run_config(config: Mapping[str, Any]) -> RunConfig:
    """The sections of a config: those :func:`~rlvr_plugins.train.config.load_config` parsed (unless the
    mapping was changed since), or (a config built or changed in Python) parsed now."""
    parsed = config.get("_sections")
    if isinstance(parsed, tuple) and parsed[1] == _public(config):
        return parsed[0]
    return validate(config, need_data=False, need_model=False)


def model_section(config: Mapping[str, Any]) -> s.ModelSection:
    """The config's ``model`` section; one line naming what is missing when the config has none."""
    model = run_config(config).model
    if model is None:
        raise ConfigError(
            "the config has no model section; give model: {name_or_path: <hub id or folder>} or model: {tiny: {}}"
        )
    return model


def parsed_once(config: Mapping[str, Any], sections: RunConfig) -> tuple[RunConfig, dict[str, Any]]:
    """What :func:`load_config` keeps in ``config["_sections"]``: the sections and the values they came from."""
    return sections, copy.deepcopy(_public(config))


def _public(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if not str(k).startswith("_")}


def _build(config: Mapping[str, Any], need_data: bool, need_model: bool) -> tuple[RunConfig, list[str]]:
    where = where_of(config)
    problems: list[str] = []
    for key in config:
        if key not in TOP_LEVEL and not str(key).startswith("_"):
            problems.append(where(str(key)) + s.unknown("top-level key", key, TOP_LEVEL))
    if "output_dir" in config and not isinstance(config["output_dir"], str):
        problems.append("output_dir must be a string path")
    seed = config.get("seed", DEFAULT_SEED)
    if not (fields.check(seed, int)[0] and _seed_in_range(seed)):
        problems.append(f"seed must be an integer from 0 to 2**32 - 1, got {shown(seed)}")
    model = data = None
    if need_model or "model" in config:
        model, more = s.model_problems(config.get("model"), where)
        problems += more
    if need_data or "data" in config:
        data, more = s.data_problems(config.get("data"), where)
        problems += more
    plugins = config.get("plugins", {})
    if not isinstance(plugins, Mapping):
        problems.append("plugins must be a mapping of plugin name to options")
    else:
        for name, options in plugins.items():
            if options is not None and not isinstance(options, Mapping):
                problems.append(f"plugins.{name}: options must be a mapping (use {{}} for none), got {shown(options)}")
    trainer, more = _trl_section(config, "trainer", {})
    problems += more
    sft = None
    if config.get("sft") is not None:
        extra = fields.hints(s.SFTExtra)
        values, more = _trl_section(config, "sft", extra)
        problems += more
        if config["sft"]:  # sft: {} is no SFT stage
            sft = SFTSection(**{k: values.pop(k) for k in extra if k in values}, trl=values)
    commands = {}
    for name, cls in (("eval", s.EvalSection), ("filter", s.FilterSection), ("distill", s.DistillSection)):
        given = config.get(name)
        commands[name], more = s.build(cls, name, {} if given is None else given, where)
        problems += more
        problems += s.sampling_problems(name, commands[name], given if isinstance(given, Mapping) else {})
    hygiene = None
    if isinstance(config.get("filter"), Mapping):
        hygiene, more = s.hygiene_problems(
            commands["filter"],
            config.get("data"),
            where,
            lambda path: (
                None if Path(resolve_path(config, path)).is_file() else why_unreadable(resolve_path(config, path))
            ),
        )
        problems += more
    problems += _check_keys("engine", config.get("engine", {}), ENGINE_KEYS)
    engine, more = _engine_section(config.get("engine") or {}, where)
    problems += more
    built = RunConfig(
        model=model,
        data=data,
        plugins=dict(plugins) if isinstance(plugins, Mapping) else {},
        trainer=trainer,
        sft=sft,
        eval=commands["eval"],
        filter=commands["filter"],
        distill=commands["distill"],
        hygiene=hygiene,
        engine=engine,
        output_dir=config.get("output_dir"),
        seed=seed if isinstance(seed, int) else DEFAULT_SEED,
    )
    return built, problems


def _trl_section(config: Mapping[str, Any], section: str, extra: Mapping[str, Any]) -> tuple[dict, list[str]]:
    """Keys and values of ``trainer`` (``GRPOConfig`` fields) or ``sft`` (``SFTConfig`` fields plus ours),
    against :mod:`rlvr_plugins.train.trl_fields` (TRL is not imported)."""
    from .trl_fields import field_types

    value = config.get(section, {})
    where = where_of(config)
    if value is None:
        return {}, []
    if not isinstance(value, Mapping):
        return {}, [f"{where(section)}{section} must be a mapping, got {shown(value)}"]
    types = {**field_types(section), **extra}
    values, found = fields.check_fields(types, value)
    found += s.trl_rule_problems(values, value, field_types(section))
    problems = []
    for p in found:
        if p.kind == "unknown":
            problems.append(where(f"{section}.{p.key}") + s.unknown(f"{section} field", p.key, types))
    problems += [
        f"{where(f'{section}.{k}')}{section}.{k} must be from 0 to 2**32 - 1, got {value[k]}"
        for k in ("seed", "data_seed")
        if fields.check(value.get(k), int)[0] and not _seed_in_range(value[k])
    ]
    problems += [s.problem_text(p, section, where) for p in found if p.kind != "unknown"]
    return {k: value[k] for k in values}, problems  # as given: TRL converts its own fields


def _seed_in_range(seed: Any) -> bool:
    """Whether an int seed is one ``transformers.set_seed`` (numpy) accepts."""
    return 0 <= seed < 2**32


def _check_keys(section: str, value: Any, allowed: set[str]) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, Mapping):
        return [f"{section} must be a mapping, got {shown(value)}"]
    return [s.unknown(f"key in {section}", k, allowed) for k in value if k not in allowed]


def _engine_section(engine: Any, where: s.Where) -> tuple[EngineOptions, list[str]]:
    """``engine``: :class:`~rlvr_plugins.engine.EngineOptions` under the config's key names, by its rules."""
    if not isinstance(engine, Mapping):
        return EngineOptions(), []
    problems = [
        f"{where(f'engine.{key}')}engine.{key} {problem}" for key, problem in EngineOptions.config_problems(engine)
    ]
    known = {k: v for k, v in engine.items() if k in ENGINE_KEYS}
    return (EngineOptions() if problems else EngineOptions.from_config(known)), problems


def section_defaults() -> dict[str, dict[str, Any]]:
    """``{section: {key: default}}`` of every typed section, for the docs test (``None``: derived or not given)."""
    out = {
        name: s.defaults(cls)
        for name, cls in (
            ("model", s.ModelSection),
            ("model.lora", s.LoraSection),
            ("eval", s.EvalSection),
            ("filter", s.FilterSection),
            ("filter.hygiene", s.HygieneSection),
            ("filter.hygiene.decontaminate", s.DecontaminateSection),
            ("distill", s.DistillSection),
            ("sft", s.SFTExtra),
        )
    }
    out["data"] = {k: v for k, v in s.defaults(s.DataSection).items()}
    for source, cls in s.SOURCES.items():
        out[f"data.<split> ({source})"] = s.defaults(cls)
    return out
