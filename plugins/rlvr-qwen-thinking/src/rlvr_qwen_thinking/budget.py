"""The thinking budget (Qwen3 technical report, §4.3): stop thinking after N tokens, then answer.

When the thinking part of a completion reaches the budget without closing ``</think>``,
generation is stopped, Qwen3's early-stop text is appended (it closes the think block) and
the model writes the answer from there. The appended tokens are not the policy's: the
rollout marks them 0 in TRL's ``env_mask`` so they are left out of the loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .modes import rendered_mode

THINK_END = "</think>"
EARLY_STOP_TEXT = (
    "Considering the limited time by the user, I have to give the solution based on the thinking directly now.\n"
    "</think>.\n\n"
)


def single_token_id(tokenizer: Any, text: str) -> int:
    """The id of ``text`` when the tokenizer encodes it as exactly one token; else a ValueError."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise ValueError(f"the thinking budget needs {text!r} to be a single token of the tokenizer; it encodes "
                         f"as {len(ids)} tokens {ids}")
    return ids[0]


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    return [int(value)] if isinstance(value, int) else [int(v) for v in value]


def _generate(model, rows: list[list[int]], max_new_tokens: int, stop_ids: list[int], pad_id: int,
              sampling: dict[str, Any]) -> list[list[int]]:
    """Sample a continuation of each row (left-padded batch), each cut after its first stop token.

    :param rows: ``B`` prefixes of token ids (any lengths).
    :returns: ``B`` lists of at most ``max_new_tokens`` new token ids.
    """
    import torch

    if not rows:
        return []
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            input_ids[i, width - len(row):] = torch.tensor(row, dtype=torch.long)
            attention_mask[i, width - len(row):] = 1
    device = getattr(model, "device", None) or torch.device("cpu")
    kwargs = {**sampling, "max_new_tokens": max_new_tokens, "eos_token_id": stop_ids, "pad_token_id": pad_id}
    out = model.generate(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device), **kwargs)
    stops = set(stop_ids)
    result = []
    for new in out[:, width:].tolist():
        end = next((k + 1 for k, t in enumerate(new) if t in stops), len(new))
        result.append(new[:min(end, max_new_tokens)])
    return result


def generate_with_budget(
    model: Any,
    tokenizer: Any,
    prompt_ids: list[list[int]],
    budget: int,
    max_new_tokens: int,
    *,
    apply_budget: Sequence[bool] | None = None,
    eos_token_id: int | list[int] | None = None,
    stop_text: str = EARLY_STOP_TEXT,
    **sampling: Any,
) -> tuple[list[list[int]], list[list[int]]]:
    """Sample one completion per prompt with at most ``budget`` thinking tokens, in two phases.

    Phase 1 samples at most ``budget`` tokens, stopping a row early at ``</think>`` or EOS.
    A row that used its whole budget without either gets the token ids of ``stop_text``
    appended (Qwen3's early-stop text, which closes the think block). Phase 2 continues
    every row that has not ended (closed early, cut, or not budgeted) up to
    ``max_new_tokens`` completion tokens in all (model and injected tokens together),
    stopping at EOS. Rows with ``apply_budget[i] == False`` (e.g. prompts rendered in
    non-thinking mode, whose think block is already closed) skip phase 1.

    The budget counts every model token before ``</think>``, from the first completion token
    (the model's own ``<think>`` included). ``</think>`` must be one token of the tokenizer.

    :param prompt_ids: ``B`` prompts as token ids (no padding).
    :param budget: N >= 1, the most thinking tokens a row may generate.
    :param max_new_tokens: the most completion tokens per row; must exceed
        ``budget + len(stop_text ids)`` so the answer has room (else ValueError).
    :param apply_budget: ``B`` booleans, which rows the budget applies to (default: all).
    :param eos_token_id: the ids that end a completion (default: ``generation_config``'s if
        given in ``sampling``, else the tokenizer's).
    :param sampling: passed to ``model.generate`` (``generation_config``, ``do_sample``,
        ``temperature``, ...); ``max_new_tokens``, ``eos_token_id`` and ``pad_token_id`` are set here.
    :returns: ``(completion_ids, env_mask)``: ``B`` lists of token ids, and for each the same
        length of 1 (token sampled from the model) or 0 (token of the injected ``stop_text``).
    """
    if budget < 1:
        raise ValueError(f"thinking budget must be >= 1, got {budget}")
    think_end = single_token_id(tokenizer, THINK_END)
    stop_ids = list(tokenizer(stop_text, add_special_tokens=False)["input_ids"])
    if budget + len(stop_ids) >= max_new_tokens:
        raise ValueError(
            f"thinking budget {budget} + the early-stop text ({len(stop_ids)} tokens) leaves no room for the answer "
            f"in max_new_tokens={max_new_tokens}; raise max_completion_length above {budget + len(stop_ids)} "
            "or lower the budget")
    config = sampling.get("generation_config")
    eos = _ids(eos_token_id) or _ids(getattr(config, "eos_token_id", None)) or _ids(tokenizer.eos_token_id)
    pad_id = sampling.pop("pad_token_id", None)
    if pad_id is None:
        pad_id = getattr(config, "pad_token_id", None)
    if pad_id is None:
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[0]
    n = len(prompt_ids)
    apply = [True] * n if apply_budget is None else [bool(a) for a in apply_budget]
    if len(apply) != n:
        raise ValueError(f"apply_budget has {len(apply)} entries for {n} prompts")

    completions: list[list[int]] = [[] for _ in range(n)]
    masks: list[list[int]] = [[] for _ in range(n)]
    ended = [False] * n
    budgeted = [i for i in range(n) if apply[i]]
    phase1 = _generate(model, [list(prompt_ids[i]) for i in budgeted], budget, [*eos, think_end], pad_id, sampling)
    for i, new in zip(budgeted, phase1, strict=True):
        completions[i], masks[i] = list(new), [1] * len(new)
        if new and new[-1] in eos:
            ended[i] = True
        elif new and new[-1] == think_end:
            continue
        elif len(new) == budget:
            completions[i] += stop_ids
            masks[i] += [0] * len(stop_ids)
        else:  # generation stopped short of the budget for another reason (e.g. a stop string)
            ended[i] = True

    remaining = {i: max_new_tokens - len(completions[i]) for i in range(n) if not ended[i]}
    rows = [i for i, left in remaining.items() if left > 0]
    if rows:
        longest = max(remaining[i] for i in rows)
        phase2 = _generate(model, [list(prompt_ids[i]) + completions[i] for i in rows], longest, eos, pad_id,
                           sampling)
        for i, new in zip(rows, phase2, strict=True):
            new = new[:remaining[i]]
            completions[i] += new
            masks[i] += [1] * len(new)
    return completions, masks


