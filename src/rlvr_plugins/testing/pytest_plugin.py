"""The pytest plugin of rlvr-plugins, loaded by pytest wherever the package is installed
(entry point ``rlvr_plugins`` in the ``pytest11`` group; ``-p no:rlvr_plugins`` turns it off).

Fixtures: ``tokenizer``, ``tiny_trainer``, ``reward_plugin``, ``rlvr_cli`` and ``hook_recorder``
(:mod:`rlvr_plugins.testing.recorder`). Every
:class:`~rlvr_plugins.engine.RewardEngine` a test creates and leaves open is closed after it.
Before anything is collected, ``HF_HUB_OFFLINE``, ``HF_DATASETS_OFFLINE`` (``1``) and
``TOKENIZERS_PARALLELISM`` (``false``) get defaults: the helpers never download, and a test that
reaches for the hub fails at once. A value set in the environment wins.
"""

from __future__ import annotations

import contextlib
import os
import types
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from .recorder import hook_recorder  # noqa: F401  (a fixture of this plugin; it lives beside HookRecorder)

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def pytest_load_initial_conftests(early_config, parser, args) -> None:
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)


@pytest.fixture
def tokenizer():
    """The demo's character-level tokenizer (:func:`rlvr_plugins.testing.char_tokenizer`)."""
    from . import char_tokenizer

    return char_tokenizer()


@pytest.fixture
def tiny_trainer(tmp_path, tokenizer) -> Callable[..., Any]:
    """``tiny_trainer(plugins, **trainer)``: an ``RLVRTrainer`` on a tiny model and 16 demo rows, its
    config built through ``run.prepare`` in ``tmp_path`` (:func:`rlvr_plugins.testing.tiny_trainer`).

    ``plugins`` is the config's ``plugins:`` section; ``trainer`` overrides
    :data:`rlvr_plugins.testing.TINY_TRAINER`. Build it while in-process plugins are registered
    (``reward_plugin``, ``temporary_plugin``).
    """
    from . import tiny_trainer as build

    return lambda plugins, **trainer: build(tmp_path, plugins, tokenizer, **trainer)


@pytest.fixture
def reward_plugin() -> Iterator[Callable[..., Any]]:
    """``reward_plugin(name, fn, **reward)``: register, for this test only, a plugin ``name`` that
    contributes one reward ``fn`` (:func:`rlvr_plugins.testing.reward_plugin_class`); returns its class.

    The plugin is discoverable by ``name`` in a config's ``plugins:`` section until the test ends,
    then unregistered, as pytest's in-process plugins are.

    .. code-block:: python

        def test_digits(reward_plugin, tiny_trainer):
            reward_plugin("digits", digit_share, isolated=False)
            trainer = tiny_trainer({"digits": {}})
    """
    from ..manager import temporary_plugin
    from . import reward_plugin_class

    with contextlib.ExitStack() as stack:

        def register(name: str, fn: Callable[..., Any], **reward: Any):
            return stack.enter_context(temporary_plugin(reward_plugin_class(name, fn, **reward)))

        yield register


@dataclass
class CliResult:
    """What one in-process ``rlvr`` command gave: its exit code and what it wrote to stdout and stderr."""

    exit_code: int
    out: str
    err: str


@pytest.fixture
def rlvr_cli(capsys) -> Callable[..., CliResult]:
    """``rlvr_cli(*args)``: run ``rlvr <args>`` in this process (``rlvr_plugins.cli.main``) and return a
    :class:`CliResult`. Output written before the call is not part of it; an argparse error or another
    ``SystemExit`` gives its exit code (a message passed to ``SystemExit`` ends up on ``err``)."""

    def run(*args: Any) -> CliResult:
        from ..cli import main

        capsys.readouterr()
        message, code = "", None
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:
            if isinstance(exc.code, str):
                message, code = f"{exc.code}\n", 1
            else:
                code = exc.code
        captured = capsys.readouterr()
        return CliResult(code or 0, captured.out, captured.err + message)

    return run


@pytest.fixture(autouse=True)
def _rlvr_close_reward_engines() -> Iterator[None]:
    """Close, after the test, every reward engine the test created and left open, so that no worker
    process outlives its test (Datasette's pytest plugin closes its databases the same way).

    An engine that an older ``Engines`` object (say, of a module-scoped fixture) builds lazily during
    the test belongs to that object, and stays open for the tests after this one.
    """
    import sys

    from ..engine import RewardEngine
    from ..rewards import Engines

    created: list[weakref.ref[RewardEngine]] = []  # weak: an engine the test drops is finalized as before
    young: weakref.WeakSet[Engines] = weakref.WeakSet()
    engine_init, engines_init = RewardEngine.__init__, Engines.__init__

    def recording_engines_init(self, *args: Any, **kwargs: Any) -> None:
        engines_init(self, *args, **kwargs)
        young.add(self)

    def recording_engine_init(self, *args: Any, **kwargs: Any) -> None:
        engine_init(self, *args, **kwargs)
        frame: types.FrameType | None = sys._getframe(1)
        for _ in range(3):
            if frame is None:
                break
            owner = frame.f_locals.get("self")
            if isinstance(owner, Engines):
                if owner not in young:
                    return
                break
            frame = frame.f_back
        created.append(weakref.ref(self))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Engines, "__init__", recording_engines_init)
        patch.setattr(RewardEngine, "__init__", recording_engine_init)
        yield
    for ref in created:
        engine = ref()
        if engine is not None:
            engine.close()
