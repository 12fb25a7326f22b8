"""Output files: checked before the work that fills them, written whole or not at all.

:func:`check_output_file` runs before any scoring or sampling, so a path that can never be
written (a folder, a missing folder, a read-only place) fails in a second, not after the
work. :func:`write_atomic` writes to a temporary file in the same folder and renames it over
the target, so a full disk or a crash leaves the old file (or none), never a half-written one.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from .errors import RLVRError, shown


class OutputError(RLVRError):
    """An output file that cannot be written: the message names it and says why."""


def is_main_process() -> bool:
    """Whether this process writes the shared files: rank 0 of ``accelerate launch`` / ``torchrun`` /
    the DeepSpeed launcher (which all set ``RANK``), or a single process. Read from the environment,
    so it holds before any process group exists and imports nothing."""
    return os.environ.get("RANK", "0") == "0"


def check_output_file(path: str | Path, what: str = "output file") -> Path:
    """Fail now, naming ``path``, if a file cannot be created or replaced there."""
    p = Path(path)
    name = shown(str(path), 300)
    if p.is_dir():
        raise OutputError(f"{what} {name} is a folder; give a file path")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        raise OutputError(f"{what} {name}: folder {shown(str(parent), 300)} does not exist")
    if not parent.is_dir():
        raise OutputError(f"{what} {name}: {shown(str(parent), 300)} is not a folder")
    try:
        probe = tempfile.NamedTemporaryFile(dir=parent, prefix=f".{p.name}.", suffix=".probe", delete=False)
        probe.close()
        os.unlink(probe.name)
    except OSError as exc:
        raise OutputError(f"{what} {name} cannot be written: {_reason(exc)}") from exc
    if p.exists() and not os.access(p, os.W_OK):
        raise OutputError(f"{what} {name} exists and is read-only")
    return p


def write_atomic(path: str | Path, chunks: Iterable[str], what: str = "output file") -> None:
    """Write ``chunks`` (UTF-8) to ``path`` through a temporary file renamed over it (:func:`save_atomic`)."""

    def save(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())

    save_atomic(path, save, what)


def save_atomic(path: str | Path, save: Callable[[str], None], what: str = "output file") -> None:
    """``save(temporary_path)`` (e.g. a figure's ``savefig``), then the file renamed to ``path``: never half
    written; a full disk or another ``OSError`` is one :class:`OutputError` naming ``path``, nothing left there."""
    p = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=p.parent if str(p.parent) else ".", prefix=f".{p.name}.", suffix=".tmp")
        os.close(fd)
    except OSError as exc:
        raise OutputError(f"{what} {shown(str(path), 300)} could not be written: {_reason(exc)}") from exc
    try:
        save(tmp)
        os.chmod(tmp, _mode(p))
        os.replace(tmp, p)
    except OSError as exc:
        _remove(tmp)
        raise OutputError(
            f"{what} {shown(str(path), 300)} could not be written: {_reason(exc)}; nothing was written there"
        ) from exc
    except BaseException:
        _remove(tmp)
        raise


def _mode(path: Path) -> int:
    """The permissions the file would get from ``open()``: the old file's, else 0o666 minus the umask."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "no space left on the device"
    return exc.strerror or type(exc).__name__
