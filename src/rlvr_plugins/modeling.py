"""Load the policy and its tokenizer: from the hub or a local folder, or a tiny model built from a config."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from .config import resolve_path
from .errors import ConfigError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "auto": "auto"}


def has_accelerator() -> bool:
    """A CUDA or XPU device is visible (otherwise trainers get ``use_cpu: true`` by default)."""
    return torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available())


CPU_DEFAULTS = {"use_cpu": True, "bf16": False, "gradient_checkpointing": False}


def cpu_defaults(kwargs: dict) -> dict:
    """Without an accelerator: train on the CPU in float32 without recomputation, unless the config says otherwise.

    TRL defaults to ``bf16=True`` and gradient checkpointing, which on a CPU only cost time
    (bf16 autocast is emulated; a small model has no memory to save).
    """
    if not has_accelerator():
        for key, value in CPU_DEFAULTS.items():
            kwargs.setdefault(key, value)
    return kwargs


def load_tokenizer(config: Mapping[str, Any]):
    """The tokenizer named by ``model.tokenizer`` (``char`` = the demo's), else the model's own."""
    from transformers import AutoTokenizer

    from .demo.tokenizer import build_char_tokenizer

    model = config["model"]
    name = model.get("tokenizer", "char" if "tiny" in model else model.get("name_or_path"))
    if name == "char":
        return build_char_tokenizer()
    tokenizer = AutoTokenizer.from_pretrained(resolve_path(config, name),
                                              trust_remote_code=model.get("trust_remote_code", False))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(config: Mapping[str, Any], tokenizer, seed: int):
    """The policy model: ``model.tiny`` builds a seeded tiny Qwen3; ``model.name_or_path`` loads one."""
    from transformers import AutoModelForCausalLM

    from .demo.model import build_tiny_model

    model = config["model"]
    if "tiny" in model:
        return build_tiny_model(tokenizer, seed=seed, **dict(model["tiny"] or {}))
    return AutoModelForCausalLM.from_pretrained(
        resolve_path(config, model["name_or_path"]),
        dtype=DTYPES[model.get("dtype", "auto")],
        trust_remote_code=model.get("trust_remote_code", False),
    )


def lora_config(config: Mapping[str, Any]):
    """A ``peft.LoraConfig`` from ``model.lora`` (TRL wraps the model), or None."""
    lora = config["model"].get("lora")
    if lora is None:
        return None
    try:
        from peft import LoraConfig
    except ImportError as exc:
        raise ConfigError("model.lora needs peft: pip install 'rlvr-plugins[peft]' or pip install peft") from exc
    return LoraConfig(
        r=int(lora.get("r", 16)),
        lora_alpha=int(lora.get("alpha", 32)),
        lora_dropout=float(lora.get("dropout", 0.05)),
        target_modules=lora.get("target_modules", "all-linear"),
        task_type="CAUSAL_LM",
    )
