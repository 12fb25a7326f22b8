"""The types of ``trl.GRPOConfig`` and ``trl.SFTConfig`` fields, checked without importing TRL.

Importing TRL's config classes imports transformers and torch (~3-4 s), far too slow for
a config check that must answer in well under 2 s. So the field types are generated once
per TRL version into :mod:`rlvr_plugins.train._trl_fields` (``python -m rlvr_plugins.train.trl_fields``
rewrites it) and read from there; when the installed TRL is another version, they are
computed from TRL itself (slow, but right). A test checks the table against the installed TRL.

The table also holds ``GRPOConfig``'s defaults, so that ``rlvr train --check`` builds the run's
``GRPOConfig`` without TRL (:func:`grpo_config_view`): the defaults, the config's values, and
the GRPO batch rules of ``GRPOConfig.__post_init__`` restated here (a test holds them to TRL's).

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


def compute_defaults(class_name: str) -> dict[str, Any]:
    """``{field: default}`` of a TRL config class, from TRL itself (imports torch); enums as their value."""
    import trl

    out = {}
    for f in dataclasses.fields(getattr(trl, class_name)):
        if not f.init:
            continue
        value = f.default
        if value is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        if isinstance(value, enum.Enum):
            value = value.value
        if value is None or isinstance(value, (bool, int, float, str, list)):
            out[f.name] = value
    return out


def grpo_defaults() -> dict[str, Any]:
    """``GRPOConfig``'s defaults for the installed TRL (from the table when it is TRL's version)."""
    from . import _trl_fields

    if _trl_fields.TRL_VERSION == trl_version():
        return dict(_trl_fields.GRPO_DEFAULTS)
    return compute_defaults(CLASSES["trainer"])


def grpo_config_view(kwargs: Mapping[str, Any], world_size: int = 1) -> types.SimpleNamespace:
    """The ``GRPOConfig`` that ``GRPOConfig(**kwargs)`` builds, without importing TRL: its defaults, ``kwargs``,
    and the rules of ``GRPOConfig.__post_init__`` on the generation batch, the groups, the eval batch and
    the importance-sampling clip (TRL's own messages). ``world_size``: the processes of the run.

    What it does not restate is the rest of ``transformers.TrainingArguments``' validation (devices,
    precision, strategies), which runs when the run builds the real ``GRPOConfig``, before a model is loaded.

    >>> view = grpo_config_view({"num_generations": 4, "per_device_train_batch_size": 4, "scale_rewards": False})
    >>> view.generation_batch_size, view.steps_per_generation, view.scale_rewards
    (4, 1, 'none')
    >>> grpo_config_view({"num_generations": 3})
    Traceback (most recent call last):
    ...
    ValueError: generation_batch_size (8) must be divisible by num_generations (3).
    """
    a = types.SimpleNamespace(**{**grpo_defaults(), **kwargs})
    a.scale_rewards = {True: "group", False: "none"}.get(a.scale_rewards, a.scale_rewards)
    a.eval_strategy = getattr(a.eval_strategy, "value", a.eval_strategy)
    a.do_eval = a.do_eval or a.eval_strategy != "no"
    if a.log_completions_hub_repo is not None and not a.log_completions:
        raise ValueError(
            "log_completions_hub_repo is set, but log_completions is False. Enable log_completions to upload "
            "completions to the Hub, or unset log_completions_hub_repo."
        )
    if a.auto_find_batch_size:
        raise ValueError(
            "auto_find_batch_size is not supported by GRPO, because the generation batch must contain full "
            "prompt groups of num_generations completions, and reducing the batch size on out-of-memory breaks "
            "this invariant. Set auto_find_batch_size=False and lower per_device_train_batch_size instead."
        )
    global_batch = a.per_device_train_batch_size * world_size
    if a.generation_batch_size is None and a.steps_per_generation is None:
        a.steps_per_generation = a.gradient_accumulation_steps
        a.generation_batch_size = global_batch * a.steps_per_generation
    elif a.generation_batch_size is not None and a.steps_per_generation is None:
        if a.generation_batch_size % global_batch != 0:
            raise ValueError(
                f"generation_batch_size ({a.generation_batch_size}) must be divisible by the global batch size "
                f"({global_batch})."
            )
        a.steps_per_generation = a.generation_batch_size // global_batch
    elif a.generation_batch_size is None:
        a.generation_batch_size = global_batch * a.steps_per_generation
    else:
        raise ValueError(
            "'generation_batch_size' and 'steps_per_generation' can not be both configured at the same time"
        )
    if a.do_eval and a.eval_strategy != "no":
        eval_generations = a.num_generations_eval or a.num_generations
        if (a.per_device_eval_batch_size * world_size) % eval_generations != 0:
            raise ValueError(
                f"The global eval batch size ({a.per_device_eval_batch_size} * {world_size}) must be "
                f"divisible by the number of generations used for evaluation ({eval_generations})."
            )
    if a.generation_batch_size % a.num_generations != 0:
        raise ValueError(
            f"generation_batch_size ({a.generation_batch_size}) must be divisible by num_generations "
            f"({a.num_generations})."
        )
    if a.num_generations < 2:
        raise ValueError(
            "GRPO requires at least 2 generations per prompt to calculate the advantages. You provided "
            f"{a.num_generations}, which is less than the minimum required."
        )
    if a.vllm_importance_sampling_cap is not None:
        a.vllm_importance_sampling_clip_max = a.vllm_importance_sampling_cap
    low, high = a.vllm_importance_sampling_clip_min, a.vllm_importance_sampling_clip_max
    if low is not None and high is not None and low >= high:
        raise ValueError(
            f"vllm_importance_sampling_clip_min ({low}) must be less than vllm_importance_sampling_clip_max ({high})."
        )
    if (
        a.vllm_importance_sampling_correction
        and a.vllm_importance_sampling_mode in ("token_truncate", "sequence_truncate")
        and low is None
        and high is None
    ):
        raise ValueError(
            "At least one of `vllm_importance_sampling_clip_min` or `vllm_importance_sampling_clip_max` "
            "must be set when `vllm_importance_sampling_mode` is a `*_truncate` mode."
        )
    return a


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
    lines += ["}", "", "GRPO_DEFAULTS: dict[str, Any] = {"]
    lines += [f"    {name!r}: {value!r}," for name, value in sorted(compute_defaults(CLASSES["trainer"]).items())]
    return "\n".join(lines + ["}", ""])


if __name__ == "__main__":
    TABLE_MODULE.write_text(render_table(), encoding="utf-8")
    print(f"wrote {TABLE_MODULE} for trl {trl_version()}", file=sys.stderr)
