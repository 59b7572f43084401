"""View: the messages of a display filter over a store (tui.store.Store, seen here through
`Source`), by store index, filled in the background; and Progress, how far a store or a view
has got."""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kdissect.analysis.stats import Stats
from kdissect.dissect.base import Options
from kdissect.errors import UsageError
from kdissect.model import Message
from kdissect.pipeline import dissect_file
from kdissect.pipeline.detect import DissectorRegistry

JOIN_S = 5.0  # how long stop() waits for a thread


@dataclass(slots=True)
class Progress:
    bytes_read: int = 0
    bytes_total: int | None = None  # None: not known (standard input, a live capture)
    messages: int = 0
    done: bool = False
    error: str | None = None  # why decoding stopped early, in one line


class Source(Protocol):
    """What a View reads of its store: the decoding's progress and settings, the messages
    counted so far (`len`) and held (`kept`), and, for a live capture (`is_live`), each new
    message as it comes (`follow`)."""

    progress: Progress
    captures: tuple[str, ...]
    registry: DissectorRegistry
    opts: Options

    def __len__(self) -> int: ...

    @property
    def done(self) -> bool: ...

    @property
    def keeps_all(self) -> bool: ...

    @property
    def is_live(self) -> bool: ...

    def kept(self, i: int) -> Message | None:
        """Message i if the store holds it."""

    def follow(self, view: View) -> list[tuple[int, Message]]:
        """The messages held now, in order; from then on each new one is offered to the view
        (`View.offer`) until `unfollow`."""

    def unfollow(self, view: View) -> None: ...


def failure(e: BaseException) -> str:
    if isinstance(e, (UsageError, OSError)):
        return str(e)
    return f"{type(e).__name__}: {e}"


def _passes(pred: Callable[[Message], bool], m: Message) -> bool:
    try:
        return bool(pred(m))
    except Exception:  # a filter over a broken tree: the message does not pass
        return False


class View:
    """The messages of a display filter, by store index in order; filled in the background
    when the filter needs the capture decoded again (`progress`). A View of no filter (expr
    None) is every message."""

    def __init__(self, store: Source, expr: str | None, pred: Callable[[Message], bool] | None) -> None:
        self.store = store
        self.expr = expr
        self._pred = pred
        self._matches = array("q")
        self._stats = Stats()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._own_progress = Progress(bytes_total=store.progress.bytes_total)

    @property
    def progress(self) -> Progress:
        return self.store.progress if self.expr is None else self._own_progress

    def __len__(self) -> int:
        n = len(self.store)
        if self.expr is None:
            return n
        return bisect_left(self._matches, n)

    def index(self, pos: int) -> int:
        """The store index of the pos-th row of the view."""
        if not 0 <= pos < len(self):
            raise IndexError(f"view position {pos} out of range")
        return pos if self.expr is None else self._matches[pos]

    def position(self, index: int) -> int | None:
        """The view position of a store index, if it passes."""
        if self.expr is None:
            return index if 0 <= index < len(self.store) else None
        pos = bisect_left(self._matches, index)
        return pos if pos < len(self) and self._matches[pos] == index else None

    def nearest(self, index: int) -> int | None:
        """The position of the last row at or before a store index (None: none before it), to
        keep the cursor near where it was when the filter changes."""
        if self.expr is None:
            return min(index, len(self) - 1) if len(self) else None
        pos = bisect_right(self._matches, index, 0, len(self)) - 1
        return pos if pos >= 0 else None

    def stop(self) -> None:
        """End the background filling (the rows found so far stay)."""
        self._stopping.set()
        self.store.unfollow(self)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(JOIN_S)

    def wait(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
        return self.progress.done

    # -- filling -------------------------------------------------------------------------

    def begin(self) -> None:
        store = self.store
        if store.is_live:
            self._begin_live()
            return
        target = self._from_kept if store.done and store.keeps_all else self._from_capture
        self._thread = threading.Thread(target=target, name="kdissect-tui-view", daemon=True)
        self._thread.start()

    def _begin_live(self) -> None:
        """Over the messages held now, then each new one as the store adds it."""
        store = self.store
        for i, m in store.follow(self):
            self._take(i, m)
        self._own_progress.messages = len(self._matches)
        if store.done:
            self._own_progress.done = True

    def offer(self, i: int, m: Message) -> None:
        """A new message of a live store (called under the store's lock)."""
        if not self._stopping.is_set():
            self._take(i, m)
            self._own_progress.messages = len(self._matches)

    def _take(self, i: int, m: Message) -> None:
        assert self._pred is not None
        if (not self._matches or i > self._matches[-1]) and _passes(self._pred, m):
            with self._lock:
                self._stats.add(m)
            self._matches.append(i)

    def _from_kept(self) -> None:
        store = self.store
        try:
            for i in range(len(store)):
                if self._stopping.is_set():
                    return
                m = store.kept(i)
                if m is not None:
                    self._take(i, m)
                self._own_progress.messages = len(self._matches)
        finally:
            self._done()

    def _from_capture(self) -> None:
        store = self.store

        def at(pos: int) -> None:
            self._own_progress.bytes_read = pos

        try:
            for m in dissect_file(list(store.captures), store.registry, store.opts, at):
                if self._stopping.is_set():
                    return
                self._take(m.number - 1, m)
                self._own_progress.messages = len(self._matches)
        except Exception as e:
            self._own_progress.error = failure(e)
        finally:
            self._done()

    def _done(self) -> None:
        with self._lock:
            self._stats.finish()
        self._own_progress.done = True
