"""The parent's side of the worker processes: what it knows about each, and their whole lifecycle.

Start, recycle (kill and start a fresh one), kill the busy ones, close: every change of a worker
process happens in :class:`Pool`. See docs/engine.md for why workers are fresh interpreters forked
from one daemon thread, and how they die with the parent.
"""

from __future__ import annotations

import collections
import concurrent.futures
import enum
import multiprocessing
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from .options import EngineOptions
from .tally import EngineCounters
from .tree import kill_tree

STARTUP_TIMEOUT_S = 120.0
_MAX_START_FAILURES = 3
_FRAME = struct.Struct("!i")  # multiprocessing.connection's length prefix; worker messages stay far below 2 GiB
_SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


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


def exit_text(returncode: int | None) -> str:
    if returncode is None:
        return "worker process died"
    if returncode < 0:
        try:
            return f"worker process killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"worker process killed by signal {-returncode}"
    return f"worker process exited with code {returncode}"


def parent_path() -> list[str]:
    cwd = os.getcwd()
    return [os.path.abspath(p) if p else cwd for p in sys.path]


class WorkerState(enum.Enum):
    STARTING = "starting"
    """Spawned; not ready yet (deadline: ``STARTUP_TIMEOUT_S``)."""
    LOADING = "loading"
    """Loading a function (deadline: ``STARTUP_TIMEOUT_S``)."""
    READY = "ready"
    """Idle, or scoring its batches (then ``busy``, deadline: the item's)."""


class Worker:
    """One worker process and what the parent knows about it."""

    def __init__(self, memory_limit_mb: int | None) -> None:
        self.memory_limit_mb = memory_limit_mb
        self.proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self.state = WorkerState.STARTING
        self.deadline: float | None = None
        self.loaded: dict[str, str] = {}
        """Reward name -> key (name and hash) of the function this process has loaded under it."""
        self.inbox = bytearray()
        self.queue: collections.deque[int] = collections.deque()
        """Indices of the current call's items not sent yet."""
        self.batches: collections.deque[collections.deque[int]] = collections.deque()
        """The batches sent and not fully reported, oldest first."""
        self.prepared: tuple[list[int], bytes] | None = None
        """A batch pickled but held back (too big to queue behind a busy worker)."""

    def start(self) -> None:
        """Spawn a fresh process (what this object knew about the previous one is forgotten)."""
        parent_conn, child_conn = multiprocessing.Pipe(duplex=True)
        fd = child_conn.fileno()
        boot = (
            f"import sys; sys.path[:0] = {parent_path()!r}; "
            f"from {__package__}.worker import worker_main; worker_main({fd}, {os.getpid()}, {self.memory_limit_mb!r})"
        )
        try:
            self.proc = _spawner.popen(
                [sys.executable, "-c", boot],
                pass_fds=(fd,),
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **_SINGLE_THREAD_ENV},
            )
        finally:
            child_conn.close()
        self._conn = parent_conn
        self.state = WorkerState.STARTING
        self.deadline = time.monotonic() + STARTUP_TIMEOUT_S
        self.loaded = {}
        self.inbox = bytearray()
        self.batches.clear()

    def kill(self) -> int | None:
        """SIGKILL the worker, every process below it and its process group, reap it, return its exit
        status (None if none was running)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        kill_tree(proc.pid)  # what it started, in its group or not (it is their subreaper)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            proc.kill()
        except OSError:
            pass
        if self._conn is not None:
            self._conn.close()
        try:
            return proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None

    @property
    def conn(self) -> Connection:
        """The socket to the running process."""
        if self._conn is None:
            raise RuntimeError("the reward worker process was never started")
        return self._conn

    def ready(self) -> None:
        self.state, self.deadline = WorkerState.READY, None

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


class Pool:
    """An engine's worker processes (none in-process) and every change to them."""

    def __init__(self, options: EngineOptions, counters: EngineCounters) -> None:
        self.counters = counters
        self.start_failures = 0
        """Workers in a row that died or hung before they were ready."""
        count = 0 if options.in_process else options.num_workers
        self.workers = [Worker(options.memory_limit_mb) for _ in range(count)]

    def start(self) -> None:
        """Start every worker process (after the engine's finalizer is in place, so none can be orphaned)."""
        for worker in self.workers:
            worker.start()

    def started(self, worker: Worker) -> None:
        """The worker said it is ready."""
        worker.ready()
        self.start_failures = 0

    def recycle(self, worker: Worker) -> int | None:
        """Kill the worker and start a fresh one in its place; the exit status of the old one."""
        restarted = worker.state is not WorkerState.STARTING
        status = worker.kill()
        worker.start()
        self.counters.workers_restarted += restarted
        return status

    def start_failed(self, worker: Worker, reason: str | None) -> RuntimeError | None:
        """A worker that died or hung before it was ready: start another; the error that stops the call once
        ``_MAX_START_FAILURES`` did so in a row."""
        status = self.recycle(worker)
        self.start_failures += 1
        if self.start_failures < _MAX_START_FAILURES:
            return None
        return RuntimeError(
            f"reward worker processes keep failing to start ({reason or exit_text(status)}); "
            "check memory_limit_mb and that this Python can import rlvr_plugins"
        )

    def kill_busy(self) -> None:
        """Recycle every worker that is scoring (a call stopped early), and forget the call's queued items."""
        for worker in self.workers:
            if worker.busy:
                self.recycle(worker)
            worker.queue.clear()
            worker.prepared = None

    def close(self) -> None:
        """Kill every worker process; idempotent (also the engine's finalizer)."""
        for worker in self.workers:
            worker.kill()
