"""``--set section.key=value`` overrides of a config, applied before it is validated."""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError, shown
from .yamlfile import parse_yaml


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
        unset = not_enabled(out, parts)
        if unset is not None:
            problems.append(f"override {shown(item)}: {unset}")
            continue
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
                problems.append(
                    f"override {shown(item)}: the value is not valid YAML ({exc.problems[0]}); "
                    "quote it to pass text, e.g. --set 'key=\"a: b\"'"
                )
                continue
            if not removes(parts, value, parsed):
                node[parts[-1]] = parsed
            elif parts[-1] in node:
                del node[parts[-1]]
            elif parts[0] == "plugins":
                enabled = list(out.get("plugins") or {})
                close = difflib.get_close_matches(parts[1], enabled, n=3)
                hint = f"did you mean {', '.join(close)}?" if close else f"enabled: {', '.join(enabled) or '(none)'}"
                problems.append(
                    f"override {shown(item)}: plugin {shown(parts[1])} is not enabled, so it cannot be disabled; {hint}"
                )
    if problems:
        raise ConfigError(problems, source="--set")
    return out


def not_enabled(config: Mapping[str, Any], parts: list[str]) -> str | None:
    """Why an override of a plugin's option (``plugins.X.option=...``) cannot apply: ``X`` is not enabled (by the
    config or an earlier ``--set``), and setting its option would silently enable it. None when it can apply."""
    if len(parts) < 3 or parts[0] != "plugins":
        return None
    enabled = config.get("plugins")
    enabled = list(enabled) if isinstance(enabled, Mapping) else []
    name = parts[1]
    if name in enabled:
        return None
    close = difflib.get_close_matches(name, enabled, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return (
        f"plugin {shown(name)} is not enabled{hint}, so it has no option to set; enable it with "
        f"--set 'plugins.{name}={{{parts[2]}: ...}}' (or under plugins: in the config); enabled: "
        f"{', '.join(enabled) or '(none)'}"
    )


def removes(parts: list[str], value: str, parsed: Any) -> bool:
    """Whether an override removes its key: an empty value (``--set model.tiny=``), or any null value for a
    plugin (``--set plugins.r1-format=null``: the plugin is off)."""
    return not value.strip() or (parsed is None and len(parts) == 2 and parts[0] == "plugins")
