"""Colocated weight sync for vLLM's CPU build, which TRL's own sync cannot write into.

TRL (1.16) syncs the policy into a colocated vLLM by calling the vLLM model's
``load_weights`` one parameter at a time. vLLM's CPU build repacks every linear layer's
weight for its GEMM kernels at load and leaves an empty ``Parameter`` in its place, so the
first sync fails with ``'Parameter' object has no attribute 'weight_loader'``. vLLM's own
``reload_weights`` restores the checkpoint layout, loads the weights and repacks them; it
skips an ``lm_head`` tied to the embedding, whose packed copy keeps the old weights, so
that head is repacked here.

Used only when vLLM's platform is the CPU and ``vllm_mode`` is ``colocate``; on a GPU the
sync stays TRL's. Server mode is not affected (it cannot train on the CPU, see docs/recipes.md),
and there is no sleep mode to wake from (vLLM offers it on CUDA, ROCm and XPU only).
"""

from __future__ import annotations

from typing import Any


def repack_lm_heads(model: Any) -> int:
    """Re-run vLLM-CPU's GEMM dispatch for each output head (it packs a copy of the weight); returns how many."""
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm
    from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead

    heads = [m for m in model.modules() if isinstance(m, ParallelLMHead) and hasattr(m, "cpu_linear")]
    for head in heads:
        dispatch_cpu_unquantized_gemm(head, remove_weight=False)
    return len(heads)


def sync_weights_on_cpu(generation: Any) -> None:
    """TRL's ``VLLMGeneration.sync_weights`` for a colocated vLLM on the CPU, through ``reload_weights``."""
    worker = generation.llm.llm_engine.model_executor.driver_worker
    worker.reload_weights(weights_iterator=generation._iter_named_params(), is_checkpoint_format=True)
    repack_lm_heads(worker.model_runner.get_model())
    generation.llm.reset_prefix_cache()


def uses_vllm_cpu_colocate(trainer: Any) -> bool:
    """The trainer generates with a colocated vLLM whose platform is the CPU."""
    if not getattr(trainer, "use_vllm", False) or getattr(trainer.args, "vllm_mode", None) != "colocate":
        return False
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def install_cpu_weight_sync(trainer: Any) -> bool:
    """Route ``trainer``'s vLLM weight sync through :func:`sync_weights_on_cpu` on vLLM-CPU colocate; True if it did."""
    if not uses_vllm_cpu_colocate(trainer):
        return False
    generation = trainer.vllm_generation
    generation.sync_weights = lambda: sync_weights_on_cpu(generation)
    return True