@dataclass(frozen=True)
class ThinkingBudgetRollout:
    """TRL's ``rollout_func(prompts, trainer)`` with a thinking budget (transformers ``generate``).

    TRL hands it this process's prompts exactly as the sampler ordered them, so each prompt
    already appears once per generation of its group: it samples one completion per entry
    (``len(prompts)`` in all, ``num_generations`` per distinct prompt). The budget applies to
    prompts rendered in thinking mode only. Returns ``prompt_ids``, ``completion_ids``,
    ``env_mask`` (0 on the injected early-stop tokens, so they are out of the loss),
    ``logprobs=None`` (see the README), and the column ``thinking_budget_hit`` (bool per
    completion, readable by reward functions); logs ``qwen_thinking/budget_hit_ratio``.
    """

    budget: int
    stop_text: str = EARLY_STOP_TEXT

    def __call__(self, prompts: list, trainer: Any) -> dict[str, Any]:
        import torch
        from trl.models.utils import unwrap_model_for_generation

        tokenizer = trainer.processing_class
        texts = [p if isinstance(p, str) else tokenizer.apply_chat_template(
            p, tokenize=False, add_generation_prompt=True, **(getattr(trainer, "chat_template_kwargs", None) or {}))
            for p in prompts]
        prompt_ids = [list(ids) for ids in tokenizer(text=texts)["input_ids"]]
        apply_budget = [rendered_mode(text)[0] for text in texts]
        args = trainer.args
        with (
            unwrap_model_for_generation(
                trainer.model_wrapped,
                trainer.accelerator,
                gather_deepspeed3_params=args.ds3_gather_for_generation,
                generation_kwargs=getattr(trainer, "generation_kwargs", None),
                gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs,
            ) as model,
            torch.no_grad(),
        ):
            completion_ids, env_mask = generate_with_budget(
                model, tokenizer, prompt_ids, self.budget, int(trainer.max_completion_length),
                apply_budget=apply_budget, eos_token_id=list(trainer.eos_token_ids), stop_text=self.stop_text,
                generation_config=trainer.generation_config)
        hit = [0 in mask for mask in env_mask]
        mode = "train" if trainer.model.training else "eval"
        local = torch.tensor(hit, dtype=torch.float32, device=trainer.accelerator.device)
        trainer._metrics[mode]["qwen_thinking/budget_hit_ratio"].append(
            trainer.accelerator.gather(local).mean().item())
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None,
                "env_mask": env_mask, "thinking_budget_hit": hit}
