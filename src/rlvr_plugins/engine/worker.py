"""The worker child: a fresh interpreter that loads reward functions and scores items, reporting after each.

It runs :func:`worker_main` (started by :mod:`~rlvr_plugins.engine.pool`) and speaks to the parent
over one socket in :class:`Message` tuples.
"""

from __future__ import annotations

import enum
import logging
import os
import pickle
import signal
import sys
import traceback
import warnings
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from .calls import call
from .tree import become_subreaper
from .values import ERROR, TRACEBACK_SEP, Outcome, describe

_LOG_CHARS = 2000


class Message(str, enum.Enum):
    """The first field of every message; the fields after it are listed per kind.

    A message is a plain tuple with the kind's string value first: an enum member would pickle
    as a call into this module, about ten times slower than the tuple it tags.
    """

    # parent -> worker
    LOAD = "fn"
    """``(name, key, pickled function, sys.path)``: load a function under ``name``."""
    RUN = "run"
    """``(name, [(index, pickled item), ...])``: score a batch with the function loaded as ``name``."""
    # worker -> parent
    READY = "ready"
    """``(pid,)``: started."""
    LOADED = "loaded"
    """``(name, key, error or None)``: a ``LOAD`` done."""
    RESULT = "r"
    """``(index, outcome, payload[, logs])``: one item scored (``outcome`` an ``Outcome`` value)."""
    UNDECODABLE = "undecodable"
    """``(error,)``: a message the worker could not unpickle (a ``RUN``: its whole batch is lost)."""
    RETIRE = "retire"
    """``()``: after an item's ``RESULT``, the worker ran out of memory and exits; the parent replaces it
    and sends the items it had not reported to the new one."""


MESSAGES = {kind.value: kind for kind in Message}
"""``Message(value)`` as a dict lookup (the enum call costs ~0.5 us, once per item in the parent)."""
_RESULT = Message.RESULT.value  # sent once per item: a module global, not the enum attribute (see values.OK)


def _send(conn: Connection, kind: Message, *fields: Any) -> None:
    conn.send((kind.value, *fields))


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except Exception:
            pass
    if os.getppid() != parent_pid:
        os._exit(0)


def _limit_memory(megabytes: int) -> None:
    import resource

    limit = int(megabytes) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def out_of_memory(outcome: Outcome, payload: Any) -> bool:
    """Whether an item's call ended in ``MemoryError``: the process may stay out of memory (a cache
    the reward keeps, a fragmented heap under ``memory_limit_mb``), so it is replaced."""
    return outcome is ERROR and str(payload).split(TRACEBACK_SEP, 1)[0].split(":", 1)[0] == "MemoryError"


def _call_pickled(fn: Callable[..., Any], blob: bytes) -> tuple[Outcome, Any, list[tuple] | None]:
    """:func:`~rlvr_plugins.engine.calls.call` on an item pickled on its own, so that an item that cannot be
    loaded here (``MemoryError`` under ``memory_limit_mb``) fails alone, not with its batch."""
    try:
        item = pickle.loads(blob)
    except BaseException as exc:
        return ERROR, f"the item cannot be loaded in the worker: {describe(exc)}", None
    return call(fn, item)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


def _bound_log_records(limit: int = _LOG_CHARS) -> None:
    """Cut every log record made in this process (any logger, any handler, ``warnings`` too) to
    ``limit`` characters of message, traceback and stack: a library that logs its whole input
    (math-verify on a parse timeout logs the 1 MB completion) prints a bounded line."""
    make = logging.getLogRecordFactory()

    def bounded_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:
            return record  # logging reports the broken format string itself
        record.msg, record.args = _clip(message, limit), None
        if record.exc_info and not record.exc_text:
            record.exc_text = _clip(logging.Formatter().formatException(record.exc_info), limit)
        if record.stack_info:
            record.stack_info = _clip(record.stack_info, limit)
        return record

    logging.setLogRecordFactory(bounded_record)
    format_warning = warnings.formatwarning
    warnings.formatwarning = lambda *args, **kwargs: _clip(format_warning(*args, **kwargs), limit) + "\n"


class _ClippedLines:
    """A text stream that passes at most ``limit`` characters of each line on to ``stream``,
    then says how many it left out: ``print`` of a 1 MB completion from a plugin or a library
    in a worker is one bounded line."""

    def __init__(self, stream: Any, limit: int = _LOG_CHARS) -> None:
        self._stream, self._limit, self._column, self._dropped = stream, limit, 0, 0

    def write(self, text: str) -> int:
        out = []
        parts = text.split("\n")
        for i, part in enumerate(parts):
            keep = part[: max(self._limit - self._column, 0)]
            out.append(keep)
            self._column += len(keep)
            self._dropped += len(part) - len(keep)
            if i < len(parts) - 1:
                if self._dropped:
                    out.append(f"... ({self._dropped} more characters)")
                out.append("\n")
                self._column = self._dropped = 0
        self._stream.write("".join(out))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _load_fn(payload: bytes, paths: list[str]) -> Callable[..., Any]:
    sys.path[:0] = [p for p in paths if p not in sys.path]
    fn = pickle.loads(payload)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    return fn


def _serve(conn: Connection) -> None:
    """Answer the parent's messages until it closes the socket."""
    fns: dict[str, Callable[..., Any]] = {}
    while True:
        data = conn.recv_bytes()
        try:
            message = pickle.loads(data)
        except Exception as exc:
            _send(conn, Message.UNDECODABLE, describe(exc))
            continue
        kind = MESSAGES.get(message[0])
        if kind is Message.RUN:
            fn = fns[message[1]]
            for index, blob in message[2]:
                outcome, payload, logs = _call_pickled(fn, blob)
                result = (_RESULT, index, outcome._value_, payload)
                conn.send(result if logs is None else (*result, logs))
                if out_of_memory(outcome, payload):
                    _send(conn, Message.RETIRE)
                    return
        elif kind is Message.LOAD:
            _, name, key, payload, paths = message
            try:
                fns[name] = _load_fn(payload, paths)
                error = None
            except BaseException as exc:
                error = describe(exc)
            _send(conn, Message.LOADED, name, key, error)
        else:
            return


def worker_main(fd: int, parent_pid: int, memory_limit_mb: int | None) -> None:
    """Entry point of a worker process: load functions, score batches, report per item."""
    _die_with_parent(parent_pid)
    become_subreaper()  # orphans of what a reward starts stay below this process, where close() finds them
    _bound_log_records()
    sys.stdout, sys.stderr = _ClippedLines(sys.stdout), _ClippedLines(sys.stderr)
    os.set_inheritable(fd, False)
    conn = Connection(fd)
    try:
        if memory_limit_mb:
            _limit_memory(memory_limit_mb)
        _send(conn, Message.READY, os.getpid())
        _serve(conn)
        status = 0
    except (EOFError, OSError):
        status = 0
    except BaseException:
        traceback.print_exc()
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(status)
