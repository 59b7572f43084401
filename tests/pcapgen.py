"""Build packets and capture files for tests, with dpkt's encoders (an implementation independent
of kdissect's readers) and hand-written pcap/pcapng writers for the variants dpkt cannot write."""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

import dpkt

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


@dataclass
class Pkt:
    ts: float
    data: bytes
    linktype: int = 1
    wirelen: int | None = None


def tcp_ip(src: str, dst: str, sport: int, dport: int, seq: int, ack: int, flags: int,
           payload: bytes = b"") -> bytes:
    """An IPv4 or IPv6 packet carrying a TCP segment."""
    tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq & 0xFFFFFFFF, ack=ack & 0xFFFFFFFF,
                       flags=flags, data=payload, win=65535)
    if ":" in src:
        ip6 = dpkt.ip6.IP6(src=socket.inet_pton(socket.AF_INET6, src),
                           dst=socket.inet_pton(socket.AF_INET6, dst), nxt=6, hlim=64, data=tcp)
        ip6.plen = len(bytes(tcp))
        return bytes(ip6)
    ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=6, data=tcp)
    ip.len = 20 + len(bytes(tcp))
    return bytes(ip)


def ethernet(ip_packet: bytes, vlans: tuple[int, ...] = ()) -> bytes:
    etype = 0x86DD if ip_packet[0] >> 4 == 6 else 0x0800
    hdr = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01"
    tags = b""
    for i, vid in enumerate(vlans):
        tpid = 0x88A8 if i == 0 and len(vlans) > 1 else 0x8100
        tags += struct.pack(">HH", tpid, vid)
    if tags:
        # Each tag is TPID + TCI; the inner ethertype follows the last tag.
        first_tpid = tags[:2]
        rest = tags[2:]
        return hdr + first_tpid + rest + struct.pack(">H", etype) + ip_packet
    return hdr + struct.pack(">H", etype) + ip_packet


def sll(ip_packet: bytes) -> bytes:
    etype = 0x86DD if ip_packet[0] >> 4 == 6 else 0x0800
    return struct.pack(">HHH8sH", 0, 772, 6, b"\x00" * 8, etype) + ip_packet


def sll2(ip_packet: bytes) -> bytes:
    etype = 0x86DD if ip_packet[0] >> 4 == 6 else 0x0800
    return struct.pack(">HHIHBB8s", etype, 0, 1, 772, 0, 6, b"\x00" * 8) + ip_packet


def null_loop(ip_packet: bytes) -> bytes:
    af = 30 if ip_packet[0] >> 4 == 6 else 2
    return struct.pack("<I", af) + ip_packet


def write_pcap(path: str, pkts: list[Pkt], nano: bool = False, big_endian: bool = False,
               linktype: int = 1, snaplen: int = 262144) -> None:
    e = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    with open(path, "wb") as f:
        f.write(struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype))
        for p in pkts:
            sec = int(p.ts)
            frac = round((p.ts - sec) * (1e9 if nano else 1e6))
            data = p.data[:snaplen]
            f.write(struct.pack(e + "IIII", sec, frac, len(data), p.wirelen or len(p.data)))
            f.write(data)


def _block(btype: int, body: bytes) -> bytes:
    pad = (-len(body)) % 4
    blen = 12 + len(body) + pad
    return struct.pack("<II", btype, blen) + body + b"\x00" * pad + struct.pack("<I", blen)


def pcapng_section() -> bytes:
    return _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))


def pcapng_idb(linktype: int, tsresol: int | None = None) -> bytes:
    opts = b""
    if tsresol is not None:
        opts += struct.pack("<HH", 9, 1) + bytes([tsresol]) + b"\x00\x00\x00"
    if opts:
        opts += struct.pack("<HH", 0, 0)
    return _block(1, struct.pack("<HHI", linktype, 0, 262144) + opts)


def pcapng_epb(iface: int, ts: float, data: bytes, ticks_per_s: float = 1e6) -> bytes:
    t = round(ts * ticks_per_s)
    body = struct.pack("<IIIII", iface, t >> 32, t & 0xFFFFFFFF, len(data), len(data)) + data
    return _block(6, body)


class TcpConn:
    """Builds the packets of one TCP connection with correct sequence numbers."""

    def __init__(self, client: str = "10.0.0.1", server: str = "10.0.0.2", cport: int = 40000,
                 sport: int = 9092, isn_c: int = 1000, isn_s: int = 5000) -> None:
        self.c, self.s, self.cport, self.sport = client, server, cport, sport
        self.seq = {True: isn_c, False: isn_s}

    def handshake(self) -> list[bytes]:
        out = [
            tcp_ip(self.c, self.s, self.cport, self.sport, self.seq[True], 0, SYN),
            tcp_ip(self.s, self.c, self.sport, self.cport, self.seq[False], self.seq[True] + 1, SYN | ACK),
        ]
        self.seq[True] += 1
        self.seq[False] += 1
        out.append(tcp_ip(self.c, self.s, self.cport, self.sport, self.seq[True], self.seq[False], ACK))
        return out

    def segment(self, from_client: bool, payload: bytes, flags: int = PSH | ACK,
                seq: int | None = None, advance: bool = True) -> bytes:
        s = self.seq[from_client] if seq is None else seq
        ack = self.seq[not from_client]
        src, dst = (self.c, self.s) if from_client else (self.s, self.c)
        sp, dp = (self.cport, self.sport) if from_client else (self.sport, self.cport)
        pkt = tcp_ip(src, dst, sp, dp, s, ack, flags, payload)
        if advance and seq is None:
            self.seq[from_client] = (self.seq[from_client] + len(payload)) & 0xFFFFFFFF
        return pkt

    def fin(self, from_client: bool) -> bytes:
        pkt = self.segment(from_client, b"", FIN | ACK)
        self.seq[from_client] += 1
        return pkt


def kafka_request(api_key: int, version: int, corr: int, client_id: str = "test", body: bytes = b"") -> bytes:
    """A Kafka request with a v1 header (non-flexible versions)."""
    cid = client_id.encode()
    payload = struct.pack(">hhih", api_key, version, corr, len(cid)) + cid + body
    return struct.pack(">i", len(payload)) + payload


def api_versions_with_tags(corr: int, tags: int, first: int = 100) -> bytes:
    """ApiVersions v3 whose tagged-field section holds `tags` empty unknown tags (numbered from
    `first`): 2 to 4 bytes on the wire each, a field each in the tree."""
    body = b"\x02x\x021" + uvarint(tags) + b"".join(uvarint(first + t) + b"\x00" for t in range(tags))
    payload = struct.pack(">hhih", 18, 3, corr, 1) + b"c" + b"\x00" + body
    return struct.pack(">i", len(payload)) + payload


def uvarint(n: int) -> bytes:
    """n as an unsigned LEB128 varint (Kafka's compact lengths and tags, protobuf's varints)."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def kafka_response(corr: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">i", corr) + body
    return struct.pack(">i", len(payload)) + payload
