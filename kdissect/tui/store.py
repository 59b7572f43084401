"""Store: a decoded capture as the terminal user interface sees it.

`start()` decodes in a background thread (the pipeline of `kdissect read`, or for a live
interface that of `kdissect sniff`) and appends each message to compact columns (columns.py), so
the list can show the first rows at once and scrolling touches only the rows shown. Full
Messages (tree, bytes, diagnostics) are kept for every message of a small capture (KEEP_ALL),
for the latest KEEP_LIVE of a live one. Each message's bytes of a capture file also go to a
temporary spill file (redissect.py, removed by `stop()`), so that past that `message(i)`
dissects the message again from its bytes and those of the few earlier messages it depends on
(its request...), in milliseconds whatever its place in the capture; the few messages that
cannot be (redissect.py says which) get their conversation decoded again from the file
(redecode.py). Either way into a bounded LRU. Statistics are gathered while decoding.

`filtered(expr)` gives a View of the messages passing a display filter (kdissect.filter): on
the kept Messages when the store holds them all, else by decoding the capture again with the
filter in the background (the View fills as it goes); for a live capture, over the kept
Messages and then each new one.

Blocking calls (run them off the interface's thread): `message(i)` when `cached(i)` is None,
`write_marked`. Everything else returns at once.
"""

from __future__ import annotations

import copy
import threading
import weakref
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kdissect.analysis.report import to_json
from kdissect.analysis.sketch import QuantileSketch
from kdissect.analysis.stats import Stats
from kdissect.capture.pcapfile import captures_name, captures_size
from kdissect.dissect.base import Options
from kdissect.errors import UsageError
from kdissect.filter import FilterError, compile_filter
from kdissect.filter.errors import UnknownNameError
from kdissect.model import Message
from kdissect.pipeline import Counters, dissect_file
from kdissect.pipeline.detect import DissectorRegistry
from kdissect.tui.columns import Columns, ListRow
from kdissect.tui.redecode import MessageCache, conversation_messages, message_size, stub
from kdissect.tui.redissect import Replay
from kdissect.tui.view import JOIN_S, Progress, View, failure

__all__ = ["FilterProblem", "ListRow", "Progress", "Store", "View"]

KEEP_ALL = 20_000  # a capture of at most this many messages keeps them all: never decoded twice
KEEP_ALL_BYTES = 512 * 1024 * 1024  # ... unless they hold more than this (message_size)
KEEP_LIVE = 20_000  # a live capture keeps its latest messages (and at most KEEP_ALL_BYTES of them)
WINDOW = 128  # a re-decode also caches this many messages either side of the one asked for


@dataclass(frozen=True, slots=True)
class FilterProblem:
    """What is wrong with a display filter, for validation as it is typed."""

    message: str
    pos: int  # 0-based offset in the expression, for the caret (FilterError.pos)
    suggestion: str | None = None  # the closest known name, when a name is unknown


class _LiveStop:
    """The stop flag the live capture loop reads (pipeline.live.Stop): 1 stops capturing, the
    kernel's backlog is still decoded; 2 stops at once."""

    def __init__(self) -> None:
        self.count = 0


@dataclass(frozen=True, slots=True)
class _LiveSource:
    interface: str
    capture: Any  # kdissect.capture.live.Source, opened


