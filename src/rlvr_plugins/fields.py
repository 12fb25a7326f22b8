"""The one checker of typed fields: plugin ``Options``, the config's sections and TRL's config fields.

A field is a dataclass field (or a ``{name: annotation}`` table) whose annotation YAML can give:
``bool``, ``int``, ``float`` (finite; an int is accepted and converted), ``str``, ``dict``, ``None``,
``Any``, ``Literal[...]`` (one of those values, of the same type), ``list[T]`` and unions of them.
A rule beyond the type is an ``Annotated`` :class:`Rule`: ``Annotated[int, Rule(lambda v: v >= 1,
"an integer >= 1")]``; its text then says what a valid value is, in the error message.

Why not pydantic or msgspec: this checker already served plugin options, it imports nothing (a bad
config is refused in well under the 2 s budget), and its messages name the key, the valid values and
the value given, which the bad-input tests pin down. What the others would add here (coercion,
JSON schema) no caller needs.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Rule:
    """A check beyond the type, as ``Annotated`` metadata; ``what`` says what a valid value is."""

    ok: Callable[[Any], bool]
    what: str


def at_least(low: int, what: str | None = None) -> Rule:
    """An integer >= ``low``.

    >>> check(0, typing.Annotated[int, at_least(1)])
    (False, 0)
    """
    return Rule(lambda v: v >= low, what or f"an integer >= {low}")


@dataclass(frozen=True)
class Problem:
    """One bad value: ``kind`` is ``"unknown"`` (no such field), ``"type"`` or ``"rule"`` (a :class:`Rule`
    failed, or the type failed on a field that has one), ``"missing"`` (a required field)."""

    key: str
    value: Any
    kind: str
    annotation: Any = None

    @property
    def what(self) -> str:
        """What a valid value is: the rule's text, or the type in ``int | None`` notation."""
        rules = rules_of(self.annotation)
        return rules[0].what if rules else type_text(self.annotation)

    @property
    def finite(self) -> str:
        """``" (finite)"`` for a non-finite number given to a float field."""
        return " (finite)" if self.kind == "type" and _non_finite(self.value) else ""


def finite_float(value: float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _non_finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not finite_float(value)


def hints(cls: type) -> dict[str, Any]:
    """``{field: annotation}`` of a dataclass, ``Annotated`` rules kept."""
    annotations = typing.get_type_hints(cls, include_extras=True)
    return {f.name: annotations[f.name] for f in dataclasses.fields(cls) if f.init}


def rules_of(tp: Any) -> list[Rule]:
    if typing.get_origin(tp) is typing.Annotated:
        return [m for m in tp.__metadata__ if isinstance(m, Rule)]
    return []


def check(value: Any, tp: Any) -> tuple[bool, Any]:
    """``(ok, value converted)``: whether ``value`` is of the type ``tp`` and passes its rules.

    >>> [check(v, int | None)[0] for v in (3, None, True, 3.0, "3")]
    [True, True, False, False, False]
    >>> check(2, float), check(float("nan"), float)[0], check([1, 2.5], list[float])
    ((True, 2.0), False, (True, [1.0, 2.5]))
    >>> check(0, Literal[False])[0], check(False, Literal[False])[0]
    (False, True)
    """
    if typing.get_origin(tp) is typing.Annotated:
        ok, converted = check(value, tp.__origin__)
        return ok and all(rule.ok(converted) for rule in rules_of(tp)), converted
    origin = typing.get_origin(tp)
    if tp is Any:
        return True, value
    if origin in (typing.Union, types.UnionType):
        for arm in typing.get_args(tp):
            ok, converted = check(value, arm)
            if ok:
                return True, converted
        return False, value
    if tp is type(None) or tp is None:
        return value is None, value
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in typing.get_args(tp)), value
    if tp is bool:
        return isinstance(value, bool), value
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if tp is float:  # finite: .nan, .inf and ints past the float range are never a setting
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and finite_float(value)
        return ok, float(value) if ok else value
    if tp is str:
        return isinstance(value, str), value
    if origin in (list, tuple) or tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return False, value
        args = typing.get_args(tp)
        if args and args[-1] is not Ellipsis and origin is list:
            checked = [check(v, args[0]) for v in value]
            return all(ok for ok, _ in checked), [v for _, v in checked]
        return True, list(value) if (origin or tp) is list else tuple(value)
    if origin in (dict, Mapping, typing.Mapping) or tp in (dict, Mapping, typing.Mapping):
        return isinstance(value, Mapping), dict(value) if isinstance(value, Mapping) else value
    return isinstance(value, tp) if isinstance(tp, type) else True, value


def check_fields(
    fields: Mapping[str, Any], raw: Mapping[str, Any], required: typing.Collection[str] = ()
) -> tuple[dict[str, Any], list[Problem]]:
    """The values of ``raw`` converted, and one :class:`Problem` per bad key, in the order of ``raw``;
    then one per ``required`` field that ``raw`` lacks."""
    values, problems = {}, []
    for key, value in raw.items():
        if key not in fields:
            problems.append(Problem(str(key), value, "unknown"))
            continue
        ok, converted = check(value, fields[key])
        if ok:
            values[key] = converted
        else:
            problems.append(Problem(key, value, "rule" if rules_of(fields[key]) else "type", fields[key]))
    problems += [Problem(name, None, "missing", fields[name]) for name in required if name not in raw]
    return values, problems


def required_fields(cls: type) -> list[str]:
    return [
        f.name
        for f in dataclasses.fields(cls)
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]


def type_text(tp: Any) -> str:
    """An annotation in the notation of config errors.

    >>> type_text(str | list[str] | None), type_text(typing.Annotated[int, at_least(1)]), type_text(Literal[False])
    ('str | list[str] | None', 'int', 'False')
    """
    if typing.get_origin(tp) is typing.Annotated:
        return type_text(tp.__origin__)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_text(a) for a in typing.get_args(tp))
    if origin is Literal:
        return " | ".join(repr(a) if isinstance(a, str) else str(a) for a in typing.get_args(tp))
    if origin is list:
        args = typing.get_args(tp)
        return f"list[{type_text(args[0]) if args else 'any'}]"
    if tp is type(None) or tp is None:
        return "None"
    if tp is Any:
        return "any"
    if origin in (dict, Mapping, typing.Mapping) or tp in (dict, Mapping, typing.Mapping):
        return "dict"
    return getattr(tp, "__name__", str(tp))


def type_name(tp: Any) -> str:
    """An annotation in the notation of plugin option errors and ``rlvr plugins``: ``int or null``."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        rules = rules_of(tp)
        return rules[0].what if rules else type_name(tp.__origin__)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    if origin is not None:
        return str(tp).replace("typing.", "")
    return getattr(tp, "__name__", str(tp))


def default_of(field: dataclasses.Field) -> Any:
    """A field's default (its factory called), or ``dataclasses.MISSING``."""
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING
