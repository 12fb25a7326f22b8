"""One ``score()`` call: over the worker processes (feed, wait, collect, enforce deadlines), or in-process.

Items go out in contiguous chunks, one per worker, in batches; an idle worker steals the tail half
of the longest chunk; each item's deadline starts when its worker is free for it. What happens to a
worker process is the pool's business; what happens to the items is decided here (docs/engine.md).
"""

from __future__ import annotations

import collections
import math
import pickle
import select
import time
from collections.abc import Callable
from typing import Any

from .calls import gather, invoke, is_async_callable, run_coroutine, settled
from .pool import STARTUP_TIMEOUT_S, Pool, Worker, WorkerState, exit_text, parent_path
from .tally import Tally
from .values import (
    ERROR,
    IN_PROCESS_HINT,
    OUTCOMES,
    RewardContractError,
    ScoreResult,
    convert,
    describe,
    with_traceback,
)
from .worker import MESSAGES, Message

_BATCH_SIZE = 32
_QUEUED_BATCH_MAX_BYTES = 32 * 1024
_BATCH_MAX_BYTES = 1024 * 1024
_MAX_ITEM_BYTES = 256 * 1024 * 1024
_RESULT = Message.RESULT  # read once per item: a module global, not the enum attribute (see values.OK)


class Dispatch:
    """One score() call over the worker processes: feed, wait, collect, enforce deadlines."""

    def __init__(self, pool: Pool, tally: Tally, key: str, payload: bytes) -> None:
        self.pool, self.tally, self.key, self.payload = pool, tally, key, payload
        self.workers = pool.workers
        self.timeout_s = tally.options.timeout_s
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
            self.pool.kill_busy()
            raise
        if self.tally.abort is not None:
            self.pool.kill_busy()
            raise self.tally.abort
        return self.tally.result()

    def _assign(self) -> None:
        pending = [i for i, failed in enumerate(self.tally.failed) if not failed]  # refused items are done
        n, k = len(pending), len(self.workers)
        for w, worker in enumerate(self.workers):
            worker.queue = collections.deque(pending[n * w // k : n * (w + 1) // k])

    def _feed(self, worker: Worker) -> None:
        if worker.state is not WorkerState.READY:
            return
        if worker.loaded.get(self.tally.name) != self.key:
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

    def _prepare(self, worker: Worker) -> tuple[list[int], bytes] | None:
        """The next batch: up to ``_BATCH_SIZE`` items, each pickled on its own, no more than
        ``_BATCH_MAX_BYTES`` together unless one item alone is bigger (it goes alone), so
        that an item that breaks the worker (memory) takes no neighbour with it. An item over
        ``_MAX_ITEM_BYTES`` fails here without being sent. None when every item taken failed so."""
        batch: list[int] = []
        blobs: list[tuple[int, bytes]] = []
        size = 0
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
        return batch, pickle.dumps((Message.RUN.value, self.tally.name, blobs), pickle.HIGHEST_PROTOCOL)

    def _pickle(self, index: int) -> bytes | None:
        try:
            blob = pickle.dumps(self.tally.items[index], pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            self.tally.lost(index, f"the item cannot be sent to a worker: {describe(exc)}")
            return None
        if len(blob) > _MAX_ITEM_BYTES:
            self.tally.lost(
                index,
                f"the item is {len(blob)} bytes; the reward engine takes items of at most {_MAX_ITEM_BYTES} bytes",
            )
            return None
        return blob

    def _load(self, worker: Worker) -> None:
        worker.state = WorkerState.LOADING
        worker.deadline = time.monotonic() + STARTUP_TIMEOUT_S
        if not worker.send((Message.LOAD.value, self.tally.name, self.key, self.payload, parent_path())):
            self._died(worker)

    def _steal(self, worker: Worker) -> None:
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
            # still overdue once the results that arrived meanwhile are handled (and the worker is alive)
            if _overdue(worker, now) and self._drain(worker, check=True) and _overdue(worker, now):
                self._expired(worker)

    def _drain(self, worker: Worker, check: bool = False) -> bool:
        """Handle the messages waiting from the worker; False if it died."""
        if check and not select.select([worker.conn.fileno()], [], [], 0)[0]:
            return True
        messages, alive = worker.receive()
        proc = worker.proc
        for message in messages:
            self._handle(worker, message)
            if worker.proc is not proc:  # replaced (RETIRE): what the old process sent after it is moot
                return True
        if not alive:
            self._died(worker)
        return alive

    def _handle(self, worker: Worker, message: tuple) -> None:
        kind = MESSAGES[message[0]]
        if kind is _RESULT and worker.busy:
            batch = worker.batches[0]
            batch.popleft()
            if not batch:
                worker.batches.popleft()
            worker.deadline = time.monotonic() + self.timeout_s if worker.busy else None
            self.tally.record(message[1], OUTCOMES[message[2]], *message[3:])
        elif kind is Message.UNDECODABLE and worker.busy:
            batch = worker.batches.popleft()
            worker.deadline = time.monotonic() + self.timeout_s if worker.busy else None
            for index in batch:
                self.tally.lost(index, f"the worker cannot unpickle the item batch: {message[1]}")
        elif kind is Message.RETIRE:
            worker.requeue()
            self.pool.recycle(worker)
        elif kind is Message.READY:
            self.pool.started(worker)
        elif kind is Message.LOADED:
            _, name, key, error = message
            worker.ready()
            if error is None:
                worker.loaded[name] = key
            elif name == self.tally.name and key == self.key:
                self._abort(self._load_error(error))

    def _abort(self, error: BaseException | None) -> None:
        """Stop the call with ``error`` (the first one stays)."""
        self.tally.abort = self.tally.abort or error

    def _load_error(self, error: str) -> RewardContractError:
        hint = " (it is defined in __main__, which workers do not import)" if b"__main__" in self.payload else ""
        return RewardContractError(
            f"reward plugin {self.tally.name!r}: its scoring function cannot be loaded in a worker process{hint}: "
            f"{error}. It must be importable: a module-level function or class instance, or a functools.partial "
            f"of one; or {IN_PROCESS_HINT}"
        )

    def _expired(self, worker: Worker) -> None:
        if worker.busy:
            self._replace(worker, lambda status: f"timeout after {self.timeout_s:g}s", timeout=True)
        elif worker.state is WorkerState.LOADING:
            self._replace(worker)
            self._abort(self._load_error(f"timed out after {STARTUP_TIMEOUT_S:g}s"))
        else:
            self._abort(self.pool.start_failed(worker, f"not ready after {STARTUP_TIMEOUT_S:g}s"))

    def _died(self, worker: Worker) -> None:
        if worker.busy:
            self._replace(worker)
        elif worker.state is WorkerState.STARTING:
            self._abort(self.pool.start_failed(worker, None))
        else:
            state = worker.state
            status = self._replace(worker)
            if state is WorkerState.LOADING:
                self._abort(self._load_error(exit_text(status)))

    def _replace(
        self, worker: Worker, describe_exit: Callable[[int | None], str] = exit_text, timeout: bool = False
    ) -> int | None:
        """Fail the worker's current item (if any), requeue the rest, recycle the worker."""
        current = worker.batches[0].popleft() if worker.busy else None
        worker.requeue()
        status = self.pool.recycle(worker)
        if current is not None:
            self.tally.lost(current, describe_exit(status), timeout=timeout)
        return status


def _overdue(worker: Worker, now: float) -> bool:
    return worker.deadline is not None and now >= worker.deadline


def score_in_process(tally: Tally, fn: Callable[..., Any]) -> ScoreResult:
    """The call in the calling process: no deadline, no isolation; values are checked all the same."""
    pending = [i for i, failed in enumerate(tally.failed) if not failed]  # refused items are done
    if is_async_callable(fn):
        outcomes = run_coroutine(gather(fn, [tally.items[i] for i in pending]))
    else:
        outcomes = (None for _ in pending)
    for index, outcome in zip(pending, outcomes):
        item = tally.items[index]
        try:
            value, logs = invoke(fn, item) if outcome is None else settled(outcome)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            if tally.options.on_error == "raise":
                exc.add_note(f"raised by reward plugin {tally.name!r} on item {index} (engine on_error='raise')")
                raise
            tally.record(index, ERROR, with_traceback(exc))
        else:
            tally.record(index, *convert(value), logs)
        if tally.abort is not None:
            raise tally.abort
    return tally.result()
