"""The ``>>>`` examples in docstrings run as tests: pytest collects every module under ``src/`` and
``plugins/*/src`` with ``--doctest-modules`` (pyproject.toml ``addopts``). These modules must keep theirs."""

from __future__ import annotations

import doctest
import importlib

import pytest

EXAMPLES = {  # module: the fewest examples it must keep
    "rlvr_plugins.errors": 1,
    "rlvr_plugins.builtin.loss": 1,
    "rlvr_plugins.builtin.repetition": 2,
    "rlvr_plugins.schedules": 7,
    "rlvr_plugins.testing": 1,
    "rlvr_plugins.train.yamlfile": 1,
    "rlvr_plugins.train.trl_fields": 1,
    "rlvr_plugins.train.data": 1,
    "rlvr_plugins.train.run": 1,
    "rlvr_plugins.lab.compare": 1,
    "rlvr_plugins.lab.hygiene": 1,
    "rlvr_plugins.lab.metrics": 1,
    "rlvr_plugins.cli.filter_cmd": 1,
    "rlvr_plugins.cli.distill_cmd": 1,
    "rlvr_code.calls": 1,
    "rlvr_code.cases": 1,
    "rlvr_code.plugins": 1,
    "rlvr_dr_grpo.plugins": 1,
    "rlvr_judge.rules": 1,
    "rlvr_judge.judges": 1,
    "rlvr_kimi.curriculum": 8,
    "rlvr_kimi.length": 1,
    "rlvr_qwen_thinking.modes": 1,
    "rlvr_qwen_thinking.compliance": 1,
    "rlvr_qwen_thinking.sft": 1,
}


def test_doctests_are_collected(pytestconfig):
    assert pytestconfig.getoption("doctestmodules", False), "run pytest with --doctest-modules (pyproject addopts)"


@pytest.mark.parametrize(("name", "least"), EXAMPLES.items())
def test_module_keeps_its_examples(name, least):
    module = importlib.import_module(name)
    found = sum(len(test.examples) for test in doctest.DocTestFinder().find(module, name))
    assert found >= least, f"{name}: {found} examples"
