#!/usr/bin/env python3
"""Mutation fuzzer for the capture readers and the transport layers, deterministic from a seed.

    python3 tools/fuzz.py --target pcap --runs 1000000 [--seed 1] [--out fuzz-findings]
    python3 tools/fuzz.py --target all --runs 100000
    python3 tools/fuzz.py --replay fuzz-findings/pcap-crash-....pcap

Seed inputs are small pieces of the captures under captures/: a few consecutive frames of one
conversation (from its handshake, and from the middle of it). Each input is a seed changed by
a few random mutations, run through the whole reading path:

  pcap, pcapng, gzip      file bytes -> CaptureFile -> Pipeline (l2l4, reassembly, framing,
                          dissectors); the mutations hit the file format (record and block
                          headers, options, the deflate stream) and everything behind it
  kafka, zookeeper,       a list of frames -> Pipeline; the mutations hit link, IP and TCP
  pulsar, rocketmq        headers, sequence numbers, payload bytes, and the order, loss and
                          duplication of segments
  spark                   the frames of every protocol -> Pipeline -> each message's Spark rows
                          (its messages row, records and transaction), made by the compiled
                          twins and by the pure functions: a difference is a finding too
  json                    the same with each message's JSON text (jsonout.message_json)

A finding is an exception other than the documented one (UsageError: "not a capture"), an
input slower than --max-seconds, or one that grows the peak memory by more than --max-mb. The
first input of each distinct finding (exception type and innermost kdissect source line) is
saved under --out as a capture that `kdissect read` and `--replay` reproduce.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import json
import os
import random
import resource
import signal
import struct
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kdissect import accel  # noqa: E402
from kdissect.capture.l2l4 import decode  # noqa: E402
from kdissect.capture.pcapfile import CaptureFile, RawFrame  # noqa: E402
from kdissect.dissect.base import Options  # noqa: E402
from kdissect.errors import UsageError  # noqa: E402
from kdissect.pipeline import Pipeline  # noqa: E402
from kdissect.protocols import DissectorRegistry  # noqa: E402

CAPTURES = ROOT / "captures"
PROTOCOLS = ("kafka", "zookeeper", "pulsar", "rocketmq")
CAPTURE_TARGETS = ("pcap", "pcapng", "gzip")
TARGETS = CAPTURE_TARGETS + PROTOCOLS + ("tls", "spark", "json")
# The tls target decrypts with the key logs of captures/tls, all in one file.
TLS_KEYLOG = Path(tempfile.gettempdir()) / "kdissect-fuzz-tls.keys"
MAX_TLS_FRAMES = 40  # a TLS seed is a whole connection (its handshake and records), at most this long
WINDOW = 6  # frames per seed
MAX_FRAME = 2048  # seeds keep to frames no larger than this
WINDOWS_PER_CONVERSATION = 3
OPTS = Options(max_decompressed=1 << 20)
HARD_TIMEOUT_S = 20  # an input still running after this is stopped and reported as a hang
INTERESTING = (0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
               0xFFFFFFFE, 16, 20, 24, 40, 64, 255, 256, 1024, 4096, 65535, 65536)


# -- seeds -----------------------------------------------------------------------------


@dataclass
class Seed:
    protocol: str
    capture: str
    registry: DissectorRegistry
    decode_as: list[str]
    frames: list[RawFrame]


def _decode_as(pcap: Path) -> list[str]:
    side = pcap.with_suffix(".json")
    protocol = pcap.parent.name
    if not side.exists():
        return []
    ports = json.loads(side.read_text()).get("ports", [])
    return [f"{p}={protocol}" for p in ports]


def load_seeds(protocols: tuple[str, ...] = PROTOCOLS) -> list[Seed]:
    """Windows of WINDOW consecutive frames of one conversation, from each capture of each
    protocol: from the conversation's first frame (the handshake), and from later frames (a
    capture that starts mid-connection; a window starts with a client's segment, so that most
    responses in it have their request)."""
    seeds: list[Seed] = []
    for protocol in protocols:
        for pcap in sorted((CAPTURES / protocol).glob("*.pcap")):
            decode_as = _decode_as(pcap)
            registry = DissectorRegistry(decode_as={int(s.split("=")[0]): protocol for s in decode_as})
            with CaptureFile(str(pcap)) as cap:
                frames = list(cap)
            convs: dict[Any, list[tuple[RawFrame, Any]]] = {}
            for f in frames:
                seg = decode(f)
                if seg is None:
                    continue
                a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
                convs.setdefault(min(a, b) + max(a, b), []).append((f, a))
            for pairs in convs.values():
                conv = [f for f, _ in pairs]
                client = pairs[0][1]
                from_client = [i for i, (f, src) in enumerate(pairs) if src == client and i >= 3 and len(f.data) > 66]
                step = max(1, len(from_client) // WINDOWS_PER_CONVERSATION)
                starts = [0, *from_client[::step]]
                for s in starts[:WINDOWS_PER_CONVERSATION]:
                    window = conv[s : s + WINDOW]
                    if any(len(f.data) > MAX_FRAME for f in window) or not any(len(f.data) > 66 for f in window):
                        continue
                    renumbered = [RawFrame(i + 1, f.ts, f.linktype, f.data, f.wirelen) for i, f in enumerate(window)]
                    seeds.append(Seed(protocol, pcap.name, registry, decode_as, renumbered))
    return seeds


# -- link layers: the capture targets' seeds use every link type l2l4 reads --------------------


def _ipv6(ip4: bytes) -> bytes:
    """The TCP segment of an IPv4 packet in an IPv6 packet (addresses 2001:db8::a.b.c.d)."""
    ihl = (ip4[0] & 0x0F) * 4
    total = int.from_bytes(ip4[2:4], "big") or len(ip4)
    tcp = ip4[ihl:total]
    pre = b"\x20\x01\x0d\xb8" + b"\x00" * 8
    return struct.pack(">IHBB", 6 << 28, len(tcp), 6, 64) + pre + ip4[12:16] + pre + ip4[16:20] + tcp


def _ethertype(ip: bytes) -> bytes:
    return b"\x86\xdd" if ip[0] >> 4 == 6 else b"\x08\x00"


LINK_VARIANTS: tuple[tuple[int, Callable[[bytes], bytes]], ...] = (
    (1, lambda ip: b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01" + _ethertype(ip) + ip),
    (1, lambda ip: b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x88\xa8\x00\x0a\x81\x00\x00\x14"
     + _ethertype(ip) + ip),
    (113, lambda ip: struct.pack(">HHH8s", 0, 772, 6, b"") + _ethertype(ip) + ip),
    (276, lambda ip: _ethertype(ip) + struct.pack(">HIHBB8s", 0, 1, 772, 0, 6, b"") + ip),
    (0, lambda ip: struct.pack("<I", 30 if ip[0] >> 4 == 6 else 2) + ip),
    (108, lambda ip: struct.pack(">I", 24 if ip[0] >> 4 == 6 else 2) + ip),
    (101, lambda ip: ip),
)


def relink(frames: list[RawFrame], variant: int, v6: bool) -> list[RawFrame]:
    """Ethernet/IPv4 frames of the captures under another link layer, and IPv6 if `v6`."""
    linktype, wrap = LINK_VARIANTS[variant % len(LINK_VARIANTS)]
    out = []
    for f in frames:
        ip = _ipv6(f.data[14:]) if v6 else f.data[14:]
        data = wrap(ip)
        out.append(RawFrame(f.number, f.ts, linktype, data, len(data) + f.wirelen - len(f.data)))
    return out


# -- writers (an input of any target is saved as a capture file) -----------------------------


def write_pcap(frames: list[RawFrame], linktype: int = 1) -> bytes:
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, linktype)]
    for f in frames:
        sec = int(f.ts)
        out.append(struct.pack("<IIII", sec & 0xFFFFFFFF, int((f.ts - sec) * 1e6), len(f.data), f.wirelen))
        out.append(f.data)
    return b"".join(out)


def _block(btype: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    return struct.pack("<II", btype, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))


def write_pcapng(frames: list[RawFrame], linktype: int = 1, nano: bool = False, offset: int = 0) -> bytes:
    shb = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    opts = b""
    if nano:
        opts += struct.pack("<HHB3x", 9, 1, 9)
    if offset:
        opts += struct.pack("<HHq", 14, 8, offset)
    if opts:
        opts += struct.pack("<HH", 0, 0)
    out = [shb, _block(1, struct.pack("<HHI", linktype, 0, 262144) + opts)]
    tick = 1e9 if nano else 1e6
    for i, f in enumerate(frames):
        t = int((f.ts - offset) * tick)
        if i % 5 == 4:  # an obsolete Packet Block now and then
            body = struct.pack("<HHIIII", 0, 0, t >> 32, t & 0xFFFFFFFF, len(f.data), f.wirelen) + f.data
            out.append(_block(2, body))
        else:
            body = struct.pack("<IIIII", 0, t >> 32, t & 0xFFFFFFFF, len(f.data), f.wirelen) + f.data
            out.append(_block(6, body))
    return b"".join(out)


# -- mutations --------------------------------------------------------------------------


def _how_many(rng: random.Random, most: int) -> int:
    """1, 2, 3, ... with halving chances, at most `most`."""
    n = 1
    while n < most and rng.random() < 0.5:
        n += 1
    return n


def _flip(rng: random.Random, buf: bytearray, pos: int, lo: int, donors: list[bytes]) -> None:
    buf[pos] ^= 1 << rng.randrange(8)


def _set(rng: random.Random, buf: bytearray, pos: int, lo: int, donors: list[bytes]) -> None:
    buf[pos] = rng.randrange(256)


def _interesting(rng: random.Random, buf: bytearray, pos: int, lo: int, donors: list[bytes]) -> None:
    size = rng.choice((1, 2, 4, 8))
    v = rng.choice(INTERESTING) & ((1 << (8 * size)) - 1)
    buf[pos : pos + size] = v.to_bytes(size, rng.choice(("big", "little")))


def _add(rng: random.Random, buf: bytearray, pos: int, lo: int, donors: list[bytes]) -> None:
    if len(buf) >= pos + 4:
        v = (int.from_bytes(buf[pos : pos + 4], "big") + rng.randint(-64, 64)) & 0xFFFFFFFF
        buf[pos : pos + 4] = v.to_bytes(4, "big")


def _delete(rng: random.Random, buf: bytearray, pos: int, lo: int, donors: list[bytes]) -> None:
    del buf[pos : pos + rng.randint(1, min(64, len(buf)))]


def _insert(rng: random.Random, buf: bytearray, pos: int, lo: int, donors: list[bytes]) -> None:
    buf[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))


def _repeat(rng: random.Random, buf: bytearray, pos: int, lo: int, donors: list[bytes]) -> None:
    start = rng.randrange(len(buf))
    buf[pos:pos] = buf[start : start + rng.randint(1, 64)]


def _truncate(rng: random.Random, buf: bytearray, pos: int, lo: int, donors: list[bytes]) -> None:
    del buf[pos:]


def _splice(rng: random.Random, buf: bytearray, pos: int, lo: int, donors: list[bytes]) -> None:
    donor = rng.choice(donors) if donors else b""
    if donor:
        start = rng.randrange(len(donor))
        chunk = donor[start : start + rng.randint(1, 256)]
        if rng.random() < 0.5:
            buf[pos : pos + len(chunk)] = chunk
        else:
            buf[pos:pos] = chunk


def _fill(rng: random.Random, buf: bytearray, pos: int, lo: int, donors: list[bytes]) -> None:
    buf[pos : pos + rng.randint(1, 8)] = rng.choice((b"\x00", b"\xff")) * rng.randint(1, 8)


BYTE_OPS = (_flip, _set, _interesting, _add, _delete, _insert, _repeat, _truncate, _splice, _fill)


def mutate_bytes(rng: random.Random, data: bytes, donors: list[bytes], low: int = 0) -> bytes:
    """A few havoc-style changes to data (positions from `low` on, mostly)."""
    buf = bytearray(data)
    for _ in range(_how_many(rng, 8)):
        n = len(buf)
        lo = low if n > low and rng.random() < 0.8 else 0
        op = rng.choice(BYTE_OPS)
        if n:
            op(rng, buf, rng.randrange(lo, n), lo, donors)
        elif op in (_insert, _splice, _interesting):
            op(rng, buf, 0, 0, donors)
    return bytes(buf)


def _tcp_offset(data: bytes) -> int:
    """Offset of the TCP header in an Ethernet/IPv4 frame (the captures' link type), else 54."""
    if len(data) > 14 and data[14] >> 4 == 4:
        return 14 + (data[14] & 0x0F) * 4
    return 54


def mutate_frames(rng: random.Random, frames: list[RawFrame], donors: list[bytes]) -> list[RawFrame]:
    """Changes to a list of frames: their bytes (headers or payload), and which frames arrive in
    which order."""
    out = list(frames)
    for _ in range(_how_many(rng, 6)):
        if not out:
            break
        i = rng.randrange(len(out))
        f = out[i]
        op = rng.randrange(10)
        if op <= 3:  # payload and headers of one frame
            low = _tcp_offset(f.data) + 20 if rng.random() < 0.7 else 0
            data = mutate_bytes(rng, f.data, donors, low)
            out[i] = RawFrame(f.number, f.ts, f.linktype, data, max(len(data), f.wirelen))
        elif op == 4:  # a lost segment
            del out[i]
        elif op == 5:  # a retransmission, maybe with other bytes
            out.insert(rng.randrange(len(out) + 1), f)
        elif op == 6 and len(out) > 1:  # out of order
            j = rng.randrange(len(out))
            out[i], out[j] = out[j], out[i]
        elif op == 7:  # cut by the snaplen
            keep = rng.randrange(len(f.data) + 1)
            out[i] = RawFrame(f.number, f.ts, f.linktype, f.data[:keep], f.wirelen)
        elif op == 8:  # a sequence or acknowledgement number moved
            t = _tcp_offset(f.data) + rng.choice((4, 8))
            if len(f.data) >= t + 4:
                v = int.from_bytes(f.data[t : t + 4], "big")
                v = (v + rng.choice((-1, 1)) * rng.choice((1, 2, 7, 100, 1 << 16, 1 << 31))) & 0xFFFFFFFF
                data = f.data[:t] + v.to_bytes(4, "big") + f.data[t + 4 :]
                out[i] = RawFrame(f.number, f.ts, f.linktype, data, f.wirelen)
        else:  # TCP flags
            t = _tcp_offset(f.data) + 13
            if len(f.data) > t:
                data = f.data[:t] + bytes([f.data[t] ^ (1 << rng.randrange(5))]) + f.data[t + 1 :]
                out[i] = RawFrame(f.number, f.ts, f.linktype, data, f.wirelen)
    return [RawFrame(n + 1, f.ts, f.linktype, f.data, f.wirelen) for n, f in enumerate(out)]


# -- running one input ------------------------------------------------------------------


def load_tls_seeds() -> list[Seed]:
    """The TLS connections of captures/tls, whole (the keys come from their handshakes); their
    key logs are gathered in TLS_KEYLOG."""
    seeds: list[Seed] = []
    keys = []
    for pcap in sorted((CAPTURES / "tls").glob("*.pcap")):
        meta = json.loads(pcap.with_suffix(".json").read_text())
        keys.append(pcap.with_suffix(".keys").read_text())
        decode_as = [f"{p}={meta['protocol']}" for p in meta["ports"]]
        registry = DissectorRegistry(decode_as={p: meta["protocol"] for p in meta["ports"]})
        with CaptureFile(str(pcap)) as cap:
            convs: dict[int, list[RawFrame]] = {}
            for f in cap:
                seg = decode(f)
                if seg is not None and meta["tls_port"] in (seg.sport, seg.dport):
                    convs.setdefault(seg.sport + seg.dport, []).append(f)
        for conv in convs.values():
            window = conv[:MAX_TLS_FRAMES]
            renumbered = [RawFrame(i + 1, f.ts, f.linktype, f.data, f.wirelen) for i, f in enumerate(window)]
            seeds.append(Seed("tls", pcap.name, registry, decode_as, renumbered))
    TLS_KEYLOG.write_text("".join(keys))
    return seeds


def run_frames(frames: list[RawFrame], registry: DissectorRegistry, opts: Options = OPTS) -> int:
    pipe = Pipeline(registry, opts)
    n = 0
    for f in frames:
        n += len(pipe.feed(f))
    return n + len(pipe.finish())


def run_capture(data: bytes, registry: DissectorRegistry, name: str = "fuzz.pcap", keylog: str | None = None) -> int:
    """CaptureFile and Pipeline over file bytes; UsageError (not a capture) is the documented
    refusal."""
    try:
        cap = CaptureFile(name, io.BytesIO(data))
    except UsageError:
        return -1
    pipe = Pipeline(registry, OPTS if keylog is None else Options(max_decompressed=1 << 20, tls_keylog=keylog))
    n = 0
    with cap:
        for f in cap:
            n += len(pipe.feed(f))
    return n + len(pipe.finish())


def _differential(frames: list[RawFrame], registry: DissectorRegistry, output: Callable[[Any], object],
                  modules: tuple[str, ...], what: str) -> int:
    """run_frames, each message then given to `output` twice: with the compiled twins and with
    the pure functions of `modules` (the same, or an AssertionError)."""
    pipe = Pipeline(registry, OPTS)
    n = 0
    for f in [*frames, None]:
        for m in pipe.feed(f) if f is not None else pipe.finish():
            n += 1
            bound = output(m)
            with contextlib.ExitStack() as stack:
                for module in modules:
                    stack.enter_context(accel.pure_functions(module))
                pure = output(m)
            if bound != pure:
                raise AssertionError(f"the compiled and the pure {what} of a message differ")
    return n


def _rows(m: Any) -> str:
    from kdissect.spark import records, rows

    return repr((rows.combined_values(m, 256), rows.message_row(m), records.extract(m, 256), rows.transaction_row(m)))


def run_rows(frames: list[RawFrame], registry: DissectorRegistry) -> int:
    return _differential(frames, registry, _rows, ("kdissect.spark.rows", "kdissect.spark.records"), "Spark rows")


def _json(m: Any) -> bytes:
    from kdissect.render import jsonout

    return jsonout.message_json(m, 256) + jsonout.message_json(m, 0)


def run_json(frames: list[RawFrame], registry: DissectorRegistry) -> int:
    return _differential(frames, registry, _json, ("kdissect.render.jsonout",), "JSON texts")


# -- the loop ---------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    make: Callable[[random.Random], tuple[Any, DissectorRegistry, list[str]]]  # input, registry, --decode-as
    run: Callable[[Any, DissectorRegistry], int]
    save: Callable[[Any], tuple[bytes, str]]  # capture bytes and extension


def build_target(name: str, seeds: list[Seed]) -> Target:
    if name == "tls":
        tls_seeds = load_tls_seeds()
        tls_donors = [f.data[_tcp_offset(f.data) + 20 :] for s in tls_seeds for f in s.frames]
        tls_opts = Options(max_decompressed=1 << 20, tls_keylog=str(TLS_KEYLOG))

        def make_tls(rng: random.Random) -> tuple[Any, DissectorRegistry, list[str]]:
            s = rng.choice(tls_seeds)
            return mutate_frames(rng, s.frames, tls_donors), s.registry, s.decode_as

        def run_tls(frames: list[RawFrame], registry: DissectorRegistry) -> int:
            return run_frames(frames, registry, tls_opts)

        return Target(name, make_tls, run_tls, lambda frames: (write_pcap(frames), "pcap"))
    if name in PROTOCOLS or name in ("spark", "json"):
        mine = [s for s in seeds if s.protocol == name or name in ("spark", "json")]
        donors = [f.data[_tcp_offset(f.data) + 20 :] for s in mine for f in s.frames]

        def make_frames(rng: random.Random) -> tuple[Any, DissectorRegistry, list[str]]:
            s = rng.choice(mine)
            return mutate_frames(rng, s.frames, donors), s.registry, s.decode_as

        run = {"spark": run_rows, "json": run_json}.get(name, run_frames)
        return Target(name, make_frames, run,
                      lambda frames: (write_pcap(frames), "pcap"))

    files: dict[str, list[tuple[bytes, Seed]]] = {}  # by protocol: each protocol as often as the others
    for i, s in enumerate(seeds):
        frames = relink(s.frames, i, v6=i % 3 == 2)
        if name == "pcapng":
            data = write_pcapng(frames, frames[0].linktype, nano=i % 2 == 1, offset=1000 if i % 4 == 0 else 0)
        else:
            data = write_pcap(frames, frames[0].linktype)
        files.setdefault(s.protocol, []).append((data, s))
    groups = list(files.values())
    donors = [d for group in groups for d, _ in group]
    ext = {"pcap": "pcap", "pcapng": "pcapng", "gzip": "pcap.gz"}[name]

    def make_file(rng: random.Random) -> tuple[Any, DissectorRegistry, list[str]]:
        data, s = rng.choice(rng.choice(groups))
        if name == "gzip":
            if rng.random() < 0.5:  # damage to the deflate stream (or the gzip header and trailer)
                data = mutate_bytes(rng, gzip.compress(data, 1, mtime=0), [], 10)
            else:  # a damaged capture, compressed
                data = gzip.compress(mutate_bytes(rng, data, donors), 1, mtime=0)
        else:
            data = mutate_bytes(rng, data, donors)
        return data, s.registry, s.decode_as

    def run_file(data: bytes, registry: DissectorRegistry) -> int:
        return run_capture(data, registry, "fuzz." + ext)

    return Target(name, make_file, run_file, lambda data: (data, ext))


@dataclass
class Stats:
    inputs: int = 0
    seconds: float = 0.0
    slowest: float = 0.0
    findings: dict[str, int] = field(default_factory=dict)


class Hang(Exception):
    pass


def _alarm(_sig: int, _frame: Any) -> None:
    raise Hang(f"still running after {HARD_TIMEOUT_S} s")


def _where(exc: BaseException) -> str:
    """The innermost kdissect source line of a traceback."""
    where = "?"
    for fs in traceback.extract_tb(exc.__traceback__):
        if "/kdissect/" in fs.filename:
            where = f"{fs.filename.split('/kdissect/', 1)[1]}:{fs.lineno}"
    return "kdissect/" + where if where != "?" else where


def fuzz(target: Target, runs: int, seed: int, out: Path, max_seconds: float, max_mb: int,
         report_every: float = 10.0, job: int = 0) -> Stats:
    rng = random.Random(f"{target.name}:{seed}" + (f":{job}" if job else ""))
    stats = Stats()
    signal.signal(signal.SIGALRM, _alarm)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = last = time.perf_counter()
    for i in range(runs):
        inp, registry, decode_as = target.make(rng)
        t0 = time.perf_counter()
        finding = None
        signal.setitimer(signal.ITIMER_REAL, HARD_TIMEOUT_S)
        try:
            target.run(inp, registry)
        except (Exception, Hang) as e:  # noqa: BLE001 - every escape is a finding
            finding = (f"crash {type(e).__name__} at {_where(e)}", f"{type(e).__name__}: {e}")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        took = time.perf_counter() - t0
        stats.slowest = max(stats.slowest, took)
        if finding is None and took > max_seconds:
            finding = (f"slow input ({took:.2f} s)", "")
        now_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if finding is None and now_peak - peak > max_mb * 1024:
            finding = (f"memory (peak +{(now_peak - peak) // 1024} MB)", "")
        peak = now_peak
        if finding is not None:
            _record(target, stats, finding, inp, decode_as, out, i)
        stats.inputs += 1
        now = time.perf_counter()
        if now - last >= report_every:
            last = now
            print(f"{target.name}{f' job {job}' if job else ''}: {stats.inputs} inputs, "
                  f"{stats.inputs / (now - start):.0f}/s, "
                  f"{sum(stats.findings.values())} findings", flush=True)
    stats.seconds = time.perf_counter() - start
    return stats


def _record(target: Target, stats: Stats, finding: tuple[str, str], inp: Any, decode_as: list[str],
            out: Path, i: int) -> None:
    key, detail = finding
    kind = key.split(" ", 1)[0]
    first = key not in stats.findings or kind != "crash"
    stats.findings[key] = stats.findings.get(key, 0) + 1
    if not first or sum(1 for k in stats.findings if k.startswith(kind)) > 20 and kind != "crash":
        return
    data, ext = target.save(inp)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{target.name}-{kind}-{hashlib.sha1(data).hexdigest()[:12]}.{ext}"
    path.write_bytes(data)
    replay = " ".join(f"--decode-as {d}" for d in decode_as)
    if target.name == "tls":
        replay += f" --tls-keylog {TLS_KEYLOG}"
    print(f"FINDING {target.name} input {i}: {key} {detail}\n  saved {path}\n  replay: "
          f"python3 tools/fuzz.py --replay {path} {replay}".rstrip(), flush=True)


_FORKED: Target | None = None  # the target of --jobs workers (inherited by fork: closures do not pickle)


def _job(j: int, runs: int, seed: int, out: Path, max_seconds: float, max_mb: int) -> Stats:
    assert _FORKED is not None
    return fuzz(_FORKED, runs, seed, out, max_seconds, max_mb, 10.0, j)


def _parallel(target: Target, args: argparse.Namespace) -> Stats:
    """--runs inputs shared by --jobs forked processes."""
    import multiprocessing

    global _FORKED
    _FORKED = target
    share = [args.runs // args.jobs + (1 if j < args.runs % args.jobs else 0) for j in range(args.jobs)]
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        parts = pool.starmap(_job, [(j, share[j], args.seed, args.out, args.max_seconds, args.max_mb)
                                    for j in range(args.jobs)])
    total = Stats(seconds=time.perf_counter() - start)
    for st in parts:
        total.inputs += st.inputs
        total.slowest = max(total.slowest, st.slowest)
        for key, n in st.findings.items():
            total.findings[key] = total.findings.get(key, 0) + n
    return total


def replay(path: Path, decode_as: list[str], keylog: str | None = None) -> int:
    """Run a saved input with the traceback shown."""
    from kdissect.protocols import parse_decode_as

    registry = DissectorRegistry(decode_as=parse_decode_as(decode_as))
    t0 = time.perf_counter()
    if path.name.startswith("spark-"):  # its frames, made into Spark rows both ways
        with CaptureFile(path.name, io.BytesIO(path.read_bytes())) as cap:
            n = run_rows(list(cap), registry)
    else:
        n = run_capture(path.read_bytes(), registry, path.name, keylog)
    print(f"{path}: {n} messages in {time.perf_counter() - t0:.3f} s, no exception")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="tools/fuzz.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="all", choices=[*TARGETS, "all"],
                   help="what to fuzz (all: each target in turn, --runs inputs each)")
    p.add_argument("--runs", type=int, default=100_000, help="inputs per target (default 100000)")
    p.add_argument("--seed", type=int, default=1, help="random seed: the same seed gives the same inputs")
    p.add_argument("--out", type=Path, default=Path("fuzz-findings"), help="where findings are saved")
    p.add_argument("--max-seconds", type=float, default=1.0, help="an input slower than this is a finding")
    p.add_argument("--max-mb", type=int, default=256, help="an input that raises the peak memory by more "
                   "than this is a finding")
    p.add_argument("--jobs", type=int, default=1, help="processes (job j > 0 draws from its own stream of "
                   "the seed; the inputs of --jobs 1 are those of job 0)")
    p.add_argument("--replay", type=Path, metavar="FILE", help="run one saved input (a capture) and exit")
    p.add_argument("--decode-as", action="append", default=[], metavar="PORT=PROTO", help="with --replay")
    p.add_argument("--tls-keylog", metavar="FILE", help=f"with --replay of a tls finding: {TLS_KEYLOG}")
    p.add_argument("--list-seeds", action="store_true", help="print the seed inputs and exit")
    args = p.parse_args(argv)
    sys.setrecursionlimit(10_000)
    if args.replay:
        return replay(args.replay, args.decode_as, args.tls_keylog)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = 4 << 30
    asan = "libasan" in os.environ.get("LD_PRELOAD", "")  # its shadow memory needs the address space
    if not asan and (hard == resource.RLIM_INFINITY or hard > limit):
        # a runaway allocation is a MemoryError, not a dead machine
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    DissectorRegistry()  # (loads every dissector, and with them the compiled modules they use)
    if args.target in ("spark", "all"):
        import kdissect.spark.records
        import kdissect.spark.rows  # noqa: F401 - (their compiled twins, for the line below)
    compiled = accel.loaded()
    twins = [m for m in compiled if m.rpartition(".")[2].startswith("_")]
    line = f"compiled core: {len(compiled)} modules, twins {', '.join(twins)}" if compiled else \
        "compiled core: none (pure Python)"
    print(line + (" under AddressSanitizer" if asan else ""))
    seeds = load_seeds()
    if args.list_seeds:
        for s in seeds:
            print(f"{s.protocol:<10} {s.capture:<40} {len(s.frames)} frames, {sum(len(f.data) for f in s.frames)} bytes")
        return 0
    summary = []
    for name in TARGETS if args.target == "all" else (args.target,):
        target = build_target(name, seeds)
        if args.jobs > 1:
            st = _parallel(target, args)
        else:
            st = fuzz(target, args.runs, args.seed, args.out, args.max_seconds, args.max_mb)
        rate = st.inputs / st.seconds if st.seconds else 0.0
        print(f"{name}: {st.inputs} inputs in {st.seconds:.1f} s ({rate:.0f} inputs/s), slowest "
              f"{st.slowest * 1000:.1f} ms, {sum(st.findings.values())} findings", flush=True)
        for key, n in sorted(st.findings.items()):
            print(f"  {n:>7}  {key}")
        summary.append({"target": name, "inputs": st.inputs, "seconds": round(st.seconds, 1),
                        "inputs_per_s": round(rate), "findings": st.findings})
    print(json.dumps(summary))
    return 1 if any(s["findings"] for s in summary) else 0


if __name__ == "__main__":
    sys.exit(main())
