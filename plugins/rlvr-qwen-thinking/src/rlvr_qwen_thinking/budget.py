"""The thinking budget (Qwen3 technical report, §4.3): stop thinking after N tokens, then answer.

When the thinking part of a completion reaches the budget without closing ``</think>``,
generation is stopped, Qwen3's early-stop text is appended (it closes the think block) and
the model writes the answer from there. The appended tokens are not the policy's: the
rollout marks them 0 in TRL's ``env_mask`` so they are left out of the loss.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

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
        raise ValueError(
            f"the thinking budget needs {text!r} to be a single token of the tokenizer; it encodes "
            f"as {len(ids)} tokens {ids}"
        )
    return ids[0]


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    return [int(value)] if isinstance(value, int) else [int(v) for v in value]


def _cut(new: list[int], stops: set[int], max_new_tokens: int) -> int:
    """How many of ``new`` to keep: up to and including the first stop token, at most ``max_new_tokens``."""
    end = next((k + 1 for k, t in enumerate(new) if t in stops), len(new))
    return min(end, max_new_tokens)


def _generate(
    model, rows: list[list[int]], max_new_tokens: int, stop_ids: list[int], pad_id: int, sampling: dict[str, Any]
) -> list[tuple[list[int], None]]:
    """Sample a continuation of each row with transformers (left-padded batch), each cut after its first stop token.

    :param rows: ``B`` prefixes of token ids (any lengths).
    :returns: ``B`` pairs ``(new token ids, None)``: at most ``max_new_tokens`` ids, no logprobs.
    """
    import torch

    if not rows:
        return []
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            input_ids[i, width - len(row) :] = torch.tensor(row, dtype=torch.long)
            attention_mask[i, width - len(row) :] = 1
    device = getattr(model, "device", None) or torch.device("cpu")
    kwargs = {**sampling, "max_new_tokens": max_new_tokens, "eos_token_id": stop_ids, "pad_token_id": pad_id}
    out = model.generate(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device), **kwargs)
    stops = set(stop_ids)
    return [(new[: _cut(new, stops, max_new_tokens)], None) for new in out[:, width:].tolist()]


def vllm_generate(llm: Any, sampling: dict[str, Any]) -> Callable:
    """A phase generator for :func:`two_phase_budget` that samples with a vLLM ``LLM`` (one completion per row).

    :param sampling: ``vllm.SamplingParams`` fields (temperature, top_p, ..., ``logprobs``);
        ``n``, ``max_tokens`` and ``stop_token_ids`` are set per phase.
    :returns: ``generate(rows, max_new_tokens, stop_ids)`` giving ``(new token ids, their logprobs)``
        per row (logprobs ``None`` per token where vLLM gave NaN, or for all when ``logprobs`` is unset).
    """

    def generate(rows: list[list[int]], max_new_tokens: int, stop_ids: list[int]):
        from vllm import SamplingParams

        if not rows:
            return []
        params = SamplingParams(**{**sampling, "n": 1, "max_tokens": max_new_tokens, "stop_token_ids": stop_ids})
        outputs = llm.generate([{"prompt_token_ids": row} for row in rows], params, use_tqdm=False)
        stops = set(stop_ids)
        result = []
        for output in outputs:
            sample = output.outputs[0]
            new = list(sample.token_ids)
            keep = _cut(new, stops, max_new_tokens)
            logps = (
                None
                if sample.logprobs is None
                else [None if math.isnan(step[t].logprob) else step[t].logprob for t, step in zip(new, sample.logprobs)]
            )
            result.append((new[:keep], None if logps is None else logps[:keep]))
        return result

    return generate


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
    """Sample one completion per prompt with at most ``budget`` thinking tokens, with transformers ``generate``.

    :func:`two_phase_budget` with ``model.generate`` as the generator (see there).
    ``sampling`` is passed to ``model.generate`` (``generation_config``, ``do_sample``,
    ``temperature``, ...); ``max_new_tokens``, ``eos_token_id`` and ``pad_token_id`` are set here.
    ``eos_token_id`` defaults to ``generation_config``'s if given in ``sampling``, else the tokenizer's.

    :returns: ``(completion_ids, env_mask)``.
    """
    config = sampling.get("generation_config")
    eos = _ids(eos_token_id) or _ids(getattr(config, "eos_token_id", None)) or _ids(tokenizer.eos_token_id)
    pad_id = sampling.pop("pad_token_id", None)
    if pad_id is None:
        pad_id = getattr(config, "pad_token_id", None)
    if pad_id is None:
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[0]

    def generate(rows, max_new, stop_ids):
        return _generate(model, rows, max_new, stop_ids, pad_id, sampling)

    completions, masks, _ = two_phase_budget(
        generate,
        tokenizer,
        prompt_ids,
        budget,
        max_new_tokens,
        apply_budget=apply_budget,
        eos_token_id=eos,
        stop_text=stop_text,
    )
    return completions, masks


def two_phase_budget(
    generate: Callable,
    tokenizer: Any,
    prompt_ids: list[list[int]],
    budget: int,
    max_new_tokens: int,
    *,
    apply_budget: Sequence[bool] | None = None,
    eos_token_id: int | list[int] | None = None,
    stop_text: str = EARLY_STOP_TEXT,
) -> tuple[list[list[int]], list[list[int]], list[list[float | None]] | None]:
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

    :param generate: ``generate(rows, max_new_tokens, stop_ids)``: for each row of token ids, a
        pair ``(new ids, their logprobs or None)``, the ids cut after the first of ``stop_ids``
        (``_generate`` with transformers, :func:`vllm_generate` with vLLM).
    :param prompt_ids: ``B`` prompts as token ids (no padding).
    :param budget: N >= 1, the most thinking tokens a row may generate.
    :param max_new_tokens: the most completion tokens per row; must exceed
        ``budget + len(stop_text ids)`` so the answer has room (else ValueError).
    :param apply_budget: ``B`` booleans, which rows the budget applies to (default: all).
    :param eos_token_id: the ids that end a completion (default: the tokenizer's).
    :returns: ``(completion_ids, env_mask, logprobs)``: ``B`` lists of token ids; for each the
        same length of 1 (token sampled from the model) or 0 (token of the injected
        ``stop_text``); and the sampling logprob of each token (``None`` on injected tokens),
        or ``None`` when the generator gives none.
    """
    if budget < 1:
        raise ValueError(f"thinking budget must be >= 1, got {budget}")
    think_end = single_token_id(tokenizer, THINK_END)
    stop_ids = list(tokenizer(stop_text, add_special_tokens=False)["input_ids"])
    if budget + len(stop_ids) >= max_new_tokens:
        raise ValueError(
            f"thinking budget {budget} + the early-stop text ({len(stop_ids)} tokens) leaves no room for the answer "
            f"in max_new_tokens={max_new_tokens}; raise max_completion_length above {budget + len(stop_ids)} "
            "or lower the budget"
        )
    eos = _ids(eos_token_id) or _ids(tokenizer.eos_token_id)
    n = len(prompt_ids)
    apply = [True] * n if apply_budget is None else [bool(a) for a in apply_budget]
    if len(apply) != n:
        raise ValueError(f"apply_budget has {len(apply)} entries for {n} prompts")

    completions: list[list[int]] = [[] for _ in range(n)]
    masks: list[list[int]] = [[] for _ in range(n)]
    logprobs: list[list[float | None]] = [[] for _ in range(n)]
    scored = True  # every generated token came with a logprob
    ended = [False] * n
    budgeted = [i for i in range(n) if apply[i]]
    phase1 = generate([list(prompt_ids[i]) for i in budgeted], budget, [*eos, think_end])
    for i, (new, logps) in zip(budgeted, phase1, strict=True):
        completions[i], masks[i] = list(new), [1] * len(new)
        scored = scored and logps is not None
        logprobs[i] = list(logps) if logps is not None else []
        if new and new[-1] in eos:
            ended[i] = True
        elif new and new[-1] == think_end:
            continue
        elif len(new) == budget:
            completions[i] += stop_ids
            masks[i] += [0] * len(stop_ids)
            logprobs[i] += [None] * len(stop_ids)
        else:  # generation stopped short of the budget for another reason (e.g. a stop string)
            ended[i] = True

    remaining = {i: max_new_tokens - len(completions[i]) for i in range(n) if not ended[i]}
    rows = [i for i, left in remaining.items() if left > 0]
    if rows:
        longest = max(remaining[i] for i in rows)
        phase2 = generate([list(prompt_ids[i]) + completions[i] for i in rows], longest, eos)
        for i, (new, logps) in zip(rows, phase2, strict=True):
            new = new[: remaining[i]]
            completions[i] += new
            masks[i] += [1] * len(new)
            scored = scored and logps is not None
            logprobs[i] += list(logps[: len(new)]) if logps is not None else []
    return completions, masks, (logprobs if scored else None)


