#!/usr/bin/env python3
"""Write hostile captures that probe kdissect's memory and time bounds, to re-measure them.

Each file is small on disk and expands inside the decoders:

  kafka_partitions.pcap     one Produce, 60 partitions, each a zstd batch of one 60 MB record
  kafka_tiny_records.pcap   one Produce, 60 partitions, each a zstd batch of 150,000 tiny records
  kafka_unanswered.pcap     60 Produce requests (one 60 MB zstd record each), no response
  kafka_unanswered_spread.pcap  the same 200 s apart: each is output unanswered, still pending
  pulsar_sends.pcap         60 SENDs with a 60 MB zstd payload each, no receipt
  rocketmq_stored.pcap      a pull response carrying 60 stored messages of 60 MB zstd each
  pulsar_batch.pcap         a SEND whose 64 MiB zstd payload claims 16.7 M batch entries
  pulsar_fields.pcap        a SEND whose metadata packs 5 M repeated varints
  kafka_metadata.pcap       a Metadata v0 request naming 1 M empty topics
  zk_children.pcap          a getChildren reply with 900,000 empty names
  rocketmq_batch.pcap       a SEND_BATCH_MESSAGE of 16 MB of minimal entries
  rocketmq_json.pcap        a request whose 16 MB JSON body is one array of 8 M numbers
  conv_<N>.pcap             N Kafka conversations: handshake, ApiVersions request and response, FIN
  conv_<N>_open.pcap        N Kafka conversations: handshake and an unanswered request, no FIN

Measure each with, for example:

    /usr/bin/time -v kdissect export DIR/kafka_partitions.pcap -o /dev/null
    /usr/bin/time -v kdissect read DIR/kafka_partitions.pcap > /dev/null

    python3 bench/gen_hostile.py DIR [--conversations 1000,10000,50000] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from collections.abc import Callable, Iterator

import crc32c
import zstandard

MB = 1_000_000
SEGMENT = 60_000  # TCP payload bytes per packet
SYN, FIN, PSH, ACK = 0x02, 0x01, 0x08, 0x10


# -- pcap ------------------------------------------------------------------------------


class Pcap:
    """A classic pcap of Ethernet/IPv4/TCP packets; one Conn per TCP connection."""

    def __init__(self, path: str) -> None:
        self.f = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        self.ts = 1_700_000_000.0

    def packet(self, src: tuple[str, int], dst: tuple[str, int], seq: int, ack: int, flags: int,
               payload: bytes = b"", step: float = 0.0001) -> None:
        tcp = struct.pack(">HHIIBBHHH", src[1], dst[1], seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags,
                          65535, 0, 0)
        total = 20 + len(tcp) + len(payload)
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 6, 0, _addr(src[0]), _addr(dst[0]))
        frame = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + ip + tcp + payload
        self.ts += step
        sec = int(self.ts)
        self.f.write(struct.pack("<IIII", sec, int((self.ts - sec) * 1e6), len(frame), len(frame)))
        self.f.write(frame)

    def close(self) -> None:
        self.f.close()


def _addr(ip: str) -> bytes:
    return bytes(int(x) for x in ip.split("."))


class Conn:
    def __init__(self, pcap: Pcap, cport: int, sport: int, client: str = "10.0.0.1",
                 server: str = "10.0.0.2") -> None:
        self.p = pcap
        self.c, self.s = (client, cport), (server, sport)
        self.seq = {True: 1000, False: 5000}

    def handshake(self) -> None:
        self.p.packet(self.c, self.s, self.seq[True], 0, SYN)
        self.p.packet(self.s, self.c, self.seq[False], self.seq[True] + 1, SYN | ACK)
        self.seq[True] += 1
        self.seq[False] += 1
        self.p.packet(self.c, self.s, self.seq[True], self.seq[False], ACK)

    def send(self, from_client: bool, data: bytes) -> None:
        src, dst = (self.c, self.s) if from_client else (self.s, self.c)
        for i in range(0, len(data), SEGMENT):
            piece = data[i:i + SEGMENT]
            self.p.packet(src, dst, self.seq[from_client], self.seq[not from_client], PSH | ACK, piece)
            self.seq[from_client] += len(piece)

    def fin(self) -> None:
        for side in (True, False):
            src, dst = (self.c, self.s) if side else (self.s, self.c)
            self.p.packet(src, dst, self.seq[side], self.seq[not side], FIN | ACK)
            self.seq[side] += 1


def one_conversation(path: str, port: int, messages: list[tuple[bool, bytes]]) -> None:
    pcap = Pcap(path)
    conn = Conn(pcap, 40000, port)
    conn.handshake()
    for from_client, data in messages:
        conn.send(from_client, data)
    pcap.close()


# -- encoders --------------------------------------------------------------------------


def zigzag(n: int) -> bytes:
    return uvarint((n << 1) ^ (n >> 63))


def uvarint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if not n:
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


def zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=3).compress(data)


def kafka_request(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    cid = b"hostile"
    payload = struct.pack(">hhih", api_key, version, corr, len(cid)) + cid + body
    return struct.pack(">i", len(payload)) + payload


def kafka_record(value: bytes) -> bytes:
    body = b"\x00" + zigzag(0) + zigzag(0) + zigzag(-1) + zigzag(len(value)) + value + zigzag(0)
    return zigzag(len(body)) + body


def kafka_batch(compressed_records: bytes, count: int, codec: int = 4) -> bytes:
    """A RecordBatch v2 whose records (already compressed with `codec`) claim `count` records."""
    after_crc = struct.pack(">hiqqqhii", codec, max(count - 1, 0), 0, 0, -1, -1, -1, count) + compressed_records
    crc = crc32c.crc32c(after_crc)
    tail = struct.pack(">ibI", 0, 2, crc) + after_crc
    return struct.pack(">qi", 0, len(tail)) + tail


def kafka_produce(corr: int, partitions: list[bytes]) -> bytes:
    """Produce v7: one topic, one partition per records blob."""
    topic = b"hostile"
    parts = b"".join(struct.pack(">ii", i, len(rec)) + rec for i, rec in enumerate(partitions))
    body = struct.pack(">hhi", -1, 1, 30000) + struct.pack(">ih", 1, len(topic)) + topic
    body += struct.pack(">i", len(partitions)) + parts
    return kafka_request(0, 7, corr, body)


def pb(*pairs: tuple[int, int | bytes]) -> bytes:
    out = b""
    for num, v in pairs:
        if isinstance(v, int):
            out += uvarint(num << 3) + uvarint(v)
        else:
            out += uvarint(num << 3 | 2) + uvarint(len(v)) + v
    return out


def pulsar_send(seq: int, metadata: bytes, payload: bytes) -> bytes:
    cmd = pb((1, 6), (6, pb((1, 1), (2, seq))))
    after = struct.pack(">I", len(metadata)) + metadata + payload
    section = struct.pack(">HI", 0x0E01, crc32c.crc32c(after)) + after
    return struct.pack(">II", 4 + len(cmd) + len(section), len(cmd)) + cmd + section


def pulsar_metadata(seq: int, *extra: tuple[int, int | bytes]) -> bytes:
    return pb((1, b"hostile"), (2, seq), (3, 0), *extra)


# -- the hostile inputs ----------------------------------------------------------------


def kafka_partitions(path: str) -> None:
    batch = kafka_batch(zstd(kafka_record(bytes(60 * MB))), 1)
    one_conversation(path, 9092, [(True, kafka_produce(1, [batch] * 60))])


def kafka_tiny_records(path: str) -> None:
    records = kafka_record(b"") * 150_000
    batch = kafka_batch(zstd(records), 150_000)
    one_conversation(path, 9092, [(True, kafka_produce(1, [batch] * 60))])


def kafka_unanswered(path: str) -> None:
    batch = kafka_batch(zstd(kafka_record(bytes(60 * MB))), 1)
    one_conversation(path, 9092, [(True, kafka_produce(corr, [batch])) for corr in range(60)])


def kafka_unanswered_spread(path: str) -> None:
    pcap = Pcap(path)
    conn = Conn(pcap, 40000, 9092)
    conn.handshake()
    batch = kafka_batch(zstd(kafka_record(bytes(60 * MB))), 1)
    for corr in range(60):
        pcap.ts += 200.0  # past the time the pipeline holds output for a response
        conn.send(True, kafka_produce(corr, [batch]))
    pcap.close()


def pulsar_sends(path: str) -> None:
    payload = zstd(bytes(60 * MB))
    frames = [pulsar_send(i, pulsar_metadata(i, (8, 3), (9, 60 * MB)), payload) for i in range(60)]
    one_conversation(path, 6650, [(True, f) for f in frames])


def rocketmq_stored(path: str) -> None:
    from kdissect.rocketmq.encode import frame, stored_message

    body = zstd(bytes(60 * MB))
    zstd_flag = 0x1 | (2 << 8)  # COMPRESSED, compression type ZSTD
    stored = b"".join(stored_message("hostile", body, queue_offset=i, sysflag=zstd_flag) for i in range(60))
    ext = {"consumerGroup": "g", "topic": "hostile", "queueId": "0", "queueOffset": "0"}
    req = frame(11, opaque=7, ext=ext)
    resp = frame(0, opaque=7, flag=1, body=stored)
    one_conversation(path, 10911, [(True, req), (False, resp)])


def pulsar_batch(path: str) -> None:
    size = 64 * 1024 * 1024
    meta = pulsar_metadata(0, (8, 3), (9, size), (11, size // 4))
    one_conversation(path, 6650, [(True, pulsar_send(0, meta, zstd(bytes(size))))])


def pulsar_fields(path: str) -> None:
    meta = pulsar_metadata(0, (31, b"\x01" * (5 * MB)))
    one_conversation(path, 6650, [(True, pulsar_send(0, meta, b"x"))])


def kafka_metadata(path: str) -> None:
    n = 1_000_000
    body = struct.pack(">i", n) + b"\x00\x00" * n
    one_conversation(path, 9092, [(True, kafka_request(3, 0, 1, body))])


def zk_children(path: str) -> None:
    def packet(body: bytes) -> bytes:
        return struct.pack(">i", len(body)) + body

    n = 900_000
    connect = packet(struct.pack(">iqiqi", 0, 0, 30000, 0, 16) + bytes(16) + b"\x00")
    connected = packet(struct.pack(">iiqi", 0, 30000, 1, 16) + bytes(16) + b"\x00")
    request = packet(struct.pack(">ii", 1, 8) + struct.pack(">i", 2) + b"/a" + b"\x00")
    reply = packet(struct.pack(">iqi", 1, 1, 0) + struct.pack(">i", n) + b"\x00\x00\x00\x00" * n)
    one_conversation(path, 2181, [(True, connect), (False, connected), (True, request), (False, reply)])


def rocketmq_batch(path: str) -> None:
    from kdissect.rocketmq.encode import batch, frame

    entry = batch([(b"", {})])
    body = entry * ((16 * 1024 * 1024 - 1024) // len(entry))
    one_conversation(path, 10911, [(True, frame(320, opaque=1, ext={"topic": "hostile"}, body=body))])


def rocketmq_json(path: str) -> None:
    from kdissect.rocketmq.encode import frame

    body = b"[" + b"0," * (8 * MB - 1) + b"0]"
    one_conversation(path, 10911, [(True, frame(103, opaque=1, body=body))])


def conversations(path: str, n: int, answered: bool) -> None:
    pcap = Pcap(path)
    request = kafka_request(18, 0, 1, b"")
    body = struct.pack(">ihi", 1, 0, 1) + struct.pack(">hhh", 18, 0, 3)  # corr, error, [api key]
    response = struct.pack(">i", len(body)) + body
    for i in range(n):
        client = f"10.{1 + i // 60000}.{(i // 250) % 240}.{1 + i % 250}"
        conn = Conn(pcap, 30000 + i % 30000, 9092, client=client)
        conn.handshake()
        conn.send(True, request)
        if answered:
            conn.send(False, response)
            conn.fin()
    pcap.close()


INPUTS: dict[str, Callable[[str], None]] = {
    "kafka_partitions": kafka_partitions,
    "kafka_tiny_records": kafka_tiny_records,
    "kafka_unanswered": kafka_unanswered,
    "kafka_unanswered_spread": kafka_unanswered_spread,
    "pulsar_sends": pulsar_sends,
    "rocketmq_stored": rocketmq_stored,
    "pulsar_batch": pulsar_batch,
    "pulsar_fields": pulsar_fields,
    "kafka_metadata": kafka_metadata,
    "zk_children": zk_children,
    "rocketmq_batch": rocketmq_batch,
    "rocketmq_json": rocketmq_json,
}


def jobs(counts: list[int]) -> Iterator[tuple[str, Callable[[str], None]]]:
    yield from INPUTS.items()
    for n in counts:
        yield f"conv_{n}", lambda p, n=n: conversations(p, n, True)
        yield f"conv_{n}_open", lambda p, n=n: conversations(p, n, False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="directory to write the captures to")
    ap.add_argument("--conversations", default="1000,10000,50000",
                    help="comma-separated conversation counts (default: %(default)s)")
    ap.add_argument("--only", nargs="*", metavar="NAME", help="write only these (names without .pcap)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    counts = [int(x) for x in a.conversations.split(",") if x]
    for name, make in jobs(counts):
        if a.only and name not in a.only:
            continue
        path = os.path.join(a.out, name + ".pcap")
        make(path)
        print(f"{path}: {os.path.getsize(path):,} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
