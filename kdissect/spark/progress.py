"""The progress line of `kdissect spark`: tasks done in the running stages (Spark's status
tracker), capture bytes decoded and messages made (accumulators the tasks add to; Spark
reports a task's additions when the task ends), rewritten in place on stderr.

pyspark is imported only inside these functions.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from kdissect.spark.units import Piece


@dataclass(slots=True)
class Snapshot:
    phase: str
    done: int = 0  # tasks, in the running stages
    total: int = 0
    decoded: int = 0  # capture bytes
    size: int = 0
    messages: int = 0


def line(s: Snapshot) -> str:
    """'writing messages: 3/10 tasks, 12.3 of 45.6 MB decoded, 12,345 messages'."""
    parts = []
    if s.total:
        parts.append(f"{s.done}/{s.total} tasks")
    if s.size:
        parts.append(f"{min(s.decoded, s.size) / 1e6:.1f} of {s.size / 1e6:.1f} MB decoded")
    parts.append(f"{s.messages:,} messages")
    return f"{s.phase}: {', '.join(parts)}"


def share_bytes(piece: Piece) -> int:
    """The part of a capture's size a piece accounts for: the shares of a file add up to it."""
    return piece.size * (piece.share + 1) // piece.shares - piece.size * piece.share // piece.shares


class Counters:
    """Accumulators the tasks add to: capture bytes decoded, messages made."""

    def __init__(self, sc: Any) -> None:
        self.decoded = sc.accumulator(0)
        self.messages = sc.accumulator(0)

    def counted(self, batches: Iterable[Any], pieces: Iterable[Piece]) -> Iterator[Any]:
        """The Arrow batches of some pieces, counted: their rows as they pass, the pieces'
        bytes once all have passed."""
        for b in batches:
            self.messages.add(b.num_rows)
            yield b
        self.decoded.add(sum(share_bytes(p) for p in pieces))


class Progress:
    """Calls `show(line)` every `every` seconds while the block runs; `phase` names the step."""

    def __init__(self, tracker: Any, counters: Counters, size: int, show: Callable[[str], None],
                 every: float = 0.5) -> None:
        self.tracker = tracker
        self.counters = counters
        self.phase = "decoding"
        self.last = Snapshot(self.phase, size=size)
        self.show = show
        self.every = every
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kdissect-progress", daemon=True)

    @classmethod
    def of(cls, spark: Any, size: int, show: Callable[[str], None]) -> Progress:
        sc = spark.sparkContext
        return cls(sc.statusTracker(), Counters(sc), size, show)

    def __enter__(self) -> Progress:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=2)

    def _run(self) -> None:
        while not self.stop.wait(self.every):
            with contextlib.suppress(Exception):  # the JVM may be going away
                self.show(line(self.snapshot()))

    def snapshot(self) -> Snapshot:
        """The phase, the running stages' tasks (the last ones seen between stages) and the
        counters."""
        s = self.last
        s.phase = self.phase
        infos = [i for i in map(self.tracker.getStageInfo, self.tracker.getActiveStageIds()) if i is not None]
        if infos:
            s.done = sum(i.numCompletedTasks for i in infos)
            s.total = sum(i.numTasks for i in infos)
        s.decoded = int(self.counters.decoded.value)
        s.messages = int(self.counters.messages.value)
        return s


class StatusLine:
    """One line on a stream (stderr), rewritten in place and cut to the terminal's width;
    silent when disabled."""

    def __init__(self, enabled: bool, stream: IO[str] | None = None) -> None:
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.shown = 0
        self.lock = threading.Lock()

    def show(self, text: str) -> None:
        if not self.enabled:
            return
        text = text[:max(20, self._width() - 1)]
        with self.lock:
            pad = " " * max(0, self.shown - len(text))
            self.stream.write("\r" + text + pad + ("\r" if not text else ""))
            self.stream.flush()
            self.shown = len(text)

    def _width(self) -> int:
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            columns = 0
        return columns or shutil.get_terminal_size().columns  # 0: a terminal without a size

    def clear(self) -> None:
        if self.shown:
            self.show("")