@dataclass(frozen=True)
class ThinkingBudgetRollout:
    """TRL's ``rollout_func(prompts, trainer)`` with a thinking budget.

    It samples with transformers ``generate``, or with the trainer's colocated vLLM when
    ``use_vllm`` (two vLLM calls, one per phase; TRL syncs vLLM's weights before the rollout).

    TRL hands it this process's prompts exactly as the sampler ordered them, so each prompt
    already appears once per generation of its group: it samples one completion per entry
    (``len(prompts)`` in all, ``num_generations`` per distinct prompt). The budget applies to
    prompts rendered in thinking mode only. Returns ``prompt_ids``, ``completion_ids``,
    ``env_mask`` (0 on the injected early-stop tokens, so they are out of the loss),
    ``logprobs`` (vLLM's sampling logprobs, ``None`` on the injected tokens; ``None`` in all with
    transformers, see the README), and the column ``thinking_budget_hit`` (bool per
    completion, readable by reward functions); logs ``qwen_thinking/budget_hit_ratio``.
    """

    budget: int
    stop_text: str = EARLY_STOP_TEXT

    def __call__(self, prompts: list, trainer: Any) -> dict[str, Any]:
        import torch

        tokenizer = trainer.processing_class
        texts = [
            p
            if isinstance(p, str)
            else tokenizer.apply_chat_template(
                p, tokenize=False, add_generation_prompt=True, **(getattr(trainer, "chat_template_kwargs", None) or {})
            )
            for p in prompts
        ]
        prompt_ids = [list(ids) for ids in tokenizer(text=texts)["input_ids"]]
        apply_budget = [rendered_mode(text)[0] for text in texts]
        if trainer.use_vllm:
            completion_ids, env_mask, logprobs = self._sample_with_vllm(trainer, tokenizer, prompt_ids, apply_budget)
        else:
            completion_ids, env_mask = self._sample_with_transformers(trainer, tokenizer, prompt_ids, apply_budget)
            logprobs = None
        hit = [0 in mask for mask in env_mask]
        mode = "train" if trainer.model.training else "eval"
        local = torch.tensor(hit, dtype=torch.float32, device=trainer.accelerator.device)
        trainer._metrics[mode]["qwen_thinking/budget_hit_ratio"].append(trainer.accelerator.gather(local).mean().item())
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "logprobs": logprobs,
            "env_mask": env_mask,
            "thinking_budget_hit": hit,
        }

    def _sample_with_transformers(self, trainer, tokenizer, prompt_ids, apply_budget):
        import torch
        from trl.models.utils import unwrap_model_for_generation

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
            return generate_with_budget(
                model,
                tokenizer,
                prompt_ids,
                self.budget,
                int(trainer.max_completion_length),
                apply_budget=apply_budget,
                eos_token_id=list(trainer.eos_token_ids),
                stop_text=self.stop_text,
                generation_config=trainer.generation_config,
            )

    def _sample_with_vllm(self, trainer, tokenizer, prompt_ids, apply_budget):
        """With the trainer's colocated vLLM (TRL synced its weights before calling the rollout)."""
        generation = trainer.vllm_generation
        sampling = {
            "repetition_penalty": generation.repetition_penalty,
            "temperature": generation.temperature,
            "top_p": generation.top_p,
            "top_k": generation.top_k,
            "min_p": 0.0 if generation.min_p is None else generation.min_p,
            "logprobs": generation.logprobs,
            **(generation.generation_kwargs or {}),
        }
        return two_phase_budget(
            vllm_generate(generation.llm, sampling),
            tokenizer,
            prompt_ids,
            self.budget,
            int(trainer.max_completion_length),
            apply_budget=apply_budget,
            eos_token_id=list(trainer.eos_token_ids),
            stop_text=self.stop_text,
        )
