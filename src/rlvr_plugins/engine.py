"""The reward engine: run plugin scoring functions with a hard per-item deadline.

Why processes
    math-verify's own timeout is ``signal.alarm``, which only works in the main thread,
    and one sympy call on adversarial LaTeX (``2^{2^{2^{2^{2^{100}}}}}``, huge factorials)
    or one big-integer operation (``10**(10**8)``) holds the GIL inside C code for minutes.
    A thread cannot be stopped, and while it holds the GIL a watchdog thread in the same
    process cannot even run. So every call runs in a persistent worker process, and the
    *parent* enforces the deadline by SIGKILLing the worker's process group (the worker is
    a session leader, so anything the plugin forked dies with it), then starts a fresh one.
    A plugin that calls ``signal.alarm(0)``, installs its own SIGALRM handler or raises a
    ``BaseException`` cannot defeat this; inside the worker math-verify's own alarm still
    works (the plugin runs in the worker's main thread).

Start method
    Workers are fresh interpreters started with ``subprocess`` (fork+exec of
    ``sys.executable -c "... _worker_main(fd, ...)"``), talking over an inherited
    socketpair wrapped in ``multiprocessing.connection.Connection``. Measured on the
    2-core dev box: a bare worker is ready in ~20 ms (multiprocessing ``spawn``: ~65 ms,
    ``forkserver``: ~20 ms, ``fork``: ~4 ms); importing math-verify/sympy costs ~0.7-1 s in
    every method unless the parent already imported it and forks. ``fork`` is rejected
    because the trainer process runs torch/OpenMP threads (and score() may be called from
    any thread): forking a multi-threaded process can deadlock the child on a lock held
    by a thread that does not exist there. ``forkserver`` keeps an extra shared server
    process alive and, like ``spawn``, re-imports the parent's ``__main__`` (a training
    script) in every worker. Plain exec lets us set the child's environment
    (``OMP_NUM_THREADS=1`` and friends, so torch in a worker does not oversubscribe the
    cores; ``torch.set_num_threads(1)`` is also called if the plugin imports torch) and
    start it in a new session without a ``preexec_fn``. The cost: a replaced worker
    pays the plugin's import time again (~1 s for math-verify) -- only after a timeout
    or crash, and only that worker; the others keep scoring. Workers are forked from one
    long-lived daemon thread, because ``PR_SET_PDEATHSIG`` (set in the worker so that it
    dies with the parent even when busy) fires when the *thread* that forked it exits.

POSIX only (tested on Linux). Functions reach the worker by pickle, by reference: a module-level function, an instance
of a module-level class, or a ``functools.partial`` of those, importable in a fresh
interpreter (the parent's ``sys.path`` is passed on). Functions defined in a script's
``__main__`` or a notebook cannot be loaded; use ``in_process=True`` for those. Each
distinct function (plugin name + hash of its pickle) is shipped to a worker once.

Dispatch and deadline
    Items are split into ``num_workers`` contiguous chunks, so completions of the same
    prompt (adjacent in GRPO batches) land on the same worker and a plugin's per-group
    ``lru_cache`` hits. A worker gets its chunk in batches of up to 32 items, with one
    more batch queued while it works (only if that batch is small enough to sit in the
    socket buffer, so a send never blocks on a busy worker). Each item is pickled on its
    own, and a batch holds at most 1 MiB of them unless one item alone is bigger (it then
    goes alone), so an item the worker cannot load (``MemoryError`` under
    ``memory_limit_mb``) fails alone, never its neighbours; an item over 256 MiB fails
    without being sent. A worker that runs out steals
    the tail half of the longest remaining chunk. The worker reports after every item;
    an item's deadline starts when the parent sends it to an idle worker or receives the
    result of the item before it, so an item always gets at least ``timeout_s`` and
    worker start-up or function loading is never counted against it. When the deadline
    passes, the item fails ("timeout after ...s"), the worker is killed, and its unstarted
    items go to the replacement. A worker that dies (``os._exit``, segfault, OOM kill)
    fails the item it was running. The parent reads each worker's socket in bulk (one
    ``read`` for all the results waiting) and waits on ``select.poll``; measured overhead
    is ~15-25 us/item (1,024 trivial items, 1 or 2 workers, busy 2-core box) against
    ~2 us/item in-process, and ~25-35 us/item with 50 KB items.

What is protected and what is not
    Protected: hangs, GIL-holding C code, exceptions of any kind, crashes, runaway
    memory (with ``memory_limit_mb``, ``RLIMIT_AS`` in the worker), stray SIGALRM games,
    orphans (workers are killed on ``close()``, when the engine is garbage-collected, at
    interpreter exit, and die with the parent through their closed socket and
    ``PR_SET_PDEATHSIG``), log floods (every log record made in a worker, from any logger,
    and every warning, is cut to 2,000 characters, and so is every line the worker writes
    to ``sys.stdout`` or ``sys.stderr``: math-verify logs its whole input on a parse
    timeout). Not protected: a plugin that deliberately escapes (double
    fork into a new session, writes to shared files), and anything with
    ``in_process=True``: that path calls ``fn`` in the calling process with no deadline and
    no isolation (for debugging and rewards declared cheap); it still validates values and
    counts consecutive failures.

Values: a real number (bool, int, float, numpy or 0-d torch value) becomes a float; ``None``
means "does not apply" (NaN, not failed, and it resets the consecutive-failure count like
any successful call); anything else is a plugin bug (:class:`RewardContractError`). NaN and
infinities are bugs too, and so is a value larger in magnitude than ``max_abs_value`` when it is
set (the run's engines set it, see ``rlvr_plugins.rewards.MAX_ABS_REWARD``: a float64 ``1e30`` is
finite, but it swamps the group statistics and overflows them once squared in float32), unless
``nonfinite="mask"`` (then failed). A contract error or
too many consecutive failures stops the call at once: workers still busy with its items
are killed and replaced. Consecutive failures are counted per plugin name, across calls,
in the order results arrive; the count restarts after :class:`RewardPluginFailing`.

Exceptions (``on_error``)
    ``"mask"`` (the engine's default): an exception fails its item. ``"raise"``: the first
    one stops the call (in-process the function's own exception with a note naming the
    reward and the item; from a worker :class:`RewardFunctionError`). Timeouts and crashes
    are failed items under both: they are what the isolation exists for.

Async functions and log callbacks
    An ``async def`` function (or one returning an awaitable) is awaited on a per-process
    event loop in a daemon thread; in-process, every item of a call is awaited at once
    (``asyncio.gather``). An item that names log callbacks under :data:`LOG_CALLBACKS` gets
    recording ``log_metric`` / ``log_extra`` functions; their calls come back per item in
    ``ScoreResult.logs`` (from a worker, inside the item's result message).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import hashlib
import inspect
import logging
import math
import multiprocessing
import numbers
import os
import pickle
import queue
import reprlib
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
import warnings
import weakref
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Callable, Mapping, Sequence

from .errors import PluginContractError, RLVRError

__all__ = ["RewardContractError", "RewardEngine", "RewardFunctionError", "RewardPluginFailing", "ScoreResult"]

logger = logging.getLogger("rlvr_plugins.engine")
traceback_logger = logging.getLogger("rlvr_plugins.engine.traceback")
"""The traceback of each failed item, at DEBUG (``rlvr -v`` shows it), captured where the reward ran."""
TRACEBACK_SEP = "\x00traceback\x00"

_BATCH_SIZE = 32
_QUEUED_BATCH_MAX_BYTES = 32 * 1024
_BATCH_MAX_BYTES = 1024 * 1024
_STARTUP_TIMEOUT_S = 120.0
_MAX_START_FAILURES = 3
_FRAME = struct.Struct("!i")  # multiprocessing.connection's length prefix; worker messages stay far below 2 GiB
_SAMPLE_CHARS = 300
_ERROR_CHARS = 300
_LOG_CHARS = 2000
_MAX_ITEM_BYTES = 256 * 1024 * 1024
_SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
_VALID_VALUES = "a real number (int, float, bool, numpy or 0-d torch scalar) or None when the reward does not apply"


@dataclass(frozen=True)
class ScoreResult:
    values: list[float]
    failed: list[bool]
    errors: list[str | None]
    logs: list[list[tuple]] | None = None
    """Per item, the ``log_metric`` / ``log_extra`` calls it made (see ``LOG_CALLBACKS``); None when none asked."""


class RewardContractError(PluginContractError):
    """A plugin returned something that is not a reward (or its function cannot be loaded)."""


class RewardPluginFailing(RLVRError, RuntimeError):
    """A plugin failed on too many consecutive items."""


class RewardFunctionError(RLVRError, RuntimeError):
    """A reward function raised in a worker process, with ``on_error="raise"`` (the message names it and the item)."""


# ---------------------------------------------------------------- shared by both sides


IN_PROCESS_HINT = ("run rewards in the trainer's process, without workers or deadlines (config: "
                   "engine: {in_process: true}; Python: Engines(in_process=True))")


def _safe(text: Any, limit: int = _ERROR_CHARS) -> str:
    """ASCII-only, control characters and lone surrogates escaped, truncated."""
    try:
        out = ascii(text if isinstance(text, str) else str(text))[1:-1]
    except BaseException:
        out = "<unprintable>"
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _describe(exc: BaseException) -> str:
    try:
        message = str(exc)
    except BaseException:
        message = "<unprintable message>"
    return _safe(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)


def _with_traceback(exc: BaseException) -> str:
    """An error payload: the one-line description, then (after :data:`TRACEBACK_SEP`) the formatted traceback."""
    try:
        text = "".join(traceback.format_exception(exc))
    except BaseException:
        text = "<traceback unavailable>"
    return _describe(exc) + TRACEBACK_SEP + text


def _describe_value(value: Any) -> str:
    try:
        text = reprlib.repr(value)
    except BaseException:
        text = "<unrepresentable>"
    return f"{_safe(text, 120)} (type {type(value).__module__}.{type(value).__qualname__})"


def _convert(value: Any) -> tuple[str, Any]:
    """("ok", float) for a number (possibly non-finite), ("none", None), or ("bad", description)."""
    if value is None:
        return "none", None
    if type(value) is float:  # the common case, without the ABC checks below
        return "ok", value
    plain = value
    if not isinstance(value, (bool, int, float)) and getattr(value, "shape", None) == () and hasattr(value, "item"):
        try:
            plain = value.item()
        except BaseException:
            return "bad", _describe_value(value)
    if isinstance(plain, numbers.Real):
        try:
            return "ok", float(plain)
        except OverflowError:
            return "ok", math.inf if plain > 0 else -math.inf
        except BaseException:
            pass
    return "bad", _describe_value(value)


LOG_CALLBACKS = "__rlvr_log_callbacks__"
"""Item key naming the log callbacks (``log_metric``, ``log_extra``) the function takes; the engine supplies them.

