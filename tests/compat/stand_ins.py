"""Local stand-ins for the hub fixtures of TRL's GRPO tests: tiny Qwen2 / Qwen3 models, a tokenizer with a chat
template, small datasets in standard and conversational form; and the adapter that gives ``RLVRTrainer``
``GRPOTrainer``'s constructor.

Nothing is downloaded. The adapter turns each TRL reward function into a one-reward plugin whose scoring function
calls the TRL function on one completion (lists of length one, TRL's keyword arguments), and a reward model into the
built-in ``reward-model`` plugin; everything else is passed to ``RLVRTrainer`` unchanged.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

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

from rlvr_plugins import Plugin, RewardFunction, hookimpl
from rlvr_plugins.engine import is_async_callable
from rlvr_plugins.manager import build_plugin_set, temporary_plugin
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


# -- the adapter ---------------------------------------------------------------------------------------------


def _one(values: Any) -> list:
    return [values]


class ItemCall:
    """Call a TRL reward function (batch form) on one completion, passing TRL's keyword arguments as lists of one."""

    def __init__(self, fn):
        self.fn = fn

    def _kwargs(self, prompt, completion, example, completion_ids, trainer_state, log_metric, log_extra):
        return dict(
            prompts=[prompt],
            completions=[completion],
            completion_ids=[completion_ids],
            trainer_state=trainer_state,
            log_metric=log_metric,
            log_extra=lambda column, values: log_extra(column, values[0]),
            **{k: [v] for k, v in example.items()},
        )

    def __call__(self, *, prompt, completion, example, completion_ids, trainer_state, log_metric, log_extra):
        return self.fn(
            **self._kwargs(prompt, completion, example, completion_ids, trainer_state, log_metric, log_extra)
        )[0]


class AsyncItemCall(ItemCall):
    async def __call__(self, *, prompt, completion, example, completion_ids, trainer_state, log_metric, log_extra):
        return (
            await self.fn(
                **self._kwargs(prompt, completion, example, completion_ids, trainer_state, log_metric, log_extra)
            )
        )[0]


def trl_reward_plugin(index: int, fn, weight: float) -> type[Plugin]:
    call = AsyncItemCall(fn) if is_async_callable(fn) else ItemCall(fn)

    class TRLRewardFunction(Plugin):
        name = f"trl-reward-{index}"

        @hookimpl
        def rlvr_reward_functions(self, register):
            register(RewardFunction(fn.__name__, call, weight=weight, isolated=False, completion_format="messages"))

    return TRLRewardFunction


def rlvr_trainer(model, reward_funcs=None, args=None, reward_processing_classes=None, **kwargs) -> RLVRTrainer:
    """``RLVRTrainer`` behind ``GRPOTrainer``'s constructor."""
    funcs = [] if reward_funcs is None else reward_funcs if isinstance(reward_funcs, list) else [reward_funcs]
    classes = (
        reward_processing_classes
        if isinstance(reward_processing_classes, list)
        else ([reward_processing_classes] * len(funcs))
    )
    if len(classes) != len(funcs):
        raise ValueError(f"{len(classes)} reward processing classes for {len(funcs)} reward functions")
    weights = list(args.reward_weights) if args is not None and args.reward_weights is not None else [1.0] * len(funcs)
    plugins, temporary = {}, []
    for i, (fn, proc) in enumerate(zip(funcs, classes)):
        weight = weights[i] if len(weights) == len(funcs) else 1.0
        if isinstance(fn, (str, PreTrainedModel)):
            plugins["reward-model"] = {"model": fn, "processing_class": proc, "weight": weight}
        else:
            temporary.append(trl_reward_plugin(i, fn, weight))
            plugins[temporary[-1].name] = {}
    with contextlib.ExitStack() as stack:
        for cls in temporary:
            stack.enter_context(temporary_plugin(cls))
        plugin_set = build_plugin_set(plugins)
    return RLVRTrainer(model, plugin_set=plugin_set, args=args, engine_options={"in_process": True}, **kwargs)


TRAINERS = {"trl": GRPOTrainer, "rlvr": rlvr_trainer}
