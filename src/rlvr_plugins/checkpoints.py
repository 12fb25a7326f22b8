"""Checkpoints of a training run: which are complete, and write errors named in one line.

Core, imports nothing heavy: the trainer glue (its checkpoint save) and the run folder
(``--resume``) both use it. The size of a checkpoint not yet written is estimated from the
model's parameters and the optimizer's state (:func:`checkpoint_bytes_estimate`). A checkpoint is complete when it holds
:data:`PLUGIN_STATE_FILE`, the last file written into it. A write error (disk full,
read-only) becomes one :class:`~rlvr_plugins.errors.RunFolderError` naming the target,
the space needed and the space free (:func:`write_error`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .errors import RunFolderError

CHECKPOINT_PREFIX = "checkpoint"  # transformers' PREFIX_CHECKPOINT_DIR
PLUGIN_STATE_FILE = "rlvr_plugin_state.json"  # written last into a checkpoint: its completeness marker
TRAINER_STATE_FILE = "trainer_state.json"

_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_WRITE_ERRNOS = _FULL_ERRNOS | {errno.EROFS, errno.EACCES, errno.EPERM}


def _checkpoint_step(name: str) -> int | None:
    prefix, _, step = name.rpartition("-")
    return int(step) if prefix == CHECKPOINT_PREFIX and step.isdigit() else None


def complete_checkpoints(folder: Path) -> list[tuple[int, str]]:
    """``(step, name)`` of every ``checkpoint-N`` in ``folder`` that holds its marker, oldest first."""
    if not folder.is_dir():
        return []
    found = ((_checkpoint_step(n), n) for n in os.listdir(folder))
    return sorted((s, n) for s, n in found if s is not None and (folder / n / PLUGIN_STATE_FILE).is_file())


def last_complete_checkpoint(output_dir: str | Path) -> str | None:
    """The newest ``checkpoint-N`` that was written to the end.

    The plugin state file is the last thing a checkpoint gets (after model, optimizer,
    RNG and trainer state, and before older checkpoints are rotated away), so a folder
    without it was interrupted while being written and is skipped.
    """
    complete = complete_checkpoints(Path(output_dir))
    return str(Path(output_dir) / complete[-1][1]) if complete else None


def write_errno(exc: BaseException) -> int | None:
    """The errno of a failed write (disk full, quota, read-only, permission), or None for any other error.

    ``open``/``write`` raise ``OSError``; safetensors a ``SafetensorError`` whose text ends in
    ``(os error 28)``; ``torch.save``'s zip writer a ``RuntimeError`` from ``inline_container.cc``
    that carries no errno (``ENOSPC`` is assumed when the disk is then full, else ``EIO``).
    """
    if isinstance(exc, OSError):
        return exc.errno if exc.errno in _WRITE_ERRNOS else None
    if isinstance(exc.__cause__, OSError):  # outputs.write_atomic's OutputError names the file; the cause has the errno
        return write_errno(exc.__cause__)
    text = str(exc)
    found = re.search(r"os error (\d+)\)", text)
    if found:
        return int(found.group(1)) if int(found.group(1)) in _WRITE_ERRNOS else None
    if isinstance(exc, RuntimeError) and "inline_container" in text:
        return errno.EIO
    return None


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def free_bytes(folder: Path) -> int | None:
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        return shutil.disk_usage(existing).free
    except OSError:
        return None


def write_error(target: Path, exc: BaseException, needed: int | None, last_complete: str | None) -> RunFolderError:
    """One line: what could not be written, why, how much it needed, how much is free, what is kept."""
    free = free_bytes(target)
    code = write_errno(exc) or errno.EIO
    if code == errno.EIO and free is not None and needed is not None and free < needed:
        code = errno.ENOSPC
    sizes = ", ".join(
        part
        for part in (
            f"needs about {_mb(needed)}" if needed else "",
            f"{_mb(free)} free there" if free is not None else "",
        )
        if part
    )
    fix = "free space" if code in _FULL_ERRNOS else "make it writable"
    kept = (
        f"; the last complete checkpoint, {last_complete}, is intact: {fix} and continue with --resume"
        if last_complete
        else ""
    )
    return RunFolderError(f"could not write {target}: {os.strerror(code)}" + (f" ({sizes})" if sizes else "") + kept)


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


@contextlib.contextmanager
def writing(target: Path, run_dir: Path, needed: int | None = None, remove_partial: bool = True) -> Iterator[None]:
    """Turn a write error inside the block into one :func:`write_error` naming ``target`` (a folder or
    file of the run in ``run_dir``); a half-written folder is removed (``remove_partial``)."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - SafetensorError has no narrower base
        if write_errno(exc) is None:
            raise
        error = write_error(target, exc, needed, last_complete_checkpoint(run_dir))
        if remove_partial:
            shutil.rmtree(target, ignore_errors=True)
        raise error from exc