Calls are recorded per item as ``("metric", name, value)`` / ``("extra", column, value)`` and returned in
``ScoreResult.logs``, from worker processes as from the calling one, so the caller replays them in its process."""


def _with_log_callbacks(item: Mapping[str, Any]) -> tuple[dict[str, Any], list[tuple] | None]:
    """The keyword arguments of one call: the item, plus recording log callbacks when it asks for them."""
    wanted = item.get(LOG_CALLBACKS)
    if not wanted:
        return dict(item), None
    logs: list[tuple] = []
    recorders = {"log_metric": lambda name, value: logs.append(("metric", name, value)),
                 "log_extra": lambda column, value: logs.append(("extra", column, value))}
    kwargs = {k: v for k, v in item.items() if k != LOG_CALLBACKS}
    kwargs.update({name: recorders[name] for name in wanted})
    return kwargs, logs


def _invoke(fn: Callable[..., Any], item: Mapping[str, Any]) -> tuple[Any, list[tuple] | None]:
    """``fn(**item)`` (awaited when it returns an awaitable), with the log callbacks the item asks for."""
    kwargs, logs = _with_log_callbacks(item)
    return _resolve(fn(**kwargs)), logs


_PLAIN_RESULTS = (float, int, bool, type(None))  # never awaitable: skip the ABC check


def _resolve(value: Any) -> Any:
    return value if type(value) in _PLAIN_RESULTS else _run_coroutine(value) if inspect.isawaitable(value) else value


def _call(fn: Callable[..., Any], item: Mapping[str, Any]) -> tuple[str, Any, list[tuple] | None]:
    try:
        value, logs = _invoke(fn, item)
    except BaseException as exc:
        return "error", _with_traceback(exc), None
    try:
        return (*_convert(value), logs)
    except BaseException as exc:
        return "bad", f"an unconvertible value ({_describe(exc)})", logs


_loop_lock = threading.Lock()
_loop: tuple[int, asyncio.AbstractEventLoop] | None = None


def _event_loop() -> asyncio.AbstractEventLoop:
    """One event loop per process, running in a daemon thread (as TRL runs async rewards)."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop[0] != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="rlvr-engine-async", daemon=True).start()
            _loop = (os.getpid(), loop)
        return _loop[1]


