"""Tiny causal LM for the CPU demo, built from a config (no downloads)."""

from __future__ import annotations

import torch
from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase, Qwen3Config, Qwen3ForCausalLM

DEFAULT_MODEL_CONFIG: dict = {
    "hidden_size": 128,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 32,
    "max_position_embeddings": 128,
    "tie_word_embeddings": True,
    "initializer_range": 0.02,
}


def build_tiny_model(tokenizer: PreTrainedTokenizerBase, seed: int, **config_overrides) -> PreTrainedModel:
    """A freshly initialised (seeded) Qwen3ForCausalLM whose vocab and special ids match ``tokenizer``."""
    cfg = {**DEFAULT_MODEL_CONFIG, **config_overrides}
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        use_cache=True,
        **cfg,
    )
    # Fork the RNG so building a model does not disturb the caller's global random state.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return model
