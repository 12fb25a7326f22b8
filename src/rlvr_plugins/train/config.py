"""The run config: one YAML file, validated as a whole before anything starts.

Sections: ``model``, ``data``, ``plugins``, ``trainer`` (any ``GRPOConfig`` field),
``sft`` (optional cold start, any ``SFTConfig`` field), ``eval`` (held-out accuracy
before and after training), ``engine`` (reward engine), ``output_dir``, ``seed``.
Every problem is collected and reported in one :class:`ConfigError`.
"""

from __future__ import annotations

import copy
import difflib
import re
from pathlib import Path
from typing import Any, Mapping

import yaml

from ..engine import EngineOptions
from ..errors import ConfigError, bounded, shown, why_not_a_file

TOP_LEVEL = {
    "model": "the policy: name_or_path (hub id or local folder) or tiny (a config for a model built from scratch)",
    "data": "train and eval splits: {train: {source: synthetic|jsonl|hub, ...}, eval: {...}, columns: {...}}",
    "plugins": "enabled plugins and their options: {plugin-name: {option: value}}",
    "trainer": "any field of trl.GRPOConfig",
    "sft": "optional SFT cold start before RL: any field of trl.SFTConfig, plus completion_column",
    "eval": "held-out accuracy before and after training: {reward, threshold, max_new_tokens, batch_size}; "
            "rlvr eval: {mode, shots, n, temperature, k, backend, ...}",
    "engine": "reward engine: {workers, timeout_s, max_consecutive_failures, nonfinite, in_process, memory_limit_mb, "
              "max_abs_reward}",
    "filter": "rlvr filter: data hygiene and difficulty filtering by pass rate "
              "{hygiene, difficulty, n, temperature, min_pass_rate, max_pass_rate, ...}",
    "distill": "rlvr distill: rejection sampling of teacher traces {n, temperature, thresholds, max_per_prompt, ...}",
    "output_dir": "the run folder",
    "seed": "the run's seed (also GRPOConfig.seed unless trainer.seed is set)",
}

MODEL_KEYS = {"name_or_path", "tiny", "tokenizer", "dtype", "lora", "trust_remote_code"}
LORA_KEYS = {"r", "alpha", "dropout", "target_modules"}
DTYPES = {"auto", "float32", "bfloat16", "float16"}
DATA_KEYS = {"train", "eval", "columns", "answer_format"}
ANSWER_FORMATS = ("gsm8k", "boxed", "olympiadbench", "plain")
SOURCES = {
    "synthetic": {"task", "size", "seed", "options"},
    "jsonl": {"path"},
    "hub": {"name", "config", "split"},
}
SPLIT_COMMON = {"source", "limit", "answer_format"}
GENERATION_KEYS = {"n", "temperature", "top_p", "max_new_tokens", "batch_size", "backend", "vllm_options", "split",
                   "reward", "threshold"}
BACKENDS = ("transformers", "vllm")
PROMPTING_MODES = ("zero-shot", "few-shot", "cot")
EVAL_KEYS = {"reward", "threshold", "max_new_tokens", "batch_size", "every_steps"} | GENERATION_KEYS | {
    "mode", "shots", "shot_column", "cot_instruction", "k", "format_reward", "breakdown"}
FILTER_KEYS = GENERATION_KEYS | {"min_pass_rate", "max_pass_rate", "drop_solved_without_cot", "no_cot_instruction",
                                 "no_cot_max_new_tokens", "output", "difficulty", "hygiene"}
HYGIENE_KEYS = {"drop_multiple_choice", "drop_true_false", "decontaminate", "examples"}
DECONTAMINATE_KEYS = {"eval_sets", "n", "short_n", "threshold"}
EVAL_SET_KEYS = {"path", "column", "name"}
DISTILL_KEYS = GENERATION_KEYS | {"thresholds", "max_per_prompt", "output"}
ENGINE_KEYS = EngineOptions.config_keys()
SFT_EXTRA = {"completion_column": "str", "examples": "int | None"}
SPLIT_TYPES = {"source": "str", "limit": "int | None", "answer_format": "str | None", "task": "str", "size": "int",
               "seed": "int", "options": "dict | None", "path": "str", "name": "str", "config": "str | None",
               "split": "str"}
