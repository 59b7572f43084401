"""A live capture's decoding loop: packets from the kernel through a Pipeline as they come,
each message out at once, and the counts for the closing line. `kdissect sniff` and the TUI's
live store run it."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kdissect.capture.live import Drainer
from kdissect.model import Message
from kdissect.pipeline.core import Pipeline

if TYPE_CHECKING:
    from kdissect.render.timecol import TimeColumn


class Stop(Protocol):
    """How often the capture was asked to stop: 1 stops capturing (what the kernel holds is
    still decoded), 2 stops at once."""

    count: int


class LiveSession:
    """One capture: packets in, messages out, the counts for the closing line."""

    def __init__(self, emit: Callable[[Message], None], count: int | None, writer: Any,
                 keep: Callable[[Message], bool] | None = None, clock: TimeColumn | None = None) -> None:
        self.emit = emit
        self.clock = clock if clock is not None and clock.needs_every_message else None  # -t d
        self.count = count
        self.writer = writer
        self.keep = keep  # the -Y display filter
        self.packets = 0
        self.messages = 0  # decoded
        self.shown = 0  # passed the display filter and printed
        self.overflow = 0

    @property
    def done(self) -> bool:
        return self.count is not None and self.shown >= self.count

    def output(self, messages: list[Message]) -> None:
        for m in messages:
            if self.done:
                return
            self.messages += 1
            if self.clock is not None:
                self.clock.seen(m)
            if self.keep is None or self.keep(m):
                self.emit(m)
                self.shown += 1

    def summary(self, dropped: int, write_path: str | None) -> str:
        parts = [f"{self.packets} packets", f"{self.messages} messages"]
        if self.keep is not None:
            parts.append(f"{self.shown} shown")
        parts.append(f"{dropped} dropped by the kernel")
        if self.overflow:
            parts.append(f"{self.overflow} dropped (decoder backlog full)")
        if self.writer is not None:
            parts.append(f"{self.writer.packets} written to {self.writer.describe()}")
        return "kdissect: " + ", ".join(parts)

    def run(self, cap: Any, pipe: Pipeline, stop: Stop, deadline: float | None) -> None:
        """Decode what `cap` captures until `stop` counts 1 (what the kernel holds is still
        decoded, then the pipeline finished), 2 (at once), the deadline passes or `count`
        messages are shown."""

        def stopping() -> bool:
            return stop.count > 0 or (deadline is not None and time.monotonic() >= deadline)

        drainer = Drainer(cap, stopping)
        try:
            self._loop(drainer, pipe, stop)
        finally:
            drainer.close()
            self.overflow = drainer.overflow
        if not self.done and stop.count < 2:
            self.output(pipe.finish())

    def _loop(self, drainer: Drainer, pipe: Pipeline, stop: Stop) -> None:
        writer = self.writer
        for batch in drainer.batches():
            for pkt in batch:
                self.packets += 1
                if writer is not None:
                    writer.write(pkt.frame.data, pkt.frame.wirelen, pkt.ts_ns)
                self.output(pipe.feed(pkt.frame))
                if self.done:
                    return
            if batch:
                sys.stdout.flush()
                if writer is not None:
                    writer.flush()
            if writer is not None:
                writer.tick()
            if stop.count > 1:  # a second Ctrl-C: stop draining what the kernel captured
                return
