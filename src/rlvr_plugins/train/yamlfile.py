"""Reading a config file: size and encoding checks, a YAML 1.2 loader without aliases, the line of every key."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError, bounded, shown, why_not_a_file

MAX_CONFIG_BYTES = 1024 * 1024
"""A config is a few KB; a bigger file is not a config (and its errors would be unreadable)."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 floats (``1e-6`` is a number, not the text "1e-6")
    and without aliases: ``*name`` can expand a 400-byte file into gigabytes, and no config needs it."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None,
                None,
                f"YAML aliases (*{shown(event.anchor, 40)[1:-1]}) are not allowed in a config; write the "
                "value out where it is used",
                event.start_mark,
            )
        return super().compose_node(parent, index)

    def construct_yaml_int(self, node):
        """An integer Python refuses to read (over ``sys.get_int_max_str_digits()`` digits, 4,300 by default)
        is a YAML error at its line, not a traceback."""
        try:
            return super().construct_yaml_int(node)
        except ValueError as exc:
            raise yaml.constructor.ConstructorError(
                None, None, too_many_digits(sum(c.isdigit() for c in str(node.value)), "a config"), node.start_mark
            ) from exc


def too_many_digits(digits: int | None, where: str) -> str:
    """The message for an integer too long for Python to read (``int()``'s digit limit).

    >>> too_many_digits(5000, "a JSONL value")
    'an integer of 5000 digits, more than Python reads (4300); no number in a JSONL value needs that many: write \
it as a string if it is one'
    """
    import sys

    limit = sys.get_int_max_str_digits()
    size = f"{digits} digits" if digits else f"more than {limit} digits"
    return (
        f"an integer of {size}, more than Python reads ({limit}); no number in {where} needs that many: write "
        "it as a string if it is one"
    )


def digits_in(error: ValueError) -> int | None:
    """The number of digits ``int()``'s digit-limit error names, or None.

    >>> digits_in(ValueError("Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits"))
    5000
    """
    found = re.search(r"has (\d+) digits", str(error))
    return int(found.group(1)) if found else None


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


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
        raise ConfigError(
            f"{at}: not valid YAML: {bounded(what, 300)}" + (f" (column {mark.column + 1})" if mark is not None else "")
        ) from exc
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
        problems.append(
            f"{at}: {shown(key)} has a lone surrogate escape (\\ud800-\\udfff without its pair), "
            "which is not Unicode text"
        )
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
    problems: list[str] = []
    seen: dict[str, int] = {}
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
        raise ConfigError(
            f"config file {shown(str(path), 300)} is {size} bytes; a config is at most {MAX_CONFIG_BYTES} bytes"
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"config file {shown(str(path), 300)} cannot be read: {exc.strerror}") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(
            f"{path}:{line}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at column {column}); "
            "save the config as UTF-8"
        ) from exc


def why_unreadable(resolved: str) -> str:
    """``why_not_a_file`` for a path of the config, with where a missing relative path was looked for."""
    why = why_not_a_file(resolved)
    if why == "does not exist":
        why += " (relative paths are tried from the current directory, then from the config file's folder)"
    return why


def resolve_path(config: Mapping[str, Any], value: str) -> str:
    """A relative path in the config is relative to the config file's folder, if it exists there."""
    p = Path(value).expanduser()
    if p.is_absolute() or p.exists():
        return str(p)
    candidate = Path(config.get("_config_dir", ".")) / p
    return str(candidate) if candidate.exists() else str(p)
