"""The `-w` file of a live capture, one file or a ring buffer of files as dumpcap and tshark
write them (`-b filesize:KB`, `-b duration:S`, `-b packets:N`, `-b files:N`).

A ring buffer switches to a new file once the current one holds `filesize` kB (1 kB = 1000
bytes, as in dumpcap; checked after each packet, so a file ends with the packet that reached
the size), after `duration` seconds (checked at least every poll interval, so a file may be
empty when no packet came), or after `packets` packets. With `files:N` only the last N files
are kept: opening file N+1 deletes the oldest. Files are named as dumpcap names them:
`PREFIX_NNNNN_YYYYmmddHHMMSS.EXT` from `-w PREFIX.EXT`, the number counted from 00001 (modulo
100000) and the local time at which the file was opened.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from kdissect.capture.pcapwriter import PcapngWriter, PcapWriter
from kdissect.errors import UsageError

KB = 1000  # dumpcap's unit for filesize
MAX_NUMBER = 100_000  # file numbers have five digits, then wrap (dumpcap's RINGBUFFER_MAX_NUM_FILES)


@dataclass(frozen=True, slots=True)
class RingSpec:
    """When to switch files (any of the limits that is set), and how many files to keep (0: all)."""

    filesize_kb: int = 0
    duration_s: float = 0.0
    packets: int = 0
    files: int = 0

    @property
    def rotates(self) -> bool:
        return bool(self.filesize_kb or self.duration_s or self.packets)


def _positive_int(key: str, value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise UsageError(f"-b {key}:{value}: expected a whole number of at least 1")
    return n


def _positive_float(key: str, value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        x = 0.0
    if not x > 0 or x == float("inf"):
        raise UsageError(f"-b {key}:{value}: expected a number of seconds above 0")
    return x


def parse_ring(options: tuple[str, ...] | list[str]) -> RingSpec | None:
    """The `-b KEY:VALUE` options as a RingSpec (None when there are none); UsageError for an
    unknown key, a bad value, or `files` alone (a ring needs a reason to switch)."""
    if not options:
        return None
    values: dict[str, int | float] = {}
    for opt in options:
        key, sep, value = opt.partition(":")
        if not sep:
            raise UsageError(f"-b {opt}: expected KEY:VALUE (filesize:KB, duration:S, packets:N, files:N)")
        if key == "duration":
            values[key] = _positive_float(key, value)
        elif key in ("filesize", "packets", "files"):
            values[key] = _positive_int(key, value)
        else:
            raise UsageError(f"-b {opt}: unknown ring buffer option {key!r} "
                             "(filesize:KB, duration:S, packets:N, files:N)")
    spec = RingSpec(int(values.get("filesize", 0)), float(values.get("duration", 0.0)),
                    int(values.get("packets", 0)), int(values.get("files", 0)))
    if not spec.rotates:
        raise UsageError("-b files:N needs -b filesize:KB, -b duration:S or -b packets:N to switch files")
    return spec


def ring_name(path: str, number: int, opened: datetime) -> str:
    """The name of file `number` (from 1) of the ring buffer written with `-w path`."""
    prefix, ext = os.path.splitext(path)
    return f"{prefix}_{number % MAX_NUMBER:05d}_{opened.strftime('%Y%m%d%H%M%S')}{ext}"


class Sink(Protocol):
    """One open capture file."""

    @property
    def size(self) -> int: ...

    def write(self, data: bytes, wirelen: int, ts_ns: int) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class _Pcapng:
    """A pcapng file of one interface: its name and capture filter in the IDB, nanosecond times."""

    def __init__(self, path: str, linktype: int, interface: str, capture_filter: str) -> None:
        self._w = PcapngWriter(path, tsresol=9)
        self._linktype = linktype
        self._w.add_interface(linktype, interface, capture_filter)

    @property
    def size(self) -> int:
        return self._w.size

    def write(self, data: bytes, wirelen: int, ts_ns: int) -> None:
        self._w.write_ns(data, wirelen, ts_ns, self._linktype)

    def flush(self) -> None:
        self._w.flush()

    def close(self) -> None:
        self._w.close()


def opener(pcap: bool, linktype: int, interface: str, capture_filter: str) -> Callable[[str], Sink]:
    """How each file is opened: pcapng (the default, as dumpcap's) or classic pcap (`-P`)."""
    if pcap:
        return lambda path: PcapWriter(path, linktype)
    return lambda path: _Pcapng(path, linktype, interface, capture_filter)


class CaptureWriter:
    """Every captured packet into `path`, or into a ring buffer of files named after it."""

    def __init__(self, path: str, open_file: Callable[[str], Sink], spec: RingSpec | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = datetime.now) -> None:
        self.path = path
        self.spec = spec
        self.packets = 0  # in all files
        self.opened = 0  # files opened
        self.deleted = 0  # files removed to keep the last `files`
        self._open_file = open_file
        self._clock = clock
        self._now = now
        self._kept: deque[str] = deque()
        self._file_packets = 0
        self._since = 0.0
        self._sink = self._next()

    @property
    def current(self) -> str:
        """The file being written."""
        return self._kept[-1]

    def _next(self) -> Sink:
        self.opened += 1
        name = self.path if self.spec is None else ring_name(self.path, self.opened, self._now())
        sink = self._open_file(name)
        self._kept.append(name)
        self._file_packets = 0
        self._since = self._clock()
        if self.spec is not None and self.spec.files:
            while len(self._kept) > self.spec.files:
                self._remove(self._kept.popleft())
        return sink

    def _remove(self, name: str) -> None:
        try:
            os.remove(name)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise UsageError(f"cannot remove the old ring buffer file {name}: {e.strerror or e}") from None
        self.deleted += 1

    def _switch(self) -> None:
        self._sink.close()
        self._sink = self._next()

    def write(self, data: bytes, wirelen: int, ts_ns: int) -> None:
        self._sink.write(data, wirelen, ts_ns)
        self.packets += 1
        self._file_packets += 1
        spec = self.spec
        if spec is None:
            return
        if (spec.packets and self._file_packets >= spec.packets) or \
                (spec.filesize_kb and self._sink.size >= spec.filesize_kb * KB):
            self._switch()

    def tick(self) -> None:
        """Switch files if the current one has been open for `duration` seconds."""
        spec = self.spec
        if spec is not None and spec.duration_s and self._clock() - self._since >= spec.duration_s:
            self._switch()

    def flush(self) -> None:
        self._sink.flush()

    def close(self) -> None:
        self._sink.close()

    def describe(self) -> str:
        """Where the packets went, for the closing line."""
        if self.spec is None:
            return self.path
        kept = len(self._kept)
        text = f"{self.opened} files" if self.opened > 1 else "1 file"
        if self.deleted:
            text += f" ({kept} kept)"
        return f"{text}, the last {self.current}"

    def __enter__(self) -> CaptureWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
