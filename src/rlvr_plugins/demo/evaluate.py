"""Greedy generation helper for the CPU demo (and the framework's evaluation)."""

from __future__ import annotations

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase


def generate_greedy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    max_new_tokens: int,
    batch_size: int = 64,
) -> list[str]:
    """Greedy completions for ``prompts`` (plain text), decoded with ``skip_special_tokens=True``.

    Prompts are left-padded; the model is put in eval mode (and put back in train
    mode afterwards if it was training).
    """
    was_training = model.training
    old_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    model.eval()
    device = next(model.parameters()).device
    out: list[str] = []
    try:
        with torch.no_grad():
            for i in range(0, len(prompts), batch_size):
                batch = tokenizer(prompts[i : i + batch_size], return_tensors="pt", padding=True)
                batch = {k: v.to(device) for k, v in batch.items() if k in ("input_ids", "attention_mask")}
                gen = model.generate(
                    **batch,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                )
                completions = gen[:, batch["input_ids"].shape[1] :]
                out.extend(tokenizer.batch_decode(completions, skip_special_tokens=True))
    finally:
        tokenizer.padding_side = old_side
        if was_training:
            model.train()
    return out
