"""Errors that stop a run before (or while) it starts, each naming its culprit.

Where one of them replaces an error ``GRPOTrainer`` raises, it is also the built-in exception
a TRL user catches there: invalid configs, plugin problems and broken reward contracts are
``ValueError``s (TRL raises ``ValueError`` for no reward source, mismatched reward weights,
a reward returning the wrong number of values).
"""

from __future__ import annotations

import errno
import os
import reprlib
import stat
from typing import Any

SHOWN_CHARS = 120
MAX_PROBLEMS = 30
MAX_MESSAGE_CHARS = 12_000


def _repr(items: int) -> reprlib.Repr:
    out = reprlib.Repr()
    out.maxlevel = 3
    out.maxdict = out.maxlist = out.maxtuple = out.maxset = out.maxfrozenset = out.maxdeque = items
    out.maxstring = out.maxother = 80
    out.maxlong = 40
    return out


_REPRS = {5: _repr(5)}


def shown(value: Any, limit: int = SHOWN_CHARS, items: int = 5) -> str:
    """``repr(value)`` bounded in length and in the work it takes (nested values are cut at
    depth 3 and after ``items`` items), for every error message that echoes user input.

    >>> shown("x" * 1000, 20)
    "'xxxxxxxxxxxxxxxx..."
    >>> shown([[[[1]]]] * 100)
    '[[[[...]]], [[[...]]], [[[...]]], [[[...]]], [[[...]]], ...]'
    """
    try:
        text = (_REPRS.get(items) or _REPRS.setdefault(items, _repr(items))).repr(value)
    except Exception:
        text = f"<{type(value).__name__} that cannot be shown>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def columns_text(row: Any) -> str:
    """The column names of a row for an error message: up to 30, cut at 500 characters."""
    return shown(sorted(map(str, row)), 500, items=30)


