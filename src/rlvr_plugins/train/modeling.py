"""Load the policy and its tokenizer: from the hub or a local folder, or a tiny model built from a config."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .config import resolve_path, run_config
from .validate import model_section

if TYPE_CHECKING:
    from .sections import LoraSection
from ..errors import ConfigError


def torch_dtype(name: str) -> Any:
    """``model.dtype`` as ``from_pretrained`` takes it: a torch dtype, or ``"auto"``."""
    import torch

    return name if name == "auto" else getattr(torch, name)


def has_accelerator(import_torch: bool = True) -> bool:
    """A CUDA or XPU device is visible (otherwise trainers get ``use_cpu: true`` by default).

    ``import_torch=False`` (``rlvr train --check``, which imports no torch): torch answers if something
    imported it already; otherwise a CUDA device is seen by its device file (``/dev/nvidia0``, and
    ``CUDA_VISIBLE_DEVICES`` not empty or ``-1``); an XPU only through torch."""
    if import_torch or "torch" in sys.modules:
        import torch

        return torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available())
    return cuda_device_file_visible(os.environ)


def cuda_device_file_visible(env: Mapping[str, str], device_file: str = "/dev/nvidia0") -> bool:
    """Whether a CUDA device is visible, without torch: its device file exists and ``CUDA_VISIBLE_DEVICES``
    does not hide every device.

    >>> cuda_device_file_visible({"CUDA_VISIBLE_DEVICES": "-1"}, "/"), cuda_device_file_visible({}, "/no/such")
    (False, False)
    >>> cuda_device_file_visible({}, "/"), cuda_device_file_visible({"CUDA_VISIBLE_DEVICES": "0"}, "/")
    (True, True)
    """
    if env.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return os.path.exists(device_file)


CPU_DEFAULTS = {"use_cpu": True, "bf16": False, "gradient_checkpointing": False}


def cpu_defaults(kwargs: dict, import_torch: bool = True) -> dict:
    """Without an accelerator: train on the CPU in float32 without recomputation, unless the config says otherwise.

    TRL defaults to ``bf16=True`` and gradient checkpointing, which on a CPU only cost time
    (bf16 autocast is emulated; a small model has no memory to save).
    """
    gpu = has_accelerator(import_torch)
    if not gpu:
        for key, value in CPU_DEFAULTS.items():
            kwargs.setdefault(key, value)
    problem = launch_problem(kwargs, os.environ, gpu)
    if problem:
        raise ConfigError(problem)
    return kwargs


def launch_problem(kwargs: Mapping[str, Any], env: Mapping[str, str], has_gpu: bool) -> str | None:
    """What in the ``accelerate launch`` config (seen through accelerate's ``ACCELERATE_*`` variables) cannot work.

    * DeepSpeed with ``mixed_precision: bf16``/``fp16`` but no GPU: the trainer runs in float32
      on the CPU, and DeepSpeed refuses the mismatch only after the model is loaded.
    * ZeRO-3 without ``zero3_save_16bit_model: true``: the saved model would be DeepSpeed
      shards, not weights that ``from_pretrained`` loads.
    """
    if env.get("ACCELERATE_USE_DEEPSPEED", "false").lower() != "true":
        return None
    precision = env.get("ACCELERATE_MIXED_PRECISION", "no")
    if not has_gpu and precision in ("bf16", "fp16") and not kwargs.get(precision):
        return (
            f"accelerate launch asks DeepSpeed for mixed_precision: {precision}, but no GPU is visible and the "
            f"trainer runs in float32 on the CPU; launch with mixed_precision: 'no' "
            f"(configs/accelerate/cpu/zero2.yaml, configs/accelerate/cpu/zero3.yaml)"
        )
    if (
        env.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3"
        and env.get("ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL", "false").lower() != "true"
    ):
        return (
            "accelerate launch runs DeepSpeed ZeRO-3 without zero3_save_16bit_model: true, so the saved model "
            "would be DeepSpeed shards that from_pretrained cannot load; set zero3_save_16bit_model: true "
            "(as configs/accelerate/zero3.yaml does)"
        )
    return None


# vLLM's CPU attention backend (CPU_ATTN) supports only these head sizes; it says so at the first generation.
VLLM_CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


def head_dim(config: Mapping[str, Any]) -> int | None:
    """The policy's attention head size, read without loading it: ``model.tiny``, or the
    ``config.json`` of a local ``model.name_or_path`` folder (None for a hub id)."""
    model = run_config(config).model
    if model is not None and model.tiny is not None:
        from ..demo.model import DEFAULT_MODEL_CONFIG

        values = {**DEFAULT_MODEL_CONFIG, **model.tiny}
    elif model is not None and model.name_or_path is not None:
        path = Path(resolve_path(config, model.name_or_path)) / "config.json"
        if not path.is_file():
            return None
        values = json.loads(path.read_text(encoding="utf-8"))
    else:
        return None
    return int(values.get("head_dim") or values["hidden_size"] // values["num_attention_heads"])


def vllm_cpu_problem(config: Mapping[str, Any], where: str, has_gpu: bool) -> str | None:
    """Why vLLM on this machine cannot run ``config``'s model (``where`` names the setting), or None."""
    size = None if has_gpu else head_dim(config)
    if size is None or size in VLLM_CPU_HEAD_SIZES:
        return None
    return (
        f"{where}: the model's head_dim is {size}, but vLLM on the CPU supports head sizes "
        f"{', '.join(map(str, VLLM_CPU_HEAD_SIZES))}; set model.tiny.head_dim to one of them, or do not use vLLM"
    )


def is_partitioned(model) -> bool:
    """ZeRO-3 holds this model's parameters as partitions (``zero.Init`` at load, or a DeepSpeed engine)."""
    return any(hasattr(p, "ds_id") for p in model.parameters())


@contextmanager
def full_weights(model, engine=None) -> Iterator[Any]:
    """``model`` with every ZeRO-3 partition gathered on every rank, for ``generate`` (a no-op otherwise).

    Collective under ZeRO-3: every rank enters it. ``engine`` is the DeepSpeed engine that wraps
    ``model`` after training began; its fetch/release hooks are lifted meanwhile, as TRL's
    ``unwrap_model_for_generation`` does, so a forward pass does not re-partition the weights.
    """
    if not is_partitioned(model):
        yield model
        return
    import deepspeed
    from trl.models.utils import add_hooks, remove_hooks

    with deepspeed.zero.GatheredParameters(list(model.parameters())):
        if engine is not None:
            remove_hooks(engine)
        try:
            yield model
        finally:
            if engine is not None:
                add_hooks(engine)


def load_tokenizer(config: Mapping[str, Any]):
    """The tokenizer named by ``model.tokenizer`` (``char`` = the demo's, ``char-agentic`` = the demo's with the
    agentic demo's tool-call chat template and markers), else the model's own."""
    from transformers import AutoTokenizer

    from ..demo.agentic import build_agent_tokenizer
    from ..demo.tokenizer import build_char_tokenizer

    model = model_section(config)
    name = model.tokenizer or ("char" if model.tiny is not None else model.name_or_path)
    if name == "char":
        return build_char_tokenizer()
    if name == "char-agentic":
        return build_agent_tokenizer()
    tokenizer = AutoTokenizer.from_pretrained(resolve_path(config, name), trust_remote_code=model.trust_remote_code)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(config: Mapping[str, Any], tokenizer, seed: int):
    """The policy model: ``model.tiny`` builds a seeded tiny Qwen3; ``model.name_or_path`` loads one."""
    from transformers import AutoModelForCausalLM

    from ..demo.model import build_tiny_model

    model = model_section(config)
    if model.tiny is not None:
        return build_tiny_model(tokenizer, seed=seed, **model.tiny)
    return AutoModelForCausalLM.from_pretrained(
        resolve_path(config, model.name_or_path),
        dtype=torch_dtype(model.dtype),
        trust_remote_code=model.trust_remote_code,
    )


def load_saved_policy(config: Mapping[str, Any], folder: Path):
    """A policy this run saved (``policy-init/``), in the dtype ``model.dtype`` asks for."""
    from transformers import AutoModelForCausalLM

    model = model_section(config)
    return AutoModelForCausalLM.from_pretrained(
        str(folder), dtype=torch_dtype(model.dtype), trust_remote_code=model.trust_remote_code
    )


def lora_config(config: Mapping[str, Any]):
    """A ``peft.LoraConfig`` from ``model.lora`` (TRL wraps the model), or None."""
    lora = cast("LoraSection | None", model_section(config).lora)  # built from model.lora by sections.build
    if lora is None:
        return None
    try:
        from peft import LoraConfig
    except ImportError as exc:
        raise ConfigError("model.lora needs peft: pip install 'rlvr-plugins[peft]' or pip install peft") from exc
    return LoraConfig(
        r=lora.r,
        lora_alpha=int(lora.alpha),
        lora_dropout=float(lora.dropout),
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )
