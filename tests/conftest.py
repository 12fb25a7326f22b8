"""Shared fixtures: a tiny model and tokenizer built locally (never a hub download)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
        "num_key_value_heads": 2, "head_dim": 16}


def shared_data() -> Path | None:
    """``../shared/data`` next to the repo (or $RLVR_SHARED_DATA), or None when absent."""
    env = os.environ.get("RLVR_SHARED_DATA")
    path = Path(env) if env else REPO.parent / "shared" / "data"
    return path if path.is_dir() else None


@pytest.fixture
def tokenizer():
    from rlvr_plugins.demo.tokenizer import build_char_tokenizer

    return build_char_tokenizer()


def tiny_model(tokenizer, seed=0):
    from rlvr_plugins.demo.model import build_tiny_model

    return build_tiny_model(tokenizer, seed=seed, **TINY)


def tiny_rows(n=16, seed=0):
    from rlvr_plugins.demo.task import split_train_eval

    rows, _ = split_train_eval(n, 0, seed, max_digits=2)
    return [{**r, "rlvr_index": i} for i, r in enumerate(rows)]


def grpo_args(tmp_path, **overrides):
    from trl import GRPOConfig

    kwargs = dict(
        output_dir=str(tmp_path / "run"), per_device_train_batch_size=8, num_generations=4,
        max_completion_length=8, max_steps=2, learning_rate=1e-3, logging_steps=1, report_to="none",
        save_strategy="no", use_cpu=True, seed=7, disable_tqdm=True, beta=0.0,
    )
    kwargs.update(overrides)
    return GRPOConfig(**kwargs)