SECTION_TYPES = {
    "model": {"name_or_path": "str", "tokenizer": "str", "trust_remote_code": "bool", "dtype": "str"},
    "model.lora": {"r": "int", "alpha": "float", "dropout": "float", "target_modules": "str | list[str]"},
    "data.train": SPLIT_TYPES,
    "data.eval": SPLIT_TYPES,
    "eval": {"reward": "str | None", "threshold": "float", "format_reward": "str | None", "shot_column": "str",
             "cot_instruction": "str"},
    "filter": {"reward": "str | None", "threshold": "float", "output": "str", "no_cot_instruction": "str",
               "drop_solved_without_cot": "bool"},
    "distill": {"reward": "str | None", "threshold": "float", "output": "str"},
}
"""Value types of the keys whose values no other rule checks (same notation as :mod:`rlvr_plugins.train.trl_fields`)."""


MAX_CONFIG_BYTES = 1024 * 1024
"""A config is a few KB; a bigger file is not a config (and its errors would be unreadable)."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 floats (``1e-6`` is a number, not the text "1e-6")
    and without aliases: ``*name`` can expand a 400-byte file into gigabytes, and no config needs it."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"YAML aliases (*{shown(event.anchor, 40)[1:-1]}) are not allowed in a config; write the "
                "value out where it is used", event.start_mark)
        return super().compose_node(parent, index)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def parse_yaml(text: str, source: str) -> tuple[Any, dict[str, int]]:
    """``(value, {dotted key: line})`` of a YAML document; every error is a :class:`ConfigError`
    naming ``source:line``. Aliases and a key given twice in one mapping are errors."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        value = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"{source}:{mark.line + 1}" if mark is not None else source
        what = " ".join(str(x) for x in (exc.context, exc.problem) if x)
        raise ConfigError(f"{at}: not valid YAML: {bounded(what, 300)}"
                          + (f" (column {mark.column + 1})" if mark is not None else "")) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {bounded(str(exc), 300)}") from exc
    except RecursionError as exc:
        raise ConfigError(f"{source}: YAML nested too deeply") from exc
    finally:
        loader.dispose()
    lines: dict[str, int] = {}
    problems = _node_lines(node, "", lines, source)
    key = lone_surrogate(value)
    if key is not None:
        at = f"{source}:{lines[key]}" if key in lines else source
        problems.append(f"{at}: {shown(key)} has a lone surrogate escape (\\ud800-\\udfff without its pair), "
                        "which is not Unicode text")
    if problems:
        raise ConfigError(problems)
    return value, lines


def lone_surrogate(value: Any, where: str = "") -> str | None:
    """The dotted path of the first string in ``value`` (a key or a value) with a lone surrogate,
    which no UTF-8 encoder or tokenizer accepts, or None.

    >>> lone_surrogate({"a": ["ok", "x\\ud800"]}), lone_surrogate({"a": "\\U0001F600"})
    ('a.1', None)
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where or "(key)"
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        found = lone_surrogate(key, where) if isinstance(key, str) else None
        found = found or lone_surrogate(child, f"{where}.{key}" if where else str(key))
        if found is not None:
            return found
    return None


def _node_lines(node: Any, prefix: str, lines: dict[str, int], source: str) -> list[str]:
    if not isinstance(node, yaml.MappingNode):
        return []
    problems, seen = [], {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            continue
        path, line = f"{prefix}{key_node.value}", key_node.start_mark.line + 1
        if path in seen:
            problems.append(f"{source}:{line}: key {shown(path)} is given twice (first at line {seen[path]})")
        seen[path] = lines[path] = line
        problems += _node_lines(value_node, f"{path}.", lines, source)
    return problems


def read_config_text(path: Path) -> str:
    """The config file's text; a missing, oversized or non-UTF-8 file is a :class:`ConfigError`."""
    if not path.is_file():
        raise ConfigError(f"config file {shown(str(path), 300)} {why_not_a_file(path)}")
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {shown(str(path), 300)} is {size} bytes; a config is at most "
                          f"{MAX_CONFIG_BYTES} bytes")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"config file {shown(str(path), 300)} cannot be read: {exc.strerror}") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(f"{path}:{line}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at column {column}); "
                          "save the config as UTF-8") from exc


