"""l2l4: RawFrame -> TcpSegment. Link layers: Ethernet (with 802.1Q/802.1ad/QinQ tags), Linux
cooked SLL and SLL2, BSD loopback/NULL and OpenBSD LOOP, raw IPv4/IPv6. IPv6 extension headers
are walked. Anything that is not TCP returns None after a few byte comparisons.

Headers are read with struct at fixed offsets rather than through dpkt's packet classes: this
is the hottest loop of the program and the fields needed are few. `decode` has a compiled twin,
_l2l4.pyx (see kdissect/accel.py).
"""

from __future__ import annotations

import struct
from _socket import AF_INET, AF_INET6, inet_ntop  # socket's C half: socket.py's enums cost a ms to build
from collections.abc import Callable

from kdissect import accel
from kdissect.capture.pcapfile import RawFrame

ETH_IPV4 = 0x0800
ETH_IPV6 = 0x86DD
VLAN_TYPES = (0x8100, 0x88A8, 0x9100, 0x9200)

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10

_H = struct.Struct(">H").unpack_from
_TCP = struct.Struct(">HHIIBBH").unpack_from  # sport, dport, seq, ack, offset, flags, window
_IPV6_EXT = {0, 43, 60, 51, 135, 139, 140}  # hop-by-hop, routing, dest opts, AH, mobility, HIP, shim6


class TcpSegment:
    """The TCP segment of one frame: its frame number and time, its endpoints (packed address and
    port), sequence and acknowledgement numbers, flags, window, payload, and how many payload
    bytes the snaplen cut off. An extension type when compiled (l2l4.pxd): the compiled decode
    builds it and the tracker reads it field by field, once per segment."""

    __slots__ = ("frame", "ts", "src", "sport", "dst", "dport", "seq", "ack", "flags", "window", "payload",
                 "missing")

    def __init__(self, frame: int, ts: float, src: bytes, sport: int, dst: bytes, dport: int, seq: int, ack: int,
                 flags: int, window: int, payload: bytes, missing: int) -> None:
        self.frame = frame
        self.ts = ts
        self.src = src  # packed address (4 or 16 bytes)
        self.sport = sport
        self.dst = dst
        self.dport = dport
        self.seq = seq
        self.ack = ack
        self.flags = flags
        self.window = window  # the window field as sent (not scaled)
        self.payload = payload
        self.missing = missing  # payload bytes cut off by the snaplen

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in TcpSegment.__slots__)

    def __eq__(self, other: object) -> bool:
        """Field by field, as a dataclass's."""
        if not isinstance(other, TcpSegment) or type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # (mutable, compared by value: as a dataclass's)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in zip(TcpSegment.__slots__, self._values(), strict=True))
        return f"TcpSegment({fields})"


def _ethernet(d: bytes) -> tuple[int, int] | None:
    if len(d) < 14:
        return None
    etype = _H(d, 12)[0]
    off = 14
    while etype in VLAN_TYPES and len(d) >= off + 4:
        etype = _H(d, off + 2)[0]
        off += 4
    return etype, off


def _sll(d: bytes) -> tuple[int, int] | None:
    return (_H(d, 14)[0], 16) if len(d) >= 16 else None


def _sll2(d: bytes) -> tuple[int, int] | None:
    return (_H(d, 0)[0], 20) if len(d) >= 20 else None


def _loopback(order: str) -> Callable[[bytes], tuple[int, int] | None]:
    """BSD NULL (host byte order, written on either kind of host) or OpenBSD LOOP (network order)."""
    other = "little" if order == "big" else "big"

    def parse(d: bytes) -> tuple[int, int] | None:
        if len(d) < 4:
            return None
        af = int.from_bytes(d[0:4], order)  # type: ignore[arg-type]
        if af > 0xFFFF:
            af = int.from_bytes(d[0:4], other)  # type: ignore[arg-type]
        if af == 2:
            return ETH_IPV4, 4
        return (ETH_IPV6, 4) if af in (10, 24, 28, 30) else None

    return parse


