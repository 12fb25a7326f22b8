"""Checkpoints of a training run: which are complete, and write errors named in one line.

Core, imports nothing heavy: the trainer glue (its checkpoint save) and the run folder
(``--resume``) both use it. A checkpoint is complete when it holds
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
from pathlib import Path
from typing import Iterator

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
    sizes = ", ".join(part for part in (
        f"needs about {_mb(needed)}" if needed else "", f"{_mb(free)} free there" if free is not None else "") if part)
    fix = "free space" if code in _FULL_ERRNOS else "make it writable"
    kept = f"; the last complete checkpoint, {last_complete}, is intact: {fix} and continue with --resume" \
        if last_complete else ""
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
