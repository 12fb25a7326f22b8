"""A tiny model, tokenizer and dataset built locally (never a hub download), for 2-step GRPO runs.

Adapted from the repository's ``tests/conftest.py`` so this distribution's tests run on their own.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
        "num_key_value_heads": 2, "head_dim": 16}
TRAINER = {"per_device_train_batch_size": 8, "num_generations": 4, "max_completion_length": 8, "max_steps": 2,
           "learning_rate": 1e-3, "save_strategy": "no", "use_cpu": True, "disable_tqdm": True, "beta": 0.0}


@pytest.fixture
def tokenizer():
    from rlvr_plugins.demo.tokenizer import build_char_tokenizer

    return build_char_tokenizer()


@pytest.fixture
def tiny_trainer(tmp_path, tokenizer):
    """``tiny_trainer(plugins, **trainer)``: an ``RLVRTrainer`` on a tiny model, built through ``run.prepare``.

    Call it inside the ``temporary_plugin`` blocks of any in-process plugin it enables.
    """

    def build(plugins, **trainer_overrides):
        from datasets import Dataset

        from rlvr_plugins.demo.model import build_tiny_model
        from rlvr_plugins.demo.task import split_train_eval
        from rlvr_plugins.rewards import Engines
        from rlvr_plugins.run import prepare
        from rlvr_plugins.trainer import RLVRTrainer

        config = {"output_dir": str(tmp_path / "run"), "seed": 7, "plugins": plugins,
                  "trainer": {**TRAINER, **trainer_overrides}}
        prepared = prepare(config)
        rows, _ = split_train_eval(16, 0, 0, max_digits=2)
        rows = [{**row, "rlvr_index": i} for i, row in enumerate(rows)]
        return RLVRTrainer(plugin_set=prepared.plugin_set, engines=Engines(in_process=True),
                           model=build_tiny_model(tokenizer, seed=0, **TINY), args=prepared.grpo_args,
                           train_dataset=Dataset.from_list(rows), processing_class=tokenizer)

    return build
