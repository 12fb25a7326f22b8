"""Typed config sections: one checker (plugin options and sections alike), every default in one place and
in docs/configuration.md, and no stage reading the raw config dict."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import pytest

from rlvr_plugins.errors import PluginOptionError
from rlvr_plugins.fields import Rule, check, type_text
from rlvr_plugins.plugin import parse_options
from rlvr_plugins.train import sections
from rlvr_plugins.train.validate import SFTSection

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "rlvr_plugins"

CONFIG_MODULES = {
    "train/config.py",
    "train/validate.py",
    "train/sections.py",
    "train/overrides.py",
    "train/yamlfile.py",
}
ALLOWED = {
    "train/curves.py": "reads a finished run's saved config.yaml (any version of it) to draw its curves",
}
"""Modules that may read a config mapping by key, and why."""

READS = re.compile(
    r"\b(?:config|section|model|spec|lora|data|trainer)\.get\(|"
    r"\bconfig\[\"(?:model|data|eval|sft|trainer|filter|distill|engine|plugins|seed|output_dir)\"\]"
)


def test_no_stage_reads_the_config_dict_by_key():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = str(path.relative_to(PACKAGE))
        if name in CONFIG_MODULES or name in ALLOWED:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if READS.search(line) and not line.lstrip().startswith(("#", '"', "``")):
                found.append(f"{name}:{number}: {line.strip()}")
    assert not found, "read the typed section (train/validate.run_config) instead:\n" + "\n".join(found)


def test_the_allowed_exceptions_still_read_by_key():
    for name in ALLOWED:
        assert READS.search((PACKAGE / name).read_text(encoding="utf-8")), f"{name} no longer needs its exception"


# -- the one checker --------------------------------------------------------------------------


def test_annotated_rules_serve_plugin_options_too():
    @dataclass
    class Options:
        draws: Annotated[int, Rule(lambda v: v >= 2, "an integer >= 2")] = 4

    assert parse_options("p", Options, {"draws": 3}).draws == 3
    with pytest.raises(PluginOptionError) as err:
        parse_options("p", Options, {"draws": 1})
    assert "option 'draws' must be an integer >= 2, got 1" in str(err.value)
    with pytest.raises(PluginOptionError, match="option 'draws' must be an integer >= 2, got 'x'"):
        parse_options("p", Options, {"draws": "x"})


@pytest.mark.parametrize(
    "value, annotation, ok",
    [
        (3, int, True),
        (True, int, False),
        (2, float, True),
        (float("inf"), float, False),
        (10**400, float, False),
        (None, int | None, True),
        (["a", 1], list[str], False),
        ({"a": 1}, dict, True),
        (0, sections.Positive, False),
        (1, sections.Positive, True),
        ("gsm8k", sections.AnswerFormat, True),
        ("latex", sections.AnswerFormat, False),
    ],
)
def test_check_by_hand(value, annotation, ok):
    assert check(value, annotation)[0] is ok


def test_type_text_is_the_notation_of_config_errors():
    assert type_text(str | list[str] | None) == "str | list[str] | None"
    assert type_text(sections.Positive) == "int"


def test_a_section_error_names_file_line_and_the_rule(tmp_path):
    from rlvr_plugins.errors import ConfigError
    from rlvr_plugins.train.config import load_config

    path = tmp_path / "c.yaml"
    path.write_text(
        "model: {tiny: {}}\ndata: {train: {source: synthetic, task: arithmetic}}\n"
        "plugins: {r1-accuracy: {}}\nfilter:\n  n: 0\n  top_p: 2\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.problems == [
        f"{path}:5: filter.n must be a positive integer, got 0",
        f"{path}:6: filter.top_p must be in (0, 1], got 2",
    ]


def test_eval_defaults_of_train_and_command_are_stated_once():
    section = sections.EvalSection()
    assert (section.in_train(34).batch_size, section.in_train(34).max_new_tokens) == (64, 34)
    command = section.in_command(None)
    assert (command.batch_size, command.max_new_tokens, command.temperature) == (16, 512, 0.0)
    assert sections.EvalSection(n=4).in_command(20).temperature == 0.6
    assert sections.EvalSection(n=4, temperature=0.0, max_new_tokens=8).in_command(20).max_new_tokens == 8


# -- docs/configuration.md tables against the dataclasses -----------------------------------------


DOCUMENTED = {
    "model": [sections.ModelSection],
    "sft": [SFTSection],
    "eval": [sections.EvalSection],
    "filter": [sections.FilterSection, sections.HygieneSection],
    "filter (in `decontaminate`)": [sections.DecontaminateSection],
    "distill": [sections.DistillSection],
}
"""Which dataclasses each ``## `section``` of docs/configuration.md documents in its tables."""

DERIVED = {
    ("eval", "batch_size"): [
        f"`{sections.EvalSection.TRAIN_BATCH_SIZE}`",
        str(sections.EvalSection.COMMAND_BATCH_SIZE),
    ],
    ("eval", "temperature"): ["`0`", str(sections.EvalSection.SAMPLED_TEMPERATURE)],
    ("eval", "max_new_tokens"): ["`trainer.max_completion_length`"],
}
"""Defaults that depend on the command or on another key: what their docs cell must say."""


def documented_rows() -> dict[str, dict[str, str]]:
    """``{section: {key: default cell}}`` from the key/default/meaning tables under each ``## `name``` heading."""
    text = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    out: dict[str, dict[str, str]] = {}
    for part in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        heading = re.match(r"`(\w+)`", part)
        if heading is None:
            continue
        for line in part.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not line.startswith("| `") or len(cells) < 3:
                continue
            inside = re.search(r"\(in `(\w+)`\)", cells[0])
            section = heading.group(1) + (f" (in `{inside.group(1)}`)" if inside else "")
            keys = re.findall(r"`(\w+)`", cells[0].split("(in")[0])
            defaults = cells[1].split(", ") if len(keys) > 1 else [cells[1]]
            for key, default in zip(keys, defaults):
                out.setdefault(section, {})[key] = default
                out.setdefault(f"{section} rows", {})[key] = line
    return out


def written(value) -> str:
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str) and "\n" in value:
        return value.strip()
    return f"`{value}`"


@pytest.mark.parametrize("section", sorted(DOCUMENTED))
def test_every_field_and_default_is_in_the_docs(section):
    rows = documented_rows().get(section, {})
    problems = []
    for cls in DOCUMENTED[section]:
        for f in dataclasses.fields(cls):
            if f.name == "trl":
                continue
            name = section.split()[0]
            if f.name not in rows:
                problems.append(f"{section}.{f.name}: no row in docs/configuration.md")
                continue
            cell = rows[f.name]
            default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
            if (name, f.name) in DERIVED:
                row = documented_rows()[f"{section} rows"][f.name]
                problems += [
                    f"{section}.{f.name}: the docs row does not say {needle}"
                    for needle in DERIVED[name, f.name]
                    if needle not in row
                ]
            elif default is not None and default != {} and written(default) not in cell:
                problems.append(f"{section}.{f.name}: the docs say {cell!r}, the default is {written(default)}")
    extra = set(rows) - {f.name for cls in DOCUMENTED[section] for f in dataclasses.fields(cls)}
    problems += [f"{section}.{key}: documented but not a field" for key in sorted(extra)]
    assert not problems, "\n".join(problems)
