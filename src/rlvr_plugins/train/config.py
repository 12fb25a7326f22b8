"""The run config: one YAML file, validated as a whole before anything starts.

Sections: ``model``, ``data``, ``plugins``, ``trainer`` (any ``GRPOConfig`` field),
``sft`` (optional cold start, any ``SFTConfig`` field), ``eval`` (held-out accuracy
before and after training), ``engine`` (reward engine), ``output_dir``, ``seed``.
Every problem is collected and reported in one :class:`ConfigError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError, shown
from .overrides import apply_overrides, removes  # noqa: F401  (re-exported)

# re-exported: the names a config reader imports from here
from .validate import ANSWER_FORMATS, TOP_LEVEL, RunConfig, parsed_once, run_config, validate, where_of  # noqa: F401
from .yamlfile import MAX_CONFIG_BYTES, lone_surrogate, parse_yaml, read_config_text, resolve_path, why_unreadable  # noqa: F401


def load_config(
    path: str | Path,
    overrides: list[str] | None = None,
    need_data: bool = True,
    need_model: bool = True,
    need_files: bool = False,
) -> dict[str, Any]:
    """Read, override (``a.b=value``, value parsed as YAML) and validate a config file.

    ``need_data=False`` (``rlvr score``) accepts a config without a ``data`` section;
    ``need_model=False`` (``rlvr filter``, whose hygiene-only mode loads no model) one
    without a ``model`` section (a ``model`` section that is there is still checked);
    ``need_files=True`` also refuses data files that do not exist (:func:`missing_data_files`).
    Nothing heavy is imported: every error here comes in well under a second.
    """
    path = Path(path)
    raw, lines = parse_yaml(read_config_text(path), str(path))
    if not isinstance(raw, dict):
        raise ConfigError(f"the top level must be a mapping, got {type(raw).__name__}", source=str(path))
    config = apply_overrides(raw, overrides or [])
    overridden = [item.partition("=")[0].strip() for item in overrides or []]
    lines = {k: v for k, v in lines.items() if not any(k == o or k.startswith(f"{o}.") for o in overridden)}
    config.setdefault("_config_dir", str(path.parent.resolve()))
    config["_config_file"], config["_lines"] = str(path), lines
    config["_sections"] = parsed_once(
        config, validate(config, source=str(path), need_data=need_data, need_model=need_model)
    )
    missing = missing_data_files(config) if need_files else []
    if missing:
        raise ConfigError(missing, source=str(path))
    return config


CONFIG_DIR_COMMENT = "# relative paths of this config are relative to: "
"""The first line of a run folder's ``config.yaml``: the folder of the config it was trained from."""


def run_config_text(config: Mapping[str, Any]) -> str:
    """A run folder's ``config.yaml``: the public config, after a comment naming the original config's folder."""
    return f"{CONFIG_DIR_COMMENT}{config.get('_config_dir', '.')}\n" + dump_public(config)


def load_config_or_run(path: str | Path, overrides: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
    """:func:`load_config` of a config file, or of a run folder (the ``output_dir`` of ``rlvr train``): its own
    resolved ``config.yaml`` with the model replaced by the run's ``final/`` and ``output_dir`` the folder itself
    (so ``rlvr eval RUN_DIR`` writes ``eval.json`` next to the run's files). ``--set`` overrides apply after that."""
    folder = Path(path)
    if not folder.is_dir():
        return load_config(path, overrides, **kwargs)
    config_file, final = folder / "config.yaml", folder / "final"
    if not config_file.is_file():
        raise ConfigError(
            f"{folder} is a folder but not a run folder: it has no config.yaml (give a config "
            "file, or the output_dir of rlvr train)"
        )
    if not final.is_dir():
        raise ConfigError(
            f"{folder}: the run has no final/ model (unfinished?); give a config file with "
            f"model.name_or_path set to one of its checkpoint-N folders instead"
        )
    first = config_file.read_text(encoding="utf-8").partition("\n")[0]
    config_dir = first[len(CONFIG_DIR_COMMENT) :] if first.startswith(CONFIG_DIR_COMMENT) else str(folder.resolve())
    run = [f"output_dir={folder}", "model.tiny=", "model.tokenizer=", f"model.name_or_path={final.resolve()}"]
    config = load_config(config_file, run + list(overrides or []), **kwargs)
    config["_config_dir"] = config_dir
    return config


def missing_data_files(config: Mapping[str, Any]) -> list[str]:
    """A problem for every ``data.<split>`` of source ``jsonl`` whose file does not exist.

    Not part of :func:`validate`: a recipe's data can be the output of an earlier stage, so
    ``rlvr train --check`` only notes it; every command that reads the data refuses it before
    importing anything heavy (:func:`load_config` with ``need_files=True``)."""
    data = config.get("data")
    problems = []
    for split in ("train", "eval"):
        spec = data.get(split) if isinstance(data, Mapping) else None
        if not isinstance(spec, Mapping) or spec.get("source") != "jsonl" or "path" not in spec:
            continue
        path = spec["path"]
        where = where_of(config)(f"data.{split}.path")
        if not isinstance(path, str) or not path:
            problems.append(f"{where}data.{split}.path must be a file path, got {shown(path)}")
        elif not Path(resolve_path(config, path)).is_file():
            problems.append(
                f"{where}data.{split}.path: data file {shown(path, 300)} {why_unreadable(resolve_path(config, path))}"
            )
    return problems


def public(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config without private bookkeeping keys, for the run folder."""
    return {k: v for k, v in config.items() if not str(k).startswith("_")}


class _NoAliasDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_public(config: Mapping[str, Any]) -> str:
    """The public config as YAML that :func:`parse_yaml` reads back: a value shared by two keys
    (one ``options`` dict for the train and eval splits) is written out twice, never as a
    ``*alias``, which config files refuse."""
    return yaml.dump(public(config), Dumper=_NoAliasDumper, sort_keys=False, allow_unicode=True)
