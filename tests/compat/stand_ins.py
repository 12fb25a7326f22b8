"""Local stand-ins for the hub fixtures of TRL's GRPO tests: tiny Qwen2 / Qwen3 models, a tokenizer with a chat
template, small datasets in standard and conversational form.

Nothing is downloaded. ``RLVRTrainer`` takes ``GRPOTrainer``'s constructor as it is (``TRAINERS``).
"""

from __future__ import annotations

import dataclasses

import torch
from datasets import Dataset
from transformers import (
    GenerationConfig,
    PreTrainedModel,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen2ForSequenceClassification,
    Qwen3Config,
    Qwen3ForCausalLM,
)
from trl import GRPOConfig, GRPOTrainer

from rlvr_plugins.testing import char_tokenizer
from rlvr_plugins.trainer import RLVRTrainer

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)
TINY = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=2,
    max_position_embeddings=256,
)
WORDS = [
    "one plus one",
    "two times three",
    "the sky is",
    "count to five",
    "name a color",
    "say hello",
    "what is ten",
    "spell cat",
]


def chat_tokenizer():
    tok = char_tokenizer()
    tok.chat_template = CHAT_TEMPLATE
    return tok


def tiny_causal_lm(tokenizer, arch: str = "qwen3", seed: int = 0) -> PreTrainedModel:
    ids = dict(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    config = Qwen3Config(head_dim=16, **ids, **TINY) if arch == "qwen3" else Qwen2Config(**ids, **TINY)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = (Qwen3ForCausalLM if arch == "qwen3" else Qwen2ForCausalLM)(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    model.config._name_or_path = f"local/tiny-{arch}"
    return model


def tiny_reward_model(tokenizer, seed: int = 1) -> PreTrainedModel:
    config = Qwen2Config(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, num_labels=1, **TINY)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForSequenceClassification(config)
    model.config._name_or_path = "local/tiny-reward-model"
    return model.eval()


def standard_dataset(n: int = 8) -> Dataset:
    return Dataset.from_list([{"prompt": WORDS[i % len(WORDS)] + ":", "level": i % 3} for i in range(n)])


def conversational_dataset(n: int = 8) -> Dataset:
    return Dataset.from_list(
        [{"prompt": [{"role": "user", "content": WORDS[i % len(WORDS)]}], "level": i % 3} for i in range(n)]
    )


@dataclasses.dataclass
class CPUConfig(GRPOConfig):
    """GRPOConfig's defaults, but on CPU (its default bf16 needs a GPU or use_cpu)."""

    use_cpu: bool = True


def small_args(tmp_path, **overrides) -> GRPOConfig:
    kwargs = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=6,
        max_steps=2,
        learning_rate=1e-2,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        seed=3,
        disable_tqdm=True,
        beta=0.0,
    )
    kwargs.update(overrides)
    return GRPOConfig(**kwargs)


TRAINERS = {"trl": GRPOTrainer, "rlvr": RLVRTrainer}
"""The two trainers every compat scenario runs on: a TRL script changes only its import line."""