def load_config(path: str | Path, overrides: list[str] | None = None, need_data: bool = True,
                need_model: bool = True, need_files: bool = False) -> dict[str, Any]:
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
    validate(config, source=str(path), need_data=need_data, need_model=need_model)
    missing = missing_data_files(config) if need_files else []
    if missing:
        raise ConfigError(missing, source=str(path))
    return config


CONFIG_DIR_COMMENT = "# relative paths of this config are relative to: "
"""The first line of a run folder's ``config.yaml``: the folder of the config it was trained from."""


def run_config_text(config: Mapping[str, Any]) -> str:
    """A run folder's ``config.yaml``: the public config, after a comment naming the original config's folder."""
    return (f"{CONFIG_DIR_COMMENT}{config.get('_config_dir', '.')}\n"
            + dump_public(config))


def load_config_or_run(path: str | Path, overrides: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
    """:func:`load_config` of a config file, or of a run folder (the ``output_dir`` of ``rlvr train``): its own
    resolved ``config.yaml`` with the model replaced by the run's ``final/`` and ``output_dir`` the folder itself
    (so ``rlvr eval RUN_DIR`` writes ``eval.json`` next to the run's files). ``--set`` overrides apply after that."""
    folder = Path(path)
    if not folder.is_dir():
        return load_config(path, overrides, **kwargs)
    config_file, final = folder / "config.yaml", folder / "final"
    if not config_file.is_file():
        raise ConfigError(f"{folder} is a folder but not a run folder: it has no config.yaml (give a config "
                          "file, or the output_dir of rlvr train)")
    if not final.is_dir():
        raise ConfigError(f"{folder}: the run has no final/ model (unfinished?); give a config file with "
                          f"model.name_or_path set to one of its checkpoint-N folders instead")
    first = config_file.read_text(encoding="utf-8").partition("\n")[0]
    config_dir = first[len(CONFIG_DIR_COMMENT):] if first.startswith(CONFIG_DIR_COMMENT) else str(folder.resolve())
    run = [f"output_dir={folder}", "model.tiny=", "model.tokenizer=", f"model.name_or_path={final.resolve()}"]
    config = load_config(config_file, run + list(overrides or []), **kwargs)
    config["_config_dir"] = config_dir
    return config


def apply_overrides(config: Mapping[str, Any], overrides: list[str]) -> dict[str, Any]:
    """``["trainer.learning_rate=1e-6"]`` → a deep copy with those keys set."""
    out = copy.deepcopy(dict(config))
    problems = []
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            problems.append(f"override {shown(item)} must look like section.key=value")
            continue
        parts = key.strip().split(".")
        node = out
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                problems.append(f"override {shown(item)}: {shown(part)} is not a mapping")
                break
            node = child
        else:
            try:
                parsed = parse_yaml(value, "--set")[0] if value.strip() else None
            except ConfigError as exc:
                problems.append(f"override {shown(item)}: the value is not valid YAML ({exc.problems[0]}); "
                                "quote it to pass text, e.g. --set 'key=\"a: b\"'")
                continue
            if not removes(parts, value, parsed):
                node[parts[-1]] = parsed
            elif parts[-1] in node:
                del node[parts[-1]]
            elif parts[0] == "plugins":
                enabled = list(out.get("plugins") or {})
                close = difflib.get_close_matches(parts[1], enabled, n=3)
                hint = f"did you mean {', '.join(close)}?" if close else f"enabled: {', '.join(enabled) or '(none)'}"
                problems.append(f"override {shown(item)}: plugin {shown(parts[1])} is not enabled, so it cannot be "
                                f"disabled; {hint}")
    if problems:
        raise ConfigError(problems, source="--set")
    return out


def removes(parts: list[str], value: str, parsed: Any) -> bool:
    """Whether an override removes its key: an empty value (``--set model.tiny=``), or any null value for a
    plugin (``--set plugins.r1-format=null``: the plugin is off)."""
    return not value.strip() or (parsed is None and len(parts) == 2 and parts[0] == "plugins")


def _where(config: Mapping[str, Any], key: str) -> str:
    """``"file:line: "`` of a dotted key of the config file, or ``""`` (a key from --set, or no file)."""
    line = (config.get("_lines") or {}).get(key)
    return f"{config['_config_file']}:{line}: " if line and config.get("_config_file") else ""


def validate(config: Mapping[str, Any], source: str | None = None, need_data: bool = True,
             need_model: bool = True) -> None:
    problems: list[str] = []
    for key in config:
        if key not in TOP_LEVEL and not str(key).startswith("_"):
            problems.append(_where(config, str(key)) + _unknown("top-level key", key, TOP_LEVEL))
    if "output_dir" in config and not isinstance(config["output_dir"], str):
        problems.append("output_dir must be a string path")
    if "seed" in config and (not isinstance(config["seed"], int) or isinstance(config["seed"], bool)
                             or _seed_out_of_range(config["seed"])):
        problems.append(f"seed must be an integer from 0 to 2**32 - 1, got "
                        f"{shown(config['seed'])}")
    if need_model or "model" in config:
        problems += _check_model(config.get("model"))
    if need_data or "data" in config:
        problems += _check_data(config.get("data"))
    plugins = config.get("plugins", {})
    if not isinstance(plugins, Mapping):
        problems.append("plugins must be a mapping of plugin name to options")
    else:
        for name, options in plugins.items():
            if options is not None and not isinstance(options, Mapping):
                problems.append(f"plugins.{name}: options must be a mapping (use {{}} for none), got {shown(options)}")
    problems += _check_trl_section(config, "trainer")
    if config.get("sft") is not None:
        problems += _check_trl_section(config, "sft")
    problems += _check_section_types(config)
    problems += _check_keys("eval", config.get("eval", {}), EVAL_KEYS)
    problems += _check_keys("filter", config.get("filter", {}), FILTER_KEYS)
    problems += _check_keys("distill", config.get("distill", {}), DISTILL_KEYS)
    for section in ("eval", "filter", "distill"):
        problems += _check_generation(section, config.get(section))
    problems += _check_filter(config)
    problems += _check_keys("engine", config.get("engine", {}), ENGINE_KEYS)
    problems += _check_engine(config)
    if problems:
        raise ConfigError(problems, source=source)


def _check_engine(config: Mapping[str, Any]) -> list[str]:
    """The ``engine:`` values, by the rules of :class:`~rlvr_plugins.engine.EngineOptions`."""
    engine = config.get("engine") or {}
    if not isinstance(engine, Mapping):
        return []
    return [f"{_where(config, f'engine.{key}')}engine.{key} {problem}"
            for key, problem in EngineOptions.config_problems(engine)]


def _check_model(model: Any) -> list[str]:
    if model is None:
        return ["model is missing: give model.name_or_path (hub id or local folder) or model.tiny"]
    if not isinstance(model, Mapping):
        return [f"model must be a mapping, got {shown(model)}"]
    problems = _check_keys("model", model, MODEL_KEYS)
    if ("name_or_path" in model) == ("tiny" in model):
        problems.append("model needs exactly one of name_or_path (hub id or local folder) and tiny")
    if "tiny" in model and not isinstance(model["tiny"], Mapping):
        problems.append("model.tiny must be a mapping of model config fields ({} for the defaults)")
    if model.get("dtype", "auto") not in DTYPES:
        problems.append(f"model.dtype must be one of {sorted(DTYPES)}, got {shown(model['dtype'])}")
    lora = model.get("lora")
    if lora is not None:
        problems += _check_keys("model.lora", lora, LORA_KEYS)
    return problems


def _check_data(data: Any) -> list[str]:
    if data is None:
        return ["data is missing: give data.train (and optionally data.eval)"]
    if not isinstance(data, Mapping):
        return [f"data must be a mapping, got {shown(data)}"]
    problems = _check_keys("data", data, DATA_KEYS)
    if "train" not in data:
        problems.append("data.train is missing")
    for split in ("train", "eval"):
        spec = data.get(split)
        if spec is None:
            continue
        if not isinstance(spec, Mapping):
            problems.append(f"data.{split} must be a mapping with a source, got {shown(spec)}")
            continue
        src = spec.get("source")
        if src not in SOURCES:
            problems.append(f"data.{split}.source must be one of {sorted(SOURCES)}, got {shown(src)}")
            continue
        problems += _check_keys(f"data.{split}", spec, SOURCES[src] | SPLIT_COMMON)
        problems += _check_answer_format(f"data.{split}.answer_format", spec.get("answer_format"))
        required = {"synthetic": "task", "jsonl": "path", "hub": "name"}[src]
        if required not in spec:
            problems.append(f"data.{split}: source {src} needs {shown(required)}")
    problems += _check_answer_format("data.answer_format", data.get("answer_format"))
    train, evaluation = data.get("train"), data.get("eval")
    if (isinstance(train, Mapping) and isinstance(evaluation, Mapping)
            and train.get("source") == evaluation.get("source") == "synthetic"
            and train.get("task") == evaluation.get("task")
            and (train.get("seed", 0), train.get("options")) != (evaluation.get("seed", 0), evaluation.get("options"))):
        problems.append("data.train and data.eval draw from the same synthetic task: give them the same seed and "
                        "options, so that the eval problems are held out from the train problems")
    columns = data.get("columns", {})
    if not isinstance(columns, Mapping) or not all(isinstance(v, str) for v in columns.values()):
        problems.append("data.columns must map canonical names (prompt, answer, ...) to dataset column names")
    return problems


def _check_answer_format(where: str, value: Any) -> list[str]:
    if value is None or value in ANSWER_FORMATS:
        return []
    return [f"{where} must be one of {list(ANSWER_FORMATS)}, got {shown(value)}"]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_generation(section: str, value: Any) -> list[str]:
    """Values of the sampling keys shared by ``eval``, ``filter`` and ``distill``."""
    if not isinstance(value, Mapping):
        return []
    problems = []
    for key in ("n", "shots", "max_new_tokens", "batch_size", "max_per_prompt", "no_cot_max_new_tokens"):
        if key in value and not (_is_int(value[key]) and value[key] >= (0 if key == "shots" else 1)):
            problems.append(f"{section}.{key} must be a positive integer, got {shown(value[key])}")
    if "temperature" in value and not (_is_number(value["temperature"]) and value["temperature"] >= 0):
        problems.append(f"{section}.temperature must be a number >= 0, got {shown(value['temperature'])}")
    if "top_p" in value and not (_is_number(value["top_p"]) and 0 < value["top_p"] <= 1):
        problems.append(f"{section}.top_p must be in (0, 1], got {shown(value['top_p'])}")
    for key in ("min_pass_rate", "max_pass_rate"):
        if key in value and not (_is_number(value[key]) and 0 <= value[key] <= 1):
            problems.append(f"{section}.{key} must be in [0, 1], got {shown(value[key])}")
    if value.get("backend", "transformers") not in BACKENDS:
        problems.append(f"{section}.backend must be one of {list(BACKENDS)}, got {shown(value['backend'])}")
    if value.get("mode", "zero-shot") not in PROMPTING_MODES:
        problems.append(f"{section}.mode must be one of {list(PROMPTING_MODES)}, got {shown(value['mode'])}")
    if value.get("split", "eval") not in ("train", "eval"):
        problems.append(f"{section}.split must be 'train' or 'eval', got {shown(value['split'])}")
    k = value.get("k")
    if k is not None and not (isinstance(k, list) and k and all(_is_int(x) and x >= 1 for x in k)):
        problems.append(f"{section}.k must be a non-empty list of positive integers, got {shown(k)}")
    n = value.get("n", 1)
    if _is_int(n) and isinstance(k, list) and any(_is_int(x) and x > n for x in k):
        problems.append(f"{section}.k={k} asks for more samples than {section}.n={n}")
    if _is_int(n) and n > 1 and value.get("temperature", 1.0) == 0:
        problems.append(f"{section}.n={n} samples at temperature 0 would be {n} copies of the greedy answer; "
                        f"set {section}.temperature > 0 or n: 1")
    for key in ("thresholds", "vllm_options"):
        if key in value and not isinstance(value[key], Mapping):
            problems.append(f"{section}.{key} must be a mapping, got {shown(value[key])}")
    if "breakdown" in value and not (isinstance(value["breakdown"], list)
                                     and all(isinstance(c, str) for c in value["breakdown"])):
        problems.append(f"{section}.breakdown must be a list of column names, got {shown(value['breakdown'])}")
    return problems


def _check_filter(config: Mapping[str, Any]) -> list[str]:
    """``filter.difficulty`` and the ``filter.hygiene`` section (see :mod:`rlvr_plugins.lab.hygiene`)."""
    section = config.get("filter")
    if not isinstance(section, Mapping):
        return []
    problems = []
    if "difficulty" in section and not isinstance(section["difficulty"], bool):
        problems.append(f"filter.difficulty must be true or false, got {shown(section['difficulty'])}")
    hygiene = section.get("hygiene")
    if hygiene is None:
        if section.get("difficulty") is False:
            problems.append("filter.difficulty is false and there is no filter.hygiene section: nothing to filter; "
                            "add hygiene: {} (drop multiple-choice and true/false problems) or drop difficulty: false")
        return problems
    problems += _check_keys("filter.hygiene", hygiene, HYGIENE_KEYS)
    if not isinstance(hygiene, Mapping):
        return problems
    for key in ("drop_multiple_choice", "drop_true_false"):
        if key in hygiene and not isinstance(hygiene[key], bool):
            problems.append(f"filter.hygiene.{key} must be true or false, got {shown(hygiene[key])}")
    if "examples" in hygiene and not (_is_int(hygiene["examples"]) and hygiene["examples"] >= 0):
        problems.append(f"filter.hygiene.examples must be an integer >= 0, got {shown(hygiene['examples'])}")
    decontaminate = hygiene.get("decontaminate")
    if decontaminate is not None:
        problems += _check_decontaminate(config, decontaminate)
    return problems


def _check_decontaminate(config: Mapping[str, Any], value: Any) -> list[str]:
    where = "filter.hygiene.decontaminate"
    problems = _check_keys(where, value, DECONTAMINATE_KEYS)
    if not isinstance(value, Mapping):
        return problems
    n, short_n = value.get("n", 13), value.get("short_n")
    if not (_is_int(n) and n >= 1):
        problems.append(f"{where}.n must be an integer >= 1 (words per n-gram), got {shown(n)}")
    if short_n is not None and not (_is_int(short_n) and short_n >= 1 and (not _is_int(n) or short_n < n)):
        problems.append(f"{where}.short_n must be an integer >= 1 and smaller than n={shown(n)}, got {shown(short_n)}")
    threshold = value.get("threshold", 0.0)
    if not (_is_number(threshold) and 0 <= threshold < 1):
        problems.append(f"{where}.threshold must be a number in [0, 1) (a prompt is dropped when its overlap "
                        f"is above it), got {shown(threshold)}")
    eval_sets = value.get("eval_sets")
    if not isinstance(eval_sets, list) or not eval_sets:
        problems.append(f"{where}.eval_sets must be a non-empty list of JSONL paths, {{path, column, name}} "
                        f"mappings or 'data.eval', got {shown(eval_sets)}")
        return problems
    for i, spec in enumerate(eval_sets):
        at = f"{where}.eval_sets[{i}]"
        if spec == "data.eval":
            if not isinstance(config.get("data"), Mapping) or config["data"].get("eval") is None:
                problems.append(f"{at} is 'data.eval' but the config has no data.eval")
            continue
        if isinstance(spec, Mapping):
            problems += _check_keys(at, spec, EVAL_SET_KEYS)
            for key in ("column", "name"):
                if key in spec and not isinstance(spec[key], str):
                    problems.append(f"{at}.{key} must be a string, got {shown(spec[key])}")
            path = spec.get("path")
        else:
            path = spec
        if not isinstance(path, str) or not path:
            problems.append(f"{at} must be a JSONL path, a mapping {{path, column, name}} or 'data.eval', "
                            f"got {shown(spec)}")
        elif not Path(resolve_path(config, path)).is_file():
            problems.append(f"{at}: eval set file {shown(path)} {_why_unreadable(resolve_path(config, path))}")
    return problems


def _check_keys(section: str, value: Any, allowed: set[str]) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, Mapping):
        return [f"{section} must be a mapping, got {shown(value)}"]
    return [_unknown(f"key in {section}", k, allowed) for k in value if k not in allowed]