def bounded(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """A message cut to ``limit`` characters, saying how much was left out."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]} ... ({len(message) - limit} more characters)"


class RLVRError(Exception):
    """Base of every error the command line reports as a message (exit code 2)."""


class Interrupted(Exception):
    """A stage that keeps no checkpoint was stopped by a signal (SIGINT, SIGTERM): the command line prints
    ``rlvr: <message>`` and exits with ``128 + signum``, as a process killed by that signal reports."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.signum = signum


class ConfigError(RLVRError, ValueError):
    """An invalid config: every problem found, one per line (one problem: one line).

    Each problem is bounded in length, and at most ``MAX_PROBLEMS`` are listed."""

    def __init__(self, problems: list[str] | str, source: str | None = None):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        where = f" in {source}" if source else ""
        if len(self.problems) == 1:
            super().__init__(f"invalid config{where}: {bounded(self.problems[0], 1000)}")
            return
        lines = "\n".join(f"  - {bounded(p, 1000)}" for p in self.problems[:MAX_PROBLEMS])
        more = len(self.problems) - MAX_PROBLEMS
        lines += f"\n  ... and {more} more problem(s)" if more > 0 else ""
        super().__init__(f"invalid config{where} ({len(self.problems)} problem(s)):\n{lines}")


class PluginError(RLVRError, ValueError):
    """A plugin cannot be used as configured."""


KNOWN_DISTRIBUTIONS = {
    "rlvr-r1": ("r1-accuracy", "r1-format", "r1-language", "r1-zero-template"),
    "rlvr-dr-grpo": ("dr-grpo",),
    "rlvr-kimi": ("kimi-length", "kimi-curriculum", "kimi-partial-rollouts"),
    "rlvr-qwen-thinking": ("qwen-thinking",),
    "rlvr-code": ("code-tests", "code-repair", "python"),
    "rlvr-judge": ("judge-equivalence",),
}
"""The plugin distributions under this repository's ``plugins/``, and the plugin names each provides."""


class UnknownPluginError(PluginError):
    def __init__(self, names: list[str], installed: list[str]):
        self.names = names
        super().__init__(
            f"the config enables plugin(s) that are not installed: {', '.join(shown(n) for n in names[:20])}. "
            f"Installed plugins: {', '.join(sorted(installed)) or '(none)'}. "
            + " ".join(unknown_plugin_hint(n, installed) for n in names)
        )


def unknown_plugin_hint(name: str, installed: list[str]) -> str:
    """What to do about one unknown plugin name: install the distribution that provides it (only
    for a name a distribution of this repository provides), or the closest installed names."""
    import difflib

    dist = next((d for d, names in KNOWN_DISTRIBUTIONS.items() if name in names), None)
    if dist is not None:
        return f"{name!r} is provided by {dist}: pip install {dist} (or pip install -e plugins/{dist})."
    close = difflib.get_close_matches(name, installed, n=3, cutoff=0.6)
    if close:
        return f"{name!r}: did you mean {', '.join(repr(c) for c in close)}?"
    return f"{name!r}: no installed or known plugin has a similar name; check the spelling (rlvr plugins lists them)."


class PluginImportError(PluginError):
    def __init__(self, name: str, target: str, distribution: str | None, exc: BaseException):
        self.name = name
        dist = f" (distribution {distribution})" if distribution else ""
        super().__init__(f"plugin {name!r}{dist} failed to import {target}: {type(exc).__name__}: {exc}")


class PluginConflictError(PluginError):
    def __init__(self, hook: str, plugins: list[str], message: str | None = None):
        self.hook, self.plugins = hook, plugins
        super().__init__(
            message
            or (
                f"plugins {', '.join(repr(p) for p in plugins)} all implement {hook}, which takes exactly one answer; "
                "enable only one of them."
            )
        )


class PluginOptionError(PluginError):
    """A plugin's options refused: every problem, then the valid options. ``keys``: the option each problem is
    about (``None`` for one about the plugin's options as a whole), so that the config's reader can say where it
    is (:meth:`located`)."""

    def __init__(
        self, plugin: str, problems: list[str], valid: list[str], keys: list[str | None] | None = None, where: str = ""
    ):
        self.plugin, self.problems, self.valid = plugin, problems, valid
        self.keys: list[str | None] = list(keys) if keys is not None else [None] * len(problems)
        valid_text = "; ".join(valid) if valid else "(this plugin takes no options)"
        super().__init__(f"{where}plugin {plugin!r}: {'; '.join(problems)}. Valid options: {valid_text}")

    def located(self, where: Any) -> PluginOptionError:
        """This error with ``file:line: `` first: ``where(dotted key)`` (``""`` for a key the file does not hold,
        e.g. one from ``--set``) of the first problem's option, or of the plugin's entry for a problem of the
        options as a whole."""
        key = self.keys[0] if self.keys else None
        prefix = where(f"plugins.{self.plugin}.{key}") if key is not None else where(f"plugins.{self.plugin}")
        return PluginOptionError(self.plugin, self.problems, self.valid, self.keys, prefix)


class PluginValidationError(PluginError):
    """A hook implementation that matches no hook spec, or has the wrong arguments."""


class PluginContractError(RLVRError, ValueError):
    """A plugin broke a hook's contract while running (wrong shape, NaN, wrong type)."""


class RunFolderError(RLVRError):
    """The run folder cannot be used as asked: it holds another run, is not a writable folder, the
    checkpoint to resume is missing or belongs to another config, or a write into it failed."""


def why_not_a_file(path: str | os.PathLike) -> str:
    """Why ``path``, not a regular file, cannot be read, for "<what> <path> <why>" messages: it does
    not exist, is a folder, is a FIFO / device / socket (reading one could block or never end),
    or is a symbolic-link loop."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return "is a symbolic-link loop" if exc.errno == errno.ELOOP else "does not exist"
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    return "is not a regular file (a FIFO, device or socket); give a file"
