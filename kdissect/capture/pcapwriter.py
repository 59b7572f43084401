"""Write captured packets as a classic pcap file with nanosecond timestamps (readable by
`kdissect read`, tcpdump and Wireshark). The record header is written by hand because each
record needs both the captured and the original length, and the kernel's time in ns exactly."""

from __future__ import annotations

import struct
from typing import BinaryIO

from kdissect.errors import UsageError

MAGIC_NS = 0xA1B23C4D
_FILE = struct.Struct("=IHHiIII")
_REC = struct.Struct("=IIII")


class PcapWriter:
    def __init__(self, path: str, linktype: int, snaplen: int = 262_144) -> None:
        self.path = path
        self.packets = 0
        try:
            self._f: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed in close()
        except OSError as e:
            raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
        self._f.write(_FILE.pack(MAGIC_NS, 2, 4, 0, 0, snaplen, linktype))

    def write(self, data: bytes, wirelen: int, ts_ns: int) -> None:
        sec, nsec = divmod(ts_ns, 1_000_000_000)
        self._f.write(_REC.pack(sec & 0xFFFFFFFF, nsec, len(data), max(wirelen, len(data))))
        self._f.write(data)
        self.packets += 1

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
