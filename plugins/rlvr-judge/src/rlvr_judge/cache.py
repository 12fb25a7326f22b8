"""Judge verdicts cached per process, and optionally in a JSONL file shared by every worker and run.

A key is ``(judge, answer, reference, question)``: ``judge`` is a fingerprint of everything
that can change a verdict (backend, model, template, threshold, …), the texts are
whitespace-normalised. Only verdicts are cached, never failures. The file is append-only,
one JSON object a line, each line written with one ``write`` on an ``O_APPEND`` descriptor
so that concurrent workers do not interleave; a process reads the lines other processes
appended since its last read whenever it misses in memory (a verdict dropped from memory
to respect ``max_entries`` is not read again: that costs one more judge call, never a wrong
verdict). Lines that are not complete
JSON objects (a worker killed mid-write) are skipped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

Key = tuple[str, str, str, "str | None"]


def normalise(text: str | None) -> str | None:
    """Runs of whitespace become one space; ends stripped."""
    return None if text is None else " ".join(text.split())


def make_key(judge: str, answer: str, reference: str, question: str | None) -> Key:
    return judge, normalise(answer), normalise(reference), normalise(question)


MAX_ENTRIES = 200_000


class VerdictCache:
    """An in-memory dict (at most ``max_entries``, the oldest dropped first) in front of an optional JSONL file."""

    def __init__(self, path: str | None = None, max_entries: int = MAX_ENTRIES):
        self.path = Path(path) if path else None
        self.max_entries = max_entries
        self.memory: dict[Key, bool] = {}
        self._offset = 0

    def get(self, key: Key) -> bool | None:
        if key not in self.memory and self.path is not None:
            self._read_new_lines()
        return self.memory.get(key)

    def put(self, key: Key, verdict: bool) -> None:
        self._remember(key, verdict)
        if self.path is None:
            return
        judge, answer, reference, question = key
        line = (
            json.dumps(
                {"judge": judge, "answer": answer, "reference": reference, "question": question, "equivalent": verdict},
                ensure_ascii=False,
            )
            + "\n"
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)

    def _read_new_lines(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        for raw in complete.splitlines():
            entry = _entry(raw)
            if entry is not None and entry[0] not in self.memory:
                self._remember(*entry)

    def _remember(self, key: Key, verdict: bool) -> None:
        self.memory[key] = verdict
        while len(self.memory) > self.max_entries:
            del self.memory[next(iter(self.memory))]


def _entry(raw: bytes) -> tuple[Key, bool] | None:
    try:
        e = json.loads(raw)
        key = (e["judge"], e["answer"], e["reference"], e["question"])
        verdict = e["equivalent"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(verdict, bool) or not all(isinstance(k, str) for k in key[:3]):
        return None
    return key, verdict
