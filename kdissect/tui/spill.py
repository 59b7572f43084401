"""Spill: an append-only temporary file of message bytes, so that a store of millions of
messages keeps each one's PDU on disk, not in memory, and reads it back by offset.

One thread appends, any thread reads. Records go to an in-memory buffer written out a chunk at a
time; a record lies wholly in the file or wholly in the buffer. The file has no name (it is gone
when closed or when the process ends).
"""

from __future__ import annotations

import os
import tempfile
import threading

CHUNK = 1024 * 1024  # bytes buffered before they are written out


class Spill:
    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="kdissect-tui-")  # noqa: SIM115 - closed by close()
        self._fd = self._file.fileno()
        self._buf = bytearray()
        self._written = 0  # bytes in the file; the buffer follows them
        self._lock = threading.Lock()
        self.closed = False

    @property
    def size(self) -> int:
        return self._written + len(self._buf)

    def append(self, record: bytes) -> int:
        """Add a record; its offset, or -1 once closed (a file that cannot be written is closed:
        the disk is full)."""
        with self._lock:
            if self.closed:
                return -1
            at = self._written + len(self._buf)
            self._buf += record
            if len(self._buf) >= CHUNK:
                try:
                    self._flush()
                except OSError:
                    self._close()
                    return -1
            return at

    def read(self, offset: int, size: int) -> bytes | None:
        """The `size` bytes at `offset` (a record or its part), None once closed or out of range."""
        with self._lock:
            if self.closed or offset < 0 or size < 0 or offset + size > self.size:
                return None
            if offset >= self._written:
                start = offset - self._written
                return bytes(self._buf[start : start + size])
            data = os.pread(self._fd, size, offset)
        return data if len(data) == size else None

    def _flush(self) -> None:
        view = memoryview(self._buf)
        done = 0
        while done < len(view):
            done += os.write(self._fd, view[done:])
        view.release()
        self._written += len(self._buf)
        self._buf = bytearray()

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            self._buf = bytearray()
            self._file.close()