def _check_trl_section(config: Mapping[str, Any], section: str) -> list[str]:
    """Keys and value types of ``trainer`` (``GRPOConfig`` fields) or ``sft`` (``SFTConfig`` fields
    plus :data:`SFT_EXTRA`), from :mod:`rlvr_plugins.train.trl_fields` (TRL is not imported)."""
    from .trl_fields import field_types, type_problems

    value = config.get(section, {})
    if value is None:
        return []
    if not isinstance(value, Mapping):
        return [f"{_where(config, section)}{section} must be a mapping, got {shown(value)}"]
    types = dict(field_types(section))
    if section == "sft":
        types.update(SFT_EXTRA)
    problems = [f"{_where(config, f'{section}.{k}')}{_unknown(f'{section} field', k, types)}"
                for k in value if k not in types]
    problems += [f"{_where(config, f'{section}.{k}')}{section}.{k} must be from 0 to 2**32 - 1, got {value[k]}"
                 for k in ("seed", "data_seed") if _seed_out_of_range(value.get(k))]
    return problems + type_problems(section, value, types, lambda key: _where(config, key))


def _seed_out_of_range(seed: Any) -> bool:
    """Whether ``seed`` is an int that ``transformers.set_seed`` (numpy) would refuse."""
    return isinstance(seed, int) and not isinstance(seed, bool) and not 0 <= seed < 2**32


