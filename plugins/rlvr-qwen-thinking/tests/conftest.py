"""A tiny model and the demo tokenizer built locally (never a hub download).

Adapted from the repository's ``tests/conftest.py`` so this distribution's tests run on their own.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
        "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 256}


@pytest.fixture
def tokenizer():
    from rlvr_plugins.demo.tokenizer import build_char_tokenizer

    return build_char_tokenizer()


@pytest.fixture
def tiny_model(tokenizer):
    from rlvr_plugins.demo.model import build_tiny_model

    return build_tiny_model(tokenizer, seed=0, **TINY)