def _raw_ip(d: bytes) -> tuple[int, int] | None:
    if not d:
        return None
    return (ETH_IPV4 if d[0] >> 4 == 4 else ETH_IPV6), 0


# linktype -> parser returning (ethertype, offset of the network header)
LINK_LAYERS: dict[int, Callable[[bytes], tuple[int, int] | None]] = {
    1: _ethernet, 113: _sll, 276: _sll2, 0: _loopback("little"), 108: _loopback("big"),
    101: _raw_ip, 12: _raw_ip, 14: _raw_ip, 228: _raw_ip, 229: _raw_ip,
}


def decode(frame: RawFrame) -> TcpSegment | None:
    """The TCP segment in a frame, or None when there is none."""
    d = frame.data
    link = LINK_LAYERS.get(frame.linktype)
    net = link(d) if link is not None else None
    if net is None:
        return None
    etype, off = net
    missing_wire = frame.wirelen - len(d)
    if etype == ETH_IPV4:
        return _ipv4(frame, d, off, missing_wire)
    if etype == ETH_IPV6:
        return _ipv6(frame, d, off, missing_wire)
    return None


def _ipv4(frame: RawFrame, d: bytes, off: int, missing_wire: int) -> TcpSegment | None:
    if len(d) < off + 20 or d[off] >> 4 != 4 or d[off + 9] != 6:
        return None
    ihl = (d[off] & 0x0F) * 4
    if ihl < 20:  # a header length below the minimum: not a packet we can trust
        return None
    total = _H(d, off + 2)[0]
    if _H(d, off + 6)[0] & 0x1FFF:  # a non-first fragment carries no TCP header
        return None
    if total == 0:  # TCP segmentation offload: the length is left 0
        total = len(d) - off + missing_wire
    return _tcp(frame, d, off + ihl, off + total, d[off + 12 : off + 16], d[off + 16 : off + 20])


def _ipv6(frame: RawFrame, d: bytes, off: int, missing_wire: int) -> TcpSegment | None:
    if len(d) < off + 40 or d[off] >> 4 != 6:
        return None
    plen = _H(d, off + 4)[0]
    nxt = d[off + 6]
    src, dst = d[off + 8 : off + 24], d[off + 24 : off + 40]
    end = off + 40 + plen if plen else len(d) + missing_wire
    pos = off + 40
    while nxt in _IPV6_EXT or nxt == 44:
        if len(d) < pos + 8:
            return None
        if nxt == 44:  # fragment header: only the first fragment has the TCP header
            if _H(d, pos + 2)[0] & 0xFFF8:
                return None
            hlen = 8
        elif nxt == 51:
            hlen = (d[pos + 1] + 2) * 4
        else:
            hlen = (d[pos + 1] + 1) * 8
        nxt = d[pos]
        pos += hlen
    if nxt != 6:
        return None
    return _tcp(frame, d, pos, end, src, dst)


def _tcp(frame: RawFrame, d: bytes, off: int, end: int, src: bytes, dst: bytes) -> TcpSegment | None:
    if len(d) < off + 20:
        return None
    sport, dport, seq, ack, doff, flags, window = _TCP(d, off)
    start = off + (doff >> 4) * 4
    if start < off + 20 or start > end:  # a data offset below the header's minimum, or past the end
        return None
    avail = min(end, len(d))
    payload = d[start:avail] if avail > start else b""
    missing = max(0, end - max(avail, start))
    return TcpSegment(frame.number, frame.ts, src, sport, dst, dport, seq, ack, flags, window, payload, missing)


def format_addr(addr: bytes, port: int) -> str:
    if len(addr) == 4:
        return f"{inet_ntop(AF_INET, addr)}:{port}"
    return f"[{inet_ntop(AF_INET6, addr)}]:{port}"


accel.bind(globals(), "kdissect.capture._l2l4", ("decode",))
