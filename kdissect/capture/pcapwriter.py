"""Write captured packets: `PcapWriter`, a classic pcap file with nanosecond timestamps (what
`sniff -P -w` writes), and `PcapngWriter`, a pcapng file with an interface per link type (what
`sniff -w`, `read -w`, `export -w` and `follow -w` write); both are read by `kdissect read`, tcpdump and
Wireshark. The record headers are written by hand because each record needs both the captured
and the original length, and the time exactly."""

from __future__ import annotations

import struct
from typing import BinaryIO, TypeVar

from kdissect import __version__
from kdissect.errors import UsageError

MAGIC_NS = 0xA1B23C4D
_FILE = struct.Struct("=IHHiIII")
_REC = struct.Struct("=IIII")


class _File:
    """A capture file being written: opened at once (a one-line error if it cannot be), the
    packets written so far, its size, flushed and closed on demand or at the end of a `with`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.packets = 0
        try:
            self._f: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed in close()
        except OSError as e:
            raise UsageError(f"cannot write {path}: {e.strerror or e}") from None

    def flush(self) -> None:
        self._f.flush()

    @property
    def size(self) -> int:
        """Bytes written so far (buffered ones included)."""
        return self._f.tell()

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()

    def __enter__(self: _W) -> _W:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_W = TypeVar("_W", bound=_File)


class PcapWriter(_File):
    def __init__(self, path: str, linktype: int, snaplen: int = 262_144) -> None:
        super().__init__(path)
        self._f.write(_FILE.pack(MAGIC_NS, 2, 4, 0, 0, snaplen, linktype))

    def write(self, data: bytes, wirelen: int, ts_ns: int) -> None:
        sec, nsec = divmod(ts_ns, 1_000_000_000)
        self._f.write(_REC.pack(sec & 0xFFFFFFFF, nsec, len(data), max(wirelen, len(data))))
        self._f.write(data)
        self.packets += 1


# pcapng, little-endian: block type, total length; the Section Header's byte-order magic,
# version 1.0 and an unknown section length (-1).
_BLOCK = struct.Struct("<II")
_SHB = struct.Struct("<IHHq")
_IDB = struct.Struct("<HHI")
_EPB = struct.Struct("<IIIII")
_OPT = struct.Struct("<HH")
_TRAILER = struct.Struct("<I")
_TSRESOL_US = 6  # if_tsresol: 10^-6 s, the precision a RawFrame's float time keeps
_TSRESOL_NS = 9  # 10^-9 s, the kernel's time in live capture
_SHB_USERAPPL = 4
_IF_NAME = 2
_IF_TSRESOL = 9
_IF_FILTER = 11


def _option(code: int, value: bytes) -> bytes:
    return _OPT.pack(code, len(value)) + value + b"\0" * (-len(value) % 4)


def _block(btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    total = len(body) + 12
    return _BLOCK.pack(btype, total) + body + _TRAILER.pack(total)


class PcapngWriter(_File):
    """A pcapng file: one section, an Interface Description Block for each link type the first
    time a packet of that link type is written (or ahead of them, with `add_interface`), an
    Enhanced Packet Block per packet, times in units of 10^-`tsresol` s (microseconds unless
    told)."""

    def __init__(self, path: str, tsresol: int = _TSRESOL_US) -> None:
        super().__init__(path)
        self._tsresol = tsresol
        self._ifaces: dict[int, int] = {}  # link type -> interface id
        opts = _option(_SHB_USERAPPL, f"kdissect {__version__}".encode()) + _option(0, b"")
        self._f.write(_block(0x0A0D0D0A, _SHB.pack(0x1A2B3C4D, 1, 0, -1) + opts))

    def add_interface(self, linktype: int, name: str = "", capture_filter: str = "") -> int:
        """Describe the interface of a link type (an Interface Description Block): its name
        (if_name) and capture filter (if_filter); its id."""
        iface = self._ifaces[linktype] = len(self._ifaces)
        opts = _option(_IF_NAME, name.encode()) if name else b""
        if capture_filter:
            opts += _option(_IF_FILTER, b"\0" + capture_filter.encode())  # 0: a filter string
        opts += _option(_IF_TSRESOL, bytes([self._tsresol])) + _option(0, b"")
        self._f.write(_block(1, _IDB.pack(linktype & 0xFFFF, 0, 0) + opts))
        return iface

    def _iface(self, linktype: int) -> int:
        iface = self._ifaces.get(linktype)
        return self.add_interface(linktype) if iface is None else iface

    def write(self, data: bytes, wirelen: int, ts: float, linktype: int) -> None:
        """One packet: its captured bytes, its length on the wire, its time (seconds since
        the epoch) and link type."""
        self._packet(data, wirelen, max(0, round(ts * 10**self._tsresol)), linktype)

    def write_ns(self, data: bytes, wirelen: int, ts_ns: int, linktype: int) -> None:
        """One packet whose time is in nanoseconds since the epoch (kept exactly at tsresol 9)."""
        self._packet(data, wirelen, max(0, ts_ns // 10 ** (9 - self._tsresol)), linktype)

    def _packet(self, data: bytes, wirelen: int, units: int, linktype: int) -> None:
        iface = self._iface(linktype)
        head = _EPB.pack(iface, units >> 32 & 0xFFFFFFFF, units & 0xFFFFFFFF, len(data), max(wirelen, len(data)))
        self._f.write(_block(6, head + data))
        self.packets += 1