# -- checkpoint size -------------------------------------------------------------------------------
# Optimizer state per trainable parameter element, in float32 values, for an optimizer whose state is not
# readable yet; by class name, so that DeepSpeed's and apex's fused classes need no import.
ADAM_FAMILY = frozenset({"Adam", "AdamW", "NAdam", "RAdam", "Adamax", "FusedAdam", "DeepSpeedCPUAdam"})
FLOAT32_BYTES = 4


def innermost_optimizer(optimizer: Any, depth: int = 8) -> Any:
    """The optimizer that holds the state: accelerate's ``AcceleratedOptimizer``, DeepSpeed's ZeRO
    optimizers and similar wrappers keep the optimizer they wrap in ``.optimizer``."""
    for _ in range(depth):
        inner = getattr(optimizer, "optimizer", None)
        if inner is None or inner is optimizer:
            break
        optimizer = inner
    return optimizer


def known_state_floats(optimizer: Any) -> int | None:
    """Float32 state values per parameter element of a known optimizer class (None: not known).

    Adam family (``exp_avg``, ``exp_avg_sq``; Adamax ``exp_inf``): 2; ``SGD``: 1 with momentum, else 0;
    ``Adagrad``: 1 (``sum``); ``RMSprop``: 1 (``square_avg``) + 1 with momentum + 1 when centered.
    """
    name = type(optimizer).__name__
    groups = getattr(optimizer, "param_groups", None) or []
    if name in ADAM_FAMILY:
        return 2
    if name == "SGD":
        return int(any(g.get("momentum", 0) for g in groups))
    if name == "Adagrad":
        return 1
    if name == "RMSprop":
        return 1 + int(any(g.get("momentum", 0) for g in groups)) + int(any(g.get("centered") for g in groups))
    return None


def state_bytes_per_element(optimizer: Any) -> float | None:
    """Bytes of optimizer state per trainable parameter element, or None when they cannot be told.

    Read from the innermost optimizer's ``state`` (parameter → its state tensors, as torch keeps it; no
    ``state_dict()``; duck-typed, no torch import): the bytes of the state tensors shaped like their
    parameter (``exp_avg``, ``momentum_buffer``; scalars such as Adam's ``step`` are left out) over the
    elements of those parameters. Under DeepSpeed ZeRO these are this process's flat partitions: the ratio holds for the
    whole model. With no state yet (before the first step), :func:`known_state_floats` × 4 bytes.
    """
    optimizer = innermost_optimizer(optimizer)
    state = getattr(optimizer, "state", None)
    elements, nbytes = 0, 0
    if isinstance(state, Mapping):
        for param, entry in state.items():
            if not isinstance(entry, Mapping) or not hasattr(param, "numel"):
                continue
            elements += param.numel()
            nbytes += sum(
                t.numel() * t.element_size()
                for t in entry.values()
                if hasattr(t, "element_size") and getattr(t, "shape", None) == param.shape
            )
    if elements:
        return nbytes / elements
    floats = known_state_floats(optimizer)
    return None if floats is None else floats * FLOAT32_BYTES


def checkpoint_bytes_estimate(
    params: Iterable[Any], optimizer: Any = None, adapters_only: bool = False, shards: int = 1
) -> int | None:
    """About the bytes of one checkpoint: ``shards · (Σ_saved n_p b_p + s · Σ_trainable n_p)``.

    ``n_p``: parameter ``p``'s element count, its ``ds_numel`` under DeepSpeed ZeRO-3 (whose partitioned
    parameters hold 0 elements locally; FSDP2's DTensors report their full count too); ``b_p``: bytes per
    element; saved: every parameter, or only the trainable ones with ``adapters_only`` (PEFT saves its
    adapters); ``s``: optimizer state bytes per trainable element (:func:`state_bytes_per_element`; 0
    without an optimizer); ``shards``: FSDP1's flat parameters hold 1/``shards`` of the model each.
    None when the optimizer's state cannot be told. A checkpoint also holds the RNG and trainer state
    (kilobytes); DeepSpeed keeps a float32 master copy besides 16-bit weights (not counted).
    """
    per_element = 0.0 if optimizer is None else state_bytes_per_element(optimizer)
    if per_element is None:
        return None
    saved, trainable = 0, 0
    for p in params:
        n = int(getattr(p, "ds_numel", p.numel()))
        if p.requires_grad:
            trainable += n
        if p.requires_grad or not adapters_only:
            saved += n * p.element_size()
    return round(shards * (saved + per_element * trainable))
