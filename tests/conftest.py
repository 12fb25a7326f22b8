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


@pytest.fixture(scope="session")
def sft_policy(tmp_path_factory):
    """A tiny policy that gets some one-digit additions right, built once per test session (~20 s):
    the starting point of every recipe smoke run, so their GRPO steps have a learning signal."""
    import torch

    from rlvr_plugins.testing import sft_policy as build

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return build(tmp_path_factory.mktemp("sft-policy"))
    finally:
        torch.set_num_threads(before)