def _run_coroutine(coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(_as_coroutine(coro), _event_loop()).result()


async def _as_coroutine(awaitable: Any) -> Any:
    return await awaitable


async def _gather(fn: Callable[..., Any], items: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Every item of an async reward at once (``asyncio.gather``, like TRL): ``(value, logs)`` or the exception."""

    async def one(item):
        kwargs, logs = _with_log_callbacks(item)
        return await fn(**kwargs), logs

    return await asyncio.gather(*(one(item) for item in items), return_exceptions=True)


def _settled(outcome: Any) -> tuple[Any, list[tuple] | None]:
    """A result of :func:`_gather`: the ``(value, logs)`` pair, or raise the exception it holds."""
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def is_async_callable(fn: Any) -> bool:
    """True for an ``async def`` function, a partial of one, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


# ---------------------------------------------------------------- worker side


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


def _call_pickled(fn: Callable[..., Any], blob: bytes) -> tuple[str, Any, list[tuple] | None]:
    """:func:`_call` on an item pickled on its own, so that an item that cannot be loaded here
    (``MemoryError`` under ``memory_limit_mb``) fails alone, not with its batch."""
    try:
        item = pickle.loads(blob)
    except BaseException as exc:
        return "error", f"the item cannot be loaded in the worker: {_describe(exc)}", None
    return _call(fn, item)


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


def _worker_main(fd: int, parent_pid: int, memory_limit_mb: int | None) -> None:
    """Entry point of a worker process: load functions, score batches, report per item."""
    _die_with_parent(parent_pid)
    _bound_log_records()
    sys.stdout, sys.stderr = _ClippedLines(sys.stdout), _ClippedLines(sys.stderr)
    os.set_inheritable(fd, False)
    conn = Connection(fd)
    fns: dict[str, Callable[..., Any]] = {}
    try:
        if memory_limit_mb:
            _limit_memory(memory_limit_mb)
        conn.send(("ready", os.getpid()))
        while True:
            data = conn.recv_bytes()
            try:
                message = pickle.loads(data)
            except Exception as exc:
                conn.send(("undecodable", _describe(exc)))
                continue
            if message[0] == "run":
                fn = fns[message[1]]
                for index, blob in message[2]:
                    kind, payload, logs = _call_pickled(fn, blob)
                    conn.send(("r", index, kind, payload) if logs is None else ("r", index, kind, payload, logs))
            elif message[0] == "fn":
                _, name, key, payload, paths = message
                try:
                    fns[name] = _load_fn(payload, paths)
                    error = None
                except BaseException as exc:
                    error = _describe(exc)
                conn.send(("loaded", name, key, error))
            else:
                break
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


# ---------------------------------------------------------------- parent side


class _Spawner:
    """Forks every worker from one daemon thread that lives as long as the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue | None = None
        self._pid = -1

    def popen(self, args: list[str], **kwargs: Any) -> subprocess.Popen:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._queue().put((future, args, kwargs))
        try:
            return future.result()
        except BaseException:
            future.add_done_callback(_kill_unclaimed)
            raise

    def _queue(self) -> queue.SimpleQueue:
        with self._lock:
            if self._jobs is None or self._pid != os.getpid():
                self._jobs, self._pid = queue.SimpleQueue(), os.getpid()
                thread = threading.Thread(target=self._serve, args=(self._jobs,), name="rlvr-engine-spawner")
                thread.daemon = True
                thread.start()
            return self._jobs

    @staticmethod
    def _serve(jobs: queue.SimpleQueue) -> None:
        while True:
            future, args, kwargs = jobs.get()
            try:
                future.set_result(subprocess.Popen(args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)


def _kill_unclaimed(future: concurrent.futures.Future) -> None:
    """A worker started for a caller that was interrupted while waiting for it."""
    if future.exception() is None:
        proc = future.result()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()


_spawner = _Spawner()


def _exit_text(returncode: int | None) -> str:
    if returncode is None:
        return "worker process died"
    if returncode < 0:
        try:
            return f"worker process killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"worker process killed by signal {-returncode}"
    return f"worker process exited with code {returncode}"


class _Worker:
    """One worker process and what the parent knows about it."""

    def __init__(self, memory_limit_mb: int | None) -> None:
        self.memory_limit_mb = memory_limit_mb
        self.queue: collections.deque[int] = collections.deque()
        self.batches: collections.deque[collections.deque[int]] = collections.deque()
        self.prepared: tuple[list[int], bytes] | None = None
        self.proc: subprocess.Popen | None = None
        self.conn: Connection | None = None
        self.start()

    def start(self) -> None:
        parent_conn, child_conn = multiprocessing.Pipe(duplex=True)
        fd = child_conn.fileno()
        boot = (
            f"import sys; sys.path[:0] = {_parent_path()!r}; "
            f"from {__name__} import _worker_main; _worker_main({fd}, {os.getpid()}, {self.memory_limit_mb!r})"
        )
        try:
            self.proc = _spawner.popen(
                [sys.executable, "-c", boot], pass_fds=(fd,), start_new_session=True,
                stdin=subprocess.DEVNULL, env={**os.environ, **_SINGLE_THREAD_ENV},
            )
        finally:
            child_conn.close()
        self.conn = parent_conn
        self.state = "starting"
        self.deadline: float | None = time.monotonic() + _STARTUP_TIMEOUT_S
        self.loaded: dict[str, str] = {}
        self.inbox = bytearray()
        self.batches.clear()

    def kill(self) -> int | None:
        """SIGKILL the worker's process group, reap it, return its exit status."""
        if self.proc is None:
            return None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.kill()
        except OSError:
            pass
        self.conn.close()
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None

    def receive(self) -> tuple[list[tuple], bool]:
        """Read what the worker has sent (one read, many messages) -> (messages, still alive)."""
        try:
            data = os.read(self.conn.fileno(), 1 << 20)
        except OSError:
            data = b""
        self.inbox += data
        messages, offset = [], 0
        while len(self.inbox) - offset >= 4:
            (size,) = _FRAME.unpack_from(self.inbox, offset)
            if len(self.inbox) - offset - 4 < size:
                break
            messages.append(pickle.loads(self.inbox[offset + 4 : offset + 4 + size]))
            offset += 4 + size
        del self.inbox[:offset]
        return messages, bool(data)

    def send(self, message: Any) -> bool:
        data = message if isinstance(message, bytes) else pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        try:
            self.conn.send_bytes(data)
            return True
        except OSError:
            return False

    def requeue(self) -> None:
        """Put every item sent or prepared, but not reported, back at the head of the queue."""
        if self.prepared is not None:
            self.queue.extendleft(reversed(self.prepared[0]))
            self.prepared = None
        for batch in reversed(self.batches):
            self.queue.extendleft(reversed(batch))
        self.batches.clear()

    @property
    def busy(self) -> bool:
        return bool(self.batches)


def _parent_path() -> list[str]:
    cwd = os.getcwd()
    return [os.path.abspath(p) if p else cwd for p in sys.path]


def _shutdown(workers: list[_Worker]) -> None:
    for worker in workers:
        worker.kill()
        worker.proc = None


def _item_sample(item: Any) -> str:
    try:
        clipped = {k: v[:_SAMPLE_CHARS] if isinstance(v, (str, bytes)) else v for k, v in dict(item).items()}
        text = ascii(clipped)
    except BaseException:
        return "<unrepresentable item>"
    return text if len(text) <= _SAMPLE_CHARS else text[: _SAMPLE_CHARS - 3] + "..."


class _Tally:
    """Results of one score() call, plus the engine-wide counters it updates."""

    def __init__(self, engine: RewardEngine, name: str, items: list[Mapping[str, Any]]) -> None:
        self.engine, self.name, self.items = engine, name, items
        n = len(items)
        self.values, self.failed, self.errors = [math.nan] * n, [False] * n, [None] * n
        self.logs: list[list[tuple]] | None = None
        self.remaining = n
        self.abort: BaseException | None = None

    def record(self, index: int, kind: str, payload: Any, logs: list[tuple] | None = None) -> None:
        if kind == "error":
            payload, _, trace = str(payload).partition(TRACEBACK_SEP)
            if trace:
                traceback_logger.debug("reward %s, item %d: %s", _safe(self.name), index, trace.rstrip())
        self.remaining -= 1
        self.engine._stats["calls"] += 1
        if logs:
            if self.logs is None:
                self.logs = [[] for _ in self.items]
            self.logs[index] = logs
        if kind == "error" and self.engine.on_error == "raise":
            self.abort = self.abort or RewardFunctionError(
                f"reward plugin {self.name!r} raised on item {index}: {payload} (engine on_error='raise'; "
                "on_error='mask' scores such items as failed instead)")
            return
        limit = self.engine.max_abs_value
        if kind == "ok" and math.isfinite(payload) and (limit is None or abs(payload) <= limit):
            self._succeed(index, payload)
        elif kind == "none":
            self._succeed(index, math.nan)
        elif kind == "error":
            self.fail(index, payload)
        elif kind == "ok" and self.engine.nonfinite == "mask":
            what = "non-finite" if not math.isfinite(payload) else f"out-of-range (max_abs_value={limit:g})"
            self.fail(index, f"{what} value {payload!r}")
        else:
            self.abort = self.abort or self._contract_error(index, kind, payload)

    def lost(self, index: int, error: str, timeout: bool = False) -> None:
        """An item that produced no result of its own (timeout, crash, undecodable)."""
        self.remaining -= 1
        self.engine._stats["calls"] += 1
        self.fail(index, error, timeout)

    def fail(self, index: int, error: str, timeout: bool = False) -> None:
        engine = self.engine
        self.failed[index], self.errors[index] = True, error
        engine._stats["failures"] += 1
        engine._stats["timeouts"] += timeout
        logger.warning("reward %s failed on item %d: %s; item: %s", _safe(self.name), index, error,
                       _item_sample(self.items[index]))
        recent = engine._recent_errors.setdefault(self.name, collections.deque(maxlen=3))
        recent.append(f"item {index}: {error}")
        count = engine._consecutive[self.name] = engine._consecutive.get(self.name, 0) + 1
        if count >= engine.max_consecutive_failures and self.abort is None:
            engine._consecutive[self.name] = 0
            self.abort = RewardPluginFailing(
                f"reward plugin {self.name!r} failed on {count} consecutive items "
                f"(max_consecutive_failures={engine.max_consecutive_failures}); last errors: " + "; ".join(recent)
            )

    def _succeed(self, index: int, value: float) -> None:
        self.values[index] = value
        self.engine._consecutive[self.name] = 0

    def _contract_error(self, index: int, kind: str, payload: Any) -> RewardContractError:
        if kind == "ok":
            limit = self.engine.max_abs_value
            bound = "" if limit is None else f" and at most {limit:g} in magnitude (max_abs_value)"
            return RewardContractError(
                f"reward plugin {self.name!r} returned {payload!r} for item {index}: rewards must be finite{bound}; "
                f"return {_VALID_VALUES}, or set nonfinite='mask' to count such values as failed items"
            )
        return RewardContractError(
            f"reward plugin {self.name!r} returned {payload} for item {index}; expected {_VALID_VALUES}"
        )

    def result(self) -> ScoreResult:
        return ScoreResult(values=self.values, failed=self.failed, errors=self.errors, logs=self.logs)


class _Dispatch:
    """One score() call over the worker processes: feed, wait, collect, enforce deadlines."""

    def __init__(self, engine: RewardEngine, tally: _Tally, key: str, payload: bytes) -> None:
        self.engine, self.tally, self.key, self.payload = engine, tally, key, payload
        self.workers = engine._workers
        self.timeout_s = engine.timeout_s
        self.blobs: dict[int, bytes] = {}

    def run(self) -> ScoreResult:
        self._assign()
        try:
            while self.tally.remaining and self.tally.abort is None:
                for worker in self.workers:
                    self._feed(worker)
                if self.tally.remaining and self.tally.abort is None:  # _feed can fail the last items
                    self._wait()
        except BaseException:
            self._kill_busy()
            raise
        if self.tally.abort is not None:
            self._kill_busy()
            raise self.tally.abort
        return self.tally.result()

    def _assign(self) -> None:
        n, k = len(self.tally.items), len(self.workers)
        for w, worker in enumerate(self.workers):
            worker.queue = collections.deque(range(n * w // k, n * (w + 1) // k))

    def _feed(self, worker: _Worker) -> None:
        if worker.state != "ready":
            return
        name = self.tally.name
        if worker.loaded.get(name) != self.key:
            self._load(worker)
            return
        if not worker.queue and not worker.busy and worker.prepared is None:
            self._steal(worker)
        while (worker.queue or worker.prepared) and len(worker.batches) < 2:
            prepared = worker.prepared or self._prepare(worker)
            if prepared is None:
                continue
            batch, data = prepared
            if worker.busy and len(data) > _QUEUED_BATCH_MAX_BYTES:
                worker.prepared = batch, data
                return
            worker.prepared = None
            if not worker.send(data):
                worker.prepared = batch, data
                self._died(worker)
                return
            if not worker.busy:
                worker.deadline = time.monotonic() + self.timeout_s
            worker.batches.append(collections.deque(batch))

    def _prepare(self, worker: _Worker) -> tuple[list[int], bytes] | None:
        """The next batch: up to ``_BATCH_SIZE`` items, each pickled on its own, no more than
        ``_BATCH_MAX_BYTES`` together unless one item alone is bigger (it goes alone), so
        that an item that breaks the worker (memory) takes no neighbour with it. An item over
        ``_MAX_ITEM_BYTES`` fails here without being sent. None when every item taken failed so."""
        batch, blobs, size = [], [], 0
        while worker.queue and len(batch) < _BATCH_SIZE:
            index = worker.queue[0]
            blob = self.blobs.pop(index, None) or self._pickle(index)
            if blob is None:
                worker.queue.popleft()
                continue
            if batch and size + len(blob) > _BATCH_MAX_BYTES:
                self.blobs[index] = blob
                break
            worker.queue.popleft()
            batch.append(index)
            blobs.append((index, blob))
            size += len(blob)
        if not batch:
            return None
        return batch, pickle.dumps(("run", self.tally.name, blobs), pickle.HIGHEST_PROTOCOL)

    def _pickle(self, index: int) -> bytes | None:
        try:
            blob = pickle.dumps(self.tally.items[index], pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            self.tally.lost(index, f"the item cannot be sent to a worker: {_describe(exc)}")
            return None
        if len(blob) > _MAX_ITEM_BYTES:
            self.tally.lost(index, f"the item is {len(blob)} bytes; the reward engine takes items of at most "
                                   f"{_MAX_ITEM_BYTES} bytes")
            return None
        return blob

    def _load(self, worker: _Worker) -> None:
        worker.state = "loading"
        worker.deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        if not worker.send(("fn", self.tally.name, self.key, self.payload, _parent_path())):
            self._died(worker)

    def _steal(self, worker: _Worker) -> None:
        donor = max(self.workers, key=lambda w: len(w.queue))
        take = (len(donor.queue) + 1) // 2
        if take:
            stolen = [donor.queue.pop() for _ in range(take)]
            worker.queue.extend(reversed(stolen))

    def _wait(self) -> None:
        deadlines = [w.deadline for w in self.workers if w.deadline is not None]
        if not deadlines:
            raise RuntimeError("reward engine stalled: items remain but no worker is working on them")
        timeout = max(0.0, min(deadlines) - time.monotonic())
        poller = select.poll()
        by_fd = {w.conn.fileno(): w for w in self.workers}
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(math.ceil(timeout * 1000)):
            self._drain(by_fd[fd])
        now = time.monotonic()
        for worker in self.workers:
            if worker.deadline is not None and now >= worker.deadline and self._drain(worker, check=True):
                if worker.deadline is not None and now >= worker.deadline:
                    self._expired(worker)

    def _drain(self, worker: _Worker, check: bool = False) -> bool:
        """Handle the messages waiting from the worker; False if it died."""
        if check and not select.select([worker.conn.fileno()], [], [], 0)[0]:
            return True
        messages, alive = worker.receive()
        for message in messages:
            self._handle(worker, message)
        if not alive:
            self._died(worker)
        return alive

    def _handle(self, worker: _Worker, message: tuple) -> None:
        tag = message[0]
        if tag == "r" and worker.busy:
            batch = worker.batches[0]
            batch.popleft()
            if not batch:
                worker.batches.popleft()
            worker.deadline = time.monotonic() + self.timeout_s if worker.busy else None
            self.tally.record(*message[1:])
        elif tag == "undecodable" and worker.busy:
            batch = worker.batches.popleft()
            worker.deadline = time.monotonic() + self.timeout_s if worker.busy else None
            for index in batch:
                self.tally.lost(index, f"the worker cannot unpickle the item batch: {message[1]}")
        elif tag == "ready":
            worker.state, worker.deadline = "ready", None
            self.engine._start_failures = 0
        elif tag == "loaded":
            _, name, key, error = message
            worker.state, worker.deadline = "ready", None
            if error is None:
                worker.loaded[name] = key
            elif name == self.tally.name and key == self.key:
                self.tally.abort = self.tally.abort or self._load_error(error)

    def _load_error(self, error: str) -> RewardContractError:
        hint = " (it is defined in __main__, which workers do not import)" if b"__main__" in self.payload else ""
        return RewardContractError(
            f"reward plugin {self.tally.name!r}: its scoring function cannot be loaded in a worker process{hint}: "
            f"{error}. It must be importable: a module-level function or class instance, or a functools.partial "
            f"of one; or {IN_PROCESS_HINT}"
        )

    def _expired(self, worker: _Worker) -> None:
        if worker.busy:
            self._replace(worker, lambda status: f"timeout after {self.timeout_s:g}s", timeout=True)
        elif worker.state == "loading":
            self._replace(worker)
            self.tally.abort = self.tally.abort or self._load_error(f"timed out after {_STARTUP_TIMEOUT_S:g}s")
        else:
            self._start_failed(worker, f"not ready after {_STARTUP_TIMEOUT_S:g}s")

    def _died(self, worker: _Worker) -> None:
        if worker.busy:
            self._replace(worker, _exit_text)
        elif worker.state == "starting":
            self._start_failed(worker, None)
        else:
            state = worker.state
            status = self._replace(worker)
            if state == "loading":
                self.tally.abort = self.tally.abort or self._load_error(_exit_text(status))

    def _start_failed(self, worker: _Worker, reason: str | None) -> None:
        status = worker.kill()
        self.engine._start_failures += 1
        if self.engine._start_failures >= _MAX_START_FAILURES:
            self.tally.abort = self.tally.abort or RuntimeError(
                f"reward worker processes keep failing to start ({reason or _exit_text(status)}); "
                "check memory_limit_mb and that this Python can import rlvr_plugins"
            )
        self._restart(worker)

    def _replace(self, worker: _Worker, describe: Callable[[int | None], str] | None = None,
                 timeout: bool = False) -> int | None:
        """Kill the worker, fail its current item (if any), requeue the rest, start a new one."""
        status = worker.kill()
        current = worker.batches[0].popleft() if worker.busy else None
        worker.requeue()
        if current is not None:
            self.tally.lost(current, describe(status), timeout=timeout)
        self._restart(worker)
        return status

    def _restart(self, worker: _Worker) -> None:
        state = worker.state
        worker.start()
        if state != "starting":
            self.engine._stats["workers_restarted"] += 1

    def _kill_busy(self) -> None:
        for worker in self.workers:
            if worker.busy:
                worker.kill()
                self._restart(worker)
            worker.queue.clear()
            worker.prepared = None


ON_ERROR = ("mask", "raise")


class RewardEngine:
    """Scores reward plugins item by item, in worker processes, with a hard per-item deadline.

    ``on_error`` decides what an exception raised by the reward function does: ``"mask"`` (the
    default) fails that item (no score) and counts it towards ``max_consecutive_failures``;
    ``"raise"`` stops the call at the first one, as TRL does (in-process: the function's own
    exception, with a note naming the reward and the item; in a worker:
    :class:`RewardFunctionError`). Timeouts and worker crashes are failures of the engine's
    isolation, not of the function's logic: they are masked under both settings.
    """

    DEFAULT_TIMEOUT_S = 10.0

    def __init__(self, *, num_workers: int = 2, timeout_s: float = DEFAULT_TIMEOUT_S, max_consecutive_failures: int = 64,
                 nonfinite: str = "error", in_process: bool = False, memory_limit_mb: int | None = None,
                 max_abs_value: float | None = None, on_error: str = "mask") -> None:
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {list(ON_ERROR)}, got {on_error!r}")
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if max_consecutive_failures < 1:
            raise ValueError(f"max_consecutive_failures must be >= 1, got {max_consecutive_failures}")
        if nonfinite not in ("error", "mask"):
            raise ValueError(f"nonfinite must be 'error' or 'mask', got {nonfinite!r}")
        if memory_limit_mb is not None and memory_limit_mb <= 0:
            raise ValueError(f"memory_limit_mb must be positive or None, got {memory_limit_mb}")
        if max_abs_value is not None and not max_abs_value > 0:
            raise ValueError(f"max_abs_value must be positive or None, got {max_abs_value}")
        self.num_workers, self.timeout_s = num_workers, float(timeout_s)
        self.max_consecutive_failures, self.nonfinite = max_consecutive_failures, nonfinite
        self.on_error = on_error
        self.in_process, self.memory_limit_mb = in_process, memory_limit_mb
        self.max_abs_value = None if max_abs_value is None else float(max_abs_value)
        self._lock = threading.RLock()
        self._stats = {"calls": 0, "failures": 0, "timeouts": 0, "workers_restarted": 0}
        self._consecutive: dict[str, int] = {}
        self._recent_errors: dict[str, collections.deque] = {}
        self._start_failures = 0
        self._pid = os.getpid()
        self._closed = False
        self._workers: list[_Worker] = []
        self._finalizer = weakref.finalize(self, _shutdown, self._workers)
        if not in_process:
            self._workers.extend(_Worker(memory_limit_mb) for _ in range(num_workers))

    def score(self, name: str, fn: Callable[..., float | None], items: Sequence[Mapping[str, Any]]) -> ScoreResult:
        """Call fn(**item) for each item with a hard per-item deadline, in parallel across worker processes."""
        items = list(items)
        with self._lock:
            self._check_usable()
            tally = _Tally(self, name, items)
            if not items:
                return tally.result()
            if self.in_process:
                return self._score_in_process(tally, fn)
            key, payload = self._ship(name, fn)
            return _Dispatch(self, tally, key, payload).run()

    def _check_usable(self) -> None:
        if self._closed:
            raise RuntimeError("RewardEngine is closed")
        if os.getpid() != self._pid:
            raise RuntimeError("RewardEngine was created in another process (fork); create a new one here")

    @staticmethod
    def _ship(name: str, fn: Callable[..., Any]) -> tuple[str, bytes]:
        try:
            payload = pickle.dumps(fn, pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            raise RewardContractError(
                f"reward plugin {name!r}: its scoring function {_safe(repr(fn), 120)} cannot be pickled for the "
                f"worker processes ({_describe(exc)}); use a module-level function or class instance, or "
                f"{IN_PROCESS_HINT}"
            ) from exc
        return f"{name}:{hashlib.blake2b(payload, digest_size=12).hexdigest()}", payload

    def _score_in_process(self, tally: _Tally, fn: Callable[..., Any]) -> ScoreResult:
        if is_async_callable(fn):
            outcomes = _run_coroutine(_gather(fn, tally.items))
        else:
            outcomes = (None for _ in tally.items)
        for index, (item, outcome) in enumerate(zip(tally.items, outcomes)):
            try:
                value, logs = _invoke(fn, item) if outcome is None else _settled(outcome)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                if self.on_error == "raise":
                    exc.add_note(f"raised by reward plugin {tally.name!r} on item {index} (engine on_error='raise')")
                    raise
                tally.record(index, "error", _with_traceback(exc))
            else:
                tally.record(index, *_convert(value), logs)
            if tally.abort is not None:
                raise tally.abort
        return tally.result()

    @property
    def stats(self) -> dict[str, int]:
        """Cumulative counts: calls (items scored), failures, timeouts, workers_restarted."""
        return dict(self._stats)

    def close(self) -> None:
        """Kill the worker processes; idempotent."""
        with self._lock:
            self._closed = True
            self._finalizer()

    def __enter__(self) -> RewardEngine:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
