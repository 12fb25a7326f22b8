"""Fixtures for 2-step GRPO runs on a tiny local model (never a hub download); see ``rlvr_plugins.testing``."""

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
def tiny_trainer(tmp_path, tokenizer):
    """``tiny_trainer(plugins, **trainer)``: an ``RLVRTrainer`` on a tiny model, built through ``run.prepare``."""
    from rlvr_plugins.testing import tiny_trainer as build

    return lambda plugins, **trainer: build(tmp_path, plugins, tokenizer, **trainer)
