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


@pytest.fixture
def one_torch_thread():
    """Tiny models run faster on one thread; on a shared, busy machine two threads contend (5x slower)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
