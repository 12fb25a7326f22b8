"""The types of ``trl.GRPOConfig`` and ``trl.SFTConfig`` fields, checked without importing TRL.

Importing TRL's config classes imports transformers and torch (~3-4 s), far too slow for
a config check that must answer in well under 2 s. So the field types are generated once
per TRL version into :mod:`rlvr_plugins.train._trl_fields` (``python -m rlvr_plugins.train.trl_fields``
rewrites it) and read from there; when the installed TRL is another version, they are
computed from TRL itself (slow, but right). A test checks the table against the installed TRL.

The table holds real annotations of what YAML can give (``int | None``, ``str | list[str]``,
``Literal[False]``, ``Any``), checked by :mod:`rlvr_plugins.fields`, the checker of plugin options
and config sections. Enums that TRL also accepts as their string value are ``str``; a type that
cannot be written in YAML is ``Any``.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib.metadata as md
import operator
import sys
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

TABLE_MODULE = Path(__file__).with_name("_trl_fields.py")
CLASSES = {"trainer": "GRPOConfig", "sft": "SFTConfig"}
ACCEPTED_TOO = {"scale_rewards": "bool", "fsdp": "list[str]"}
"""Types that TRL's or transformers' ``__post_init__`` converts although the annotation does not name them
(``scale_rewards: false`` is ``"none"``; ``fsdp: [full_shard, auto_wrap]``)."""


def type_text(tp: Any) -> str:
    """A field annotation as alternatives of the types YAML can give.

    >>> type_text(typing.Optional[typing.Union[str, list[str]]])
    'str | list[str] | None'
    """
    alternatives: list[str] = []
    for alt in _alternatives(tp):
        if alt not in alternatives:
            alternatives.append(alt)
    if "any" in alternatives:
        return "any"
    if "str" in alternatives and any(a.startswith("enum") for a in alternatives):
        alternatives = [a for a in alternatives if not a.startswith("enum")]
    alternatives = ["str" if a.startswith("enum") else a for a in alternatives]
    return _join(alternatives)


def _join(alternatives: list[str]) -> str:
    none_last = [a for a in alternatives if a != "None"] + (["None"] if "None" in alternatives else [])
    return " | ".join(dict.fromkeys(none_last))


def _alternatives(tp: Any) -> list[str]:
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return [a for arg in typing.get_args(tp) for a in _alternatives(arg)]
    if origin is typing.Literal:
        return ["False" if v is False else "str" if isinstance(v, str) else "any" for v in typing.get_args(tp)]
    if origin in (list, tuple, typing.Sequence):
        args = typing.get_args(tp)
        return [f"list[{type_text(args[0])}]" if args and args[0] is not Ellipsis else "list[any]"]
    if origin in (dict, typing.Mapping) or tp in (dict, typing.Mapping):
        return ["dict"]
    if tp is type(None) or tp is None:
        return ["None"]
    if tp is typing.Any:
        return ["any"]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return ["enum"]
    if tp in (bool, int, float, str):
        return [tp.__name__]
    if tp is list:
        return ["list[any]"]
    return ["any"]


def compute(class_name: str) -> dict[str, Any]:
    """``{field: annotation}`` of a TRL config class, from TRL itself (imports torch)."""
    import trl

    cls = getattr(trl, class_name)
    hints = typing.get_type_hints(cls)
    out = {f.name: type_text(hints.get(f.name, Any)) for f in dataclasses.fields(cls) if f.init}
    for name, extra in ACCEPTED_TOO.items():
        if name in out and out[name] != "any":
            out[name] = _join([*_split(out[name]), extra])
    return {name: annotation(text) for name, text in out.items()}


def trl_version() -> str | None:
    try:
        return md.version("trl")
    except md.PackageNotFoundError:
        return None


def field_types(section: str) -> dict[str, Any]:
    """The field annotations of ``trainer`` (GRPOConfig) or ``sft`` (SFTConfig) for the installed TRL."""
    from . import _trl_fields

    if _trl_fields.TRL_VERSION == trl_version():
        return _trl_fields.FIELDS[section]
    return compute(CLASSES[section])


def _split(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "|" and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return parts + [text[start:].strip()]


_NAMES = {
    "bool": bool,
    "int": int,
    "float": float,
    "str": str,
    "dict": dict,
    "None": type(None),
    "any": Any,
    "False": Literal[False],
}


def annotation(text: str) -> Any:
    """The annotation of a :func:`type_text`.

    >>> annotation("str | list[str] | None") == (str | list[str] | None), annotation("str | False")
    (True, typing.Union[str, typing.Literal[False]])
    """
    arms = [
        list[annotation(a[5:-1])] if a.startswith("list[") else _NAMES[a]  # type: ignore[misc]
        for a in _split(text)
    ]
    return functools.reduce(operator.or_, arms) if len(arms) > 1 else arms[0]


def source(tp: Any) -> str:
    """An annotation as Python source, for the generated table.

    >>> source(annotation("str | False | None")), source(annotation("list[any]"))
    ('str | Literal[False] | None', 'list[Any]')
    """
    from ..fields import type_text as text

    return " | ".join(
        "Literal[False]" if a == "False" else "Any" if a == "any" else a.replace("[any]", "[Any]")
        for a in _split(text(tp))
    )


def render_table() -> str:
    """The source of :mod:`rlvr_plugins.train._trl_fields`: the fields both classes share (those of
    ``transformers.TrainingArguments``, mostly) once, then each class's own."""
    fields = {section: compute(name) for section, name in CLASSES.items()}
    first, second = fields.values()
    shared = {k: v for k, v in first.items() if second.get(k) == v}

    def entries(table: Mapping[str, Any]) -> list[str]:
        return [f"    {name!r}: {source(tp)}," for name, tp in sorted(table.items())]

    lines = [
        '"""Generated by ``python -m rlvr_plugins.train.trl_fields``: TRL config field types (see trl_fields)."""',
        "",
        "from typing import Any, Literal",
        "",
        f"TRL_VERSION = {trl_version()!r}",
        "",
        "SHARED = {",
        *entries(shared),
        "}",
        "",
        "FIELDS = {",
    ]
    for section, table in fields.items():
        lines += [f"    {section!r}: {{", "        **SHARED,"]
        lines += ["    " + e for e in entries({k: v for k, v in table.items() if k not in shared})]
        lines.append("    },")
    return "\n".join(lines + ["}", ""])


if __name__ == "__main__":
    TABLE_MODULE.write_text(render_table(), encoding="utf-8")
    print(f"wrote {TABLE_MODULE} for trl {trl_version()}", file=sys.stderr)
