"""``reward-model``: a sequence-classification reward model as a reward, like TRL's ``reward_funcs=[model]``.

The model scores ``prompt + completion`` (for chat data: the prompt and completion messages
rendered with the reward tokenizer's chat template), and the reward is the first logit at
the last token, as in TRL. Options: ``model`` (a hub id or local path, or, from Python, a
``PreTrainedModel``), ``processing_class`` (its tokenizer, or an id/path; default: loaded from
the model's own id), ``name`` (default: the last part of the model id, TRL's name), ``weight``.
It runs in the trainer's process (``isolated=False``), one completion per forward pass, on
this process's accelerator device (where TRL places a reward model too; TRL's DeepSpeed
preparation of reward models is not done here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import hookimpl
from ..errors import PluginError
from ..plugin import Plugin, RewardFunction


def model_name(model: Any) -> str:
    """TRL's name of a reward model: the last part of its id (``"org/rm"`` → ``"rm"``)."""
    name = model if isinstance(model, str) else getattr(getattr(model, "config", None), "_name_or_path", "")
    return str(name).rstrip("/").split("/")[-1] or type(model).__name__


def render(prompt: Any, completion: Any, tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None) -> str:
    """The text the reward model reads: plain ``prompt + completion``, or the chat rendered by ``tokenizer``."""
    if isinstance(prompt, list):
        from trl.data_utils import apply_chat_template

        messages = prompt + (
            completion if isinstance(completion, list) else [{"role": "assistant", "content": completion}]
        )
        return apply_chat_template({"messages": messages}, tokenizer, **(chat_template_kwargs or {}))["text"]
    return prompt + completion


class RewardModelScorer:
    """``scorer(prompt=, completion=, example=)`` → the model's first logit at the last token of the rendered text."""

    def __init__(self, model: Any, tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None):
        self.model, self.tokenizer, self.chat_template_kwargs = model, tokenizer, chat_template_kwargs

    def __call__(self, *, prompt, completion, example) -> float:
        import torch

        text = render(prompt, completion, self.tokenizer, self.chat_template_kwargs)
        inputs = self.tokenizer(text=[text], return_tensors="pt", add_special_tokens=False)
        device = next(self.model.parameters()).device
        with torch.inference_mode():
            return float(self.model(**{k: v.to(device) for k, v in inputs.items()}).logits[0, 0])


def load_reward_model(model: Any, processing_class: Any) -> tuple[Any, Any]:
    """The model (on this process's device) and its tokenizer, loaded from ids/paths where given as strings.

    The pad token is set as TRL does (the tokenizer's eos when it has none, and in the model's config).
    """
    from accelerate import PartialState
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if isinstance(model, str):
        model = AutoModelForSequenceClassification.from_pretrained(model, num_labels=1)
    model = model.to(PartialState().device)
    if processing_class is None or isinstance(processing_class, str):
        processing_class = AutoTokenizer.from_pretrained(processing_class or model_name_or_path(model))
    if processing_class.pad_token_id is None:
        processing_class.pad_token = processing_class.eos_token
    model.config.get_text_config().pad_token_id = processing_class.pad_token_id
    model.eval()
    return model, processing_class


def model_name_or_path(model: Any) -> str:
    return getattr(model.config, "_name_or_path", "")


class RewardModel(Plugin):
    """A reward model (``AutoModelForSequenceClassification``, one label) as a reward."""

    name = "reward-model"
    description = "a sequence-classification reward model scores prompt + completion (TRL's reward model path)"

    @dataclass
    class Options:
        model: Any = None
        processing_class: Any = None
        name: str | None = None
        weight: float = 1.0
        chat_template_kwargs: dict | None = None

    @hookimpl
    def rlvr_reward_functions(self, register):
        o = self.options
        if o.model is None:
            raise PluginError(
                "plugin 'reward-model': option 'model' is required (a hub id or local path, or a "
                "PreTrainedModel from Python)"
            )
        model, tokenizer = load_reward_model(o.model, o.processing_class)
        register(
            RewardFunction(
                o.name or model_name(o.model),
                RewardModelScorer(model, tokenizer, o.chat_template_kwargs),
                weight=o.weight,
                isolated=False,
                completion_format="messages",
            )
        )