class Store:
    """A decoded capture: captures (merged in time order, as `read`), or a live interface
    (`Store.live`). Thread-safe for one decoding thread and any number of readers."""

    def __init__(self, captures: Sequence[str], registry: DissectorRegistry, opts: Options) -> None:
        self.captures = tuple(captures)
        self.registry = registry
        self.opts = opts
        self.cols = Columns()
        self.counters = Counters()
        self.progress = Progress(bytes_total=(captures_size(self.captures) or None) if self.captures else None)
        self.warnings: list[str] = []  # what the capture reader said (a cut file...)
        self._kept: dict[int, Message] = {}
        self._kept_bytes = 0
        self._keeps_all = True
        self._cache = MessageCache()
        self._stats = Stats()
        self._lock = threading.Lock()  # the statistics, the views fed live
        self._decode_lock = threading.Lock()
        self._marks: set[int] = set()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: _LiveSource | None = None
        self._live_stop = _LiveStop()
        self._views: weakref.WeakSet[View] = weakref.WeakSet()
        self._replay = Replay() if self.captures else None  # each message's bytes, to dissect again

    @classmethod
    def live(cls, interface: str, registry: DissectorRegistry, opts: Options,
             capture_filter: str | None = None, backend: str | None = None, buffer_mib: int = 64) -> Store:
        """A store fed by a capture on `interface`, opened now (a UsageError at once when it
        cannot be: no such interface, no permission, a bad capture filter), through sniff's
        capture loop with messages released as soon as decoded (hold=False)."""
        from kdissect.capture.live import default_backend, open_live

        cap = open_live(backend or default_backend(), interface, capture_filter or "", buffer_mib)
        store = cls((), registry, opts)
        store._live = _LiveSource(interface, cap)
        store._kept = OrderedDict()
        store._keeps_all = False
        return store

    # -- decoding ------------------------------------------------------------------------

    def start(self) -> None:
        """Decode in a background thread; rows appear as it goes."""
        if self._thread is not None:
            return
        target = self._run_live if self._live is not None else self._run_files
        self._thread = threading.Thread(target=target, name="kdissect-tui-store", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the decoding thread (and the live capture) and the views' threads."""
        self._stopping.set()
        self._live_stop.count = 2
        for v in list(self._views):
            v.stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(JOIN_S)
        if self._replay is not None:
            self._replay.close()  # messages not held are decoded from the capture from now on

    def stop_capture(self) -> None:
        """A live capture: stop capturing; what the kernel holds is still decoded, then done."""
        self._live_stop.count = max(self._live_stop.count, 1)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the decoding thread to end; whether it has."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.progress.done

    def _run_files(self) -> None:
        def at(pos: int) -> None:
            self.progress.bytes_read = pos

        try:
            observers = [self._replay] if self._replay is not None else []
            for m in dissect_file(list(self.captures), self.registry, self.opts, at, self.warnings,
                                  counters=self.counters, observers=observers):
                if self._stopping.is_set():
                    break
                self._add(m)
        except Exception as e:  # an unreadable capture, or a bug: the rows so far stay
            self.progress.error = failure(e)
        finally:
            self._finish()

    def _run_live(self) -> None:
        from kdissect.pipeline import Pipeline
        from kdissect.pipeline.live import LiveSession

        live = self._live
        assert live is not None
        pipe = Pipeline(self.registry, self.opts, hold=False, capture=f"live:{live.interface}",
                        counters=self.counters)
        session = LiveSession(self._add, None, None)
        try:
            with live.capture:
                session.run(live.capture, pipe, self._live_stop, None)
            self.progress.error = getattr(live.capture, "error", None) or None
        except Exception as e:
            self.progress.error = failure(e)
        finally:
            self._finish()

    def _finish(self) -> None:
        with self._lock:
            self._stats.finish()
            views = list(self._views)
        for v in views:  # a live capture's views end with it
            v._done()
        self.progress.done = True

    def _add(self, m: Message) -> None:
        i = self.cols.count
        self._keep(i, m)
        if self._replay is not None:
            self._replay.add(i, m)
        self.cols.add(m)
        with self._lock:
            self._stats.add(m)
            for v in self._views:
                v.offer(i, m)
        self.progress.messages = i + 1

    def _keep(self, i: int, m: Message) -> None:
        kept = self._kept
        if isinstance(kept, OrderedDict):  # live: the latest, KEEP_LIVE of them and KEEP_ALL_BYTES
            kept[i] = m
            self._kept_bytes += message_size(m)
            while len(kept) > 1 and (len(kept) > KEEP_LIVE or self._kept_bytes > KEEP_ALL_BYTES):
                self._kept_bytes -= message_size(kept.popitem(last=False)[1])
        elif self._keeps_all:
            kept[i] = m
            self._kept_bytes += message_size(m)
            if len(kept) > KEEP_ALL or self._kept_bytes > KEEP_ALL_BYTES:
                self._keep_recent(kept)

    def _keep_recent(self, kept: dict[int, Message]) -> None:
        """Too many to keep: the latest go to the LRU, the others are decoded again if asked for."""
        self._keeps_all = False
        self._kept = {}
        for i in sorted(kept)[-self._cache.max_messages:]:
            self._cache.put(i, kept[i])

    # -- rows ----------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.cols.count

    @property
    def done(self) -> bool:
        return self.progress.done

    @property
    def keeps_all(self) -> bool:
        """Whether every message is held (a small capture): no call ever decodes again."""
        return self._keeps_all

    @property
    def is_live(self) -> bool:
        return self._live is not None

    def kept(self, i: int) -> Message | None:
        """Message i if it is held."""
        return self._kept.get(i)

    def follow(self, view: View) -> list[tuple[int, Message]]:
        """The messages held now, in order; from then on each new one is offered to the view
        until `unfollow`."""
        with self._lock:
            self._views.add(view)
            return sorted(self._kept.items())

    def unfollow(self, view: View) -> None:
        self._views.discard(view)

    @property
    def first_ts(self) -> float | None:
        """The time of the capture's first packet (the origin of `read`'s time column)."""
        return self.counters.first_ts

    def notes(self) -> list[str]:
        """What `read` writes to standard error at the end: reader warnings, link types not
        supported, TLS not decrypted, what a capture without messages held."""
        from kdissect.analysis.coverage import notes

        name = captures_name(self.captures) if self.captures else "live capture"
        return [f"warning: {w}" for w in self.warnings] + notes(self.counters, name)

    def _check(self, i: int) -> None:
        if not 0 <= i < self.cols.count:
            raise IndexError(f"message index {i} out of range (0..{self.cols.count - 1})")

    def row(self, i: int) -> ListRow:
        self._check(i)
        return self.cols.row(i)

    def rows(self, start: int, stop: int) -> list[ListRow]:
        """The rows start..stop-1 (clipped to the messages so far)."""
        n = self.cols.count
        return [self.cols.row(i) for i in range(max(0, start), min(stop, n))]

    def index_of_frame(self, frame: int) -> int | None:
        """The message whose first frame is `frame`, else the last one that starts before it."""
        cols, n = self.cols, self.cols.count
        if cols.frames_sorted:
            j = bisect_left(cols.frame, frame, 0, n)
            if j < n and cols.frame[j] == frame:
                return j
            return j - 1 if j > 0 else None
        best: int | None = None
        for i in range(n):
            f = cols.frame[i]
            if f == frame:
                return i
            if f < frame and (best is None or f > cols.frame[best]):
                best = i
        return best

    def stream_indices(self, stream: int) -> list[int]:
        """The messages of one conversation, in order."""
        return self.cols.stream_indices(stream)

    # -- messages ------------------------------------------------------------------------

    def cached(self, i: int) -> Message | None:
        """The Message if it is held now (never blocks), else None: then `message(i)` decodes."""
        self._check(i)
        m = self._kept.get(i)
        return m if m is not None else self._cache.get(i)

    def message(self, i: int) -> Message:
        """The full decoded Message: held, else dissected again from its bytes (milliseconds),
        else decoded again with its conversation (which may take as long as reading the capture
        up to it). A message that cannot be decoded again (a live capture's older ones, a capture
        file that changed) comes back as its row, without a tree, with a diagnostic saying so."""
        m = self.cached(i)
        if m is not None:
            return m
        if self._live is not None:
            return stub(self.cols, i, f"a live capture keeps only its latest messages (at most {KEEP_LIVE})")
        with self._decode_lock:
            m = self._cache.get(i)
            if m is None:
                m = self._redissect(i)
            if m is None:
                self._fill(i)
                m = self._cache.get(i)
        return m if m is not None else stub(self.cols, i, "the message could not be decoded again from the capture")

    def _redissect(self, i: int) -> Message | None:
        """Message i dissected again from the spill file, into the LRU; None when it cannot be."""
        if self._replay is None:
            return None
        try:
            m = self._replay.message(self.cols, i, self.registry, self.opts)
        except Exception as e:  # a dissector's bug: its conversation is decoded again instead
            self.warnings.append(f"dissecting again: {failure(e)}")
            return None
        if m is not None:
            self._cache.put(i, m)
        return m

    def _fill(self, i: int) -> None:
        cols = self.cols
        want = set(range(max(0, i - WINDOW), min(cols.count, i + WINDOW + 1)))
        if cols.peer[i] >= 0:
            want.add(cols.peer[i])
        found = self._redecode(want)
        found.sort(key=lambda item: item[0] == i)  # the one asked for last: the most recent
        for j, m in found:
            self._cache.put(j, m)

    def _redecode(self, want: set[int]) -> list[tuple[int, Message]]:
        """The held or re-decoded Messages of the indices in `want` (others of their
        conversations are decoded on the way, not returned)."""
        out: list[tuple[int, Message]] = []
        missing = set()
        for j in want:
            m = self._kept.get(j) or self._cache.get(j)
            if m is None:
                missing.add(j)
            else:
                out.append((j, m))
        if missing:
            streams = {self.cols.stream(j) for j in missing}
            try:
                for j, m in conversation_messages(self.captures, self.registry, self.opts, self.cols,
                                                  streams, max(missing)):
                    if j in missing:
                        out.append((j, m))
            except Exception as e:
                self.warnings.append(f"decoding again: {failure(e)}")
        return out

    # -- filters -------------------------------------------------------------------------

    def filtered(self, expr: str | None) -> View:
        """The messages passing a display filter (all of them for None or blank); FilterError
        (with .pos and .reason) at once when the expression is bad. Stop a View no longer shown
        (View.stop) to end its thread."""
        if expr is None or not expr.strip():
            return View(self, None, None)
        pred = compile_filter(expr)
        view = View(self, expr, pred)
        view.begin()
        return view

    @staticmethod
    def check_filter(expr: str) -> FilterProblem | None:
        """None when the expression compiles (or is blank), else what is wrong and where."""
        if not expr.strip():
            return None
        try:
            compile_filter(expr)
        except UnknownNameError as e:
            return FilterProblem(e.reason, e.pos, e.close[0] if e.close else None)
        except FilterError as e:
            return FilterProblem(e.reason, e.pos)
        except Exception as e:
            return FilterProblem(failure(e), 0)
        return None

    # -- marks ---------------------------------------------------------------------------

    def mark(self, i: int) -> None:
        self._check(i)
        self._marks.add(i)

    def unmark(self, i: int) -> None:
        self._marks.discard(i)

    def marked(self) -> list[int]:
        return sorted(self._marks)

    def write_marked(self, path: str, with_peer: bool = False) -> int:
        """The packets (all frames) of the marked messages, with their requests or responses
        when `with_peer`, as pcapng at `path`, as `read -Y ... -w` writes them; the packets
        written. Reads the capture (twice for messages whose bytes were not kept). UsageError for a live
        capture (its packets are not kept) or a path that cannot be written."""
        from kdissect.pipeline.packets import FrameSet, check_writable, write_packets

        if self._live is not None or not self.captures:
            raise UsageError("writing packets needs a capture file: a live capture does not keep them")
        check_writable(self.captures, path)
        want = set(self._marks)
        if with_peer:
            want |= {p for i in want if (p := self.cols.peer[i]) >= 0}
        frames = FrameSet()
        for n in self._frames(want):
            frames.add(n)
        return write_packets(list(self.captures), frames, path)

    def _frames(self, want: set[int]) -> list[int]:
        """The frames of the messages in `want`: from the spill file, else decoded again."""
        out: list[int] = []
        missing = set()
        for i in want:
            found = self._replay.frames(self.cols, i) if self._replay is not None else None
            if found is None:
                missing.add(i)
            else:
                out += found
        for _, m in self._redecode(missing):
            out += m.frames
        return out

    # -- statistics ----------------------------------------------------------------------

    def stats(self, view: View | None = None) -> dict[str, Any]:
        """`kdissect stats -F json` of the messages so far (of a view: those it has found)."""
        owner = view if view is not None and view.expr is not None else self
        with owner._lock:
            return to_json(owner._stats)

    def response_times(self, view: View | None = None) -> dict[str, QuantileSketch]:
        """Response-time sketches (ms) per protocol, for a histogram (a copy)."""
        owner = view if view is not None and view.expr is not None else self
        with owner._lock:
            return copy.deepcopy(owner._stats.rtt)
