"""``hook_recorder``: every hook call of a test, pytester-style, on the one call path
(:meth:`rlvr_plugins.manager.PluginSet.add_monitor`).

Registered as a pytest plugin (``[project.entry-points.pytest11]``), so any test, in this
repository or in a plugin's, can ask for the fixture::

    def test_my_plugin_validates_once(hook_recorder):
        ...
        assert len(hook_recorder.getcalls("rlvr_validate_run")) == 1
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from ..manager import HookCall, monitoring


class HookRecorder:
    """The hook calls of every plugin set built while it records, one :class:`HookCall` per plugin called."""

    def __init__(self) -> None:
        self.calls: list[HookCall] = []

    def getcalls(self, names: str | Sequence[str]) -> list[HookCall]:
        """The calls of the named hooks (a list, or names separated by spaces), in call order."""
        wanted = set(names.split() if isinstance(names, str) else names)
        return [call for call in self.calls if call.hook in wanted]

    def getcall(self, name: str) -> HookCall:
        """The one call of ``name``; an AssertionError when it was called another number of times."""
        calls = self.getcalls(name)
        assert len(calls) == 1, f"{name} was called {len(calls)} times, expected once: {calls}"
        return calls[0]

    def counts(self) -> dict[str, int]:
        """Calls per hook."""
        out: dict[str, int] = {}
        for call in self.calls:
            out[call.hook] = out.get(call.hook, 0) + 1
        return out

    def order(self) -> list[str]:
        """The hooks in the order they were first called."""
        return list(dict.fromkeys(call.hook for call in self.calls))

    def assert_order(self, names: Sequence[str]) -> None:
        """The named hooks were all called, and each one's first call came in this order."""
        first = self.order()
        missing = [n for n in names if n not in first]
        assert not missing, f"never called: {missing}; called: {first}"
        seen = sorted(names, key=first.index)
        assert list(names) == seen, f"hooks first called in the order {seen}, expected {list(names)}"

    def clear(self) -> None:
        self.calls.clear()


@pytest.fixture
def hook_recorder() -> Iterator[HookRecorder]:
    """A :class:`HookRecorder` of every hook call made during the test."""
    recorder = HookRecorder()
    with monitoring(None, recorder.calls.append):
        yield recorder