def _check_section_types(config: Mapping[str, Any]) -> list[str]:
    from .trl_fields import type_problems

    problems = []
    for section, types in SECTION_TYPES.items():
        value: Any = config
        for part in section.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if isinstance(value, Mapping):
            problems += type_problems(section, value, types, lambda key: _where(config, key))
    return problems


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
        where = _where(config, f"data.{split}.path")
        if not isinstance(path, str) or not path:
            problems.append(f"{where}data.{split}.path must be a file path, got {shown(path)}")
        elif not Path(resolve_path(config, path)).is_file():
            problems.append(f"{where}data.{split}.path: data file {shown(path, 300)} "
                            f"{_why_unreadable(resolve_path(config, path))}")
    return problems


def _why_unreadable(resolved: str) -> str:
    """``why_not_a_file`` for a path of the config, with where a missing relative path was looked for."""
    why = why_not_a_file(resolved)
    if why == "does not exist":
        why += " (relative paths are tried from the current directory, then from the config file's folder)"
    return why


def _unknown(what: str, key: Any, allowed: Mapping | set) -> str:
    close = difflib.get_close_matches(str(key), list(allowed), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; valid: {', '.join(sorted(allowed))}"
    if len(allowed) > 40 and not close:
        hint = "; see the documentation of that section for the valid keys"
    return f"unknown {what} {shown(key)}{hint}"



def resolve_path(config: Mapping[str, Any], value: str) -> str:
    """A relative path in the config is relative to the config file's folder, if it exists there."""
    p = Path(value).expanduser()
    if p.is_absolute() or p.exists():
        return str(p)
    candidate = Path(config.get("_config_dir", ".")) / p
    return str(candidate) if candidate.exists() else str(p)


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
