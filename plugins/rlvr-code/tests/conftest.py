"""Fixtures of the rlvr-code tests."""

from __future__ import annotations

import sys

import pytest
from code_helpers import basic_python

from rlvr_code.sandbox import namespaces_available

if not sys.platform.startswith("linux"):  # the sandbox is Linux only; extraction and comparison are not
    collect_ignore = [
        "test_code_sandbox.py",
        "test_code_plugin.py",
        "test_code_score.py",
        "test_code_repair.py",
        "test_code_repair_training.py",
    ]

ISOLATIONS = [
    pytest.param(
        "namespaces",
        marks=pytest.mark.skipif(not namespaces_available(), reason="user/pid/net namespaces refused here"),
    ),
    "basic",
]


@pytest.fixture(params=ISOLATIONS)
def isolation(request):
    """(isolation mode, interpreter or None)."""
    mode = request.param
    return mode, basic_python() if mode == "basic" else None
