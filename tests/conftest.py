"""Shared fixtures. Helpers live in ``rlvr_plugins.testing`` (importable from every test folder)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def tokenizer():
    from rlvr_plugins.testing import char_tokenizer

    return char_tokenizer()
