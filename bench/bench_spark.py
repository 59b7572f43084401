"""Benchmark: `kdissect spark` (Spark local[N]) against the single-process export, same run.

    python bench/bench_spark.py [--size-mb 1100] [--dir /tmp/kdissect-bench] [--master local[2]]

A capture set of at least --size-mb is generated under --dir (not part of the project): the
IPv4 conversations of real captures (../shared/captures, else captures/) replayed many times,
each copy with its own addresses (10.x.y.z) and shifted timestamps, into many pcap files plus
one big file (which Spark reads by byte ranges). Then:
- single: one process decodes every file and writes JSON Lines, whole values, as `kdissect
  export -F jsonl` does per file (without a process start per file);
- spark: Spark start-up, then the job writing the three parquet tables, whole values, as
  `kdissect spark` does.
Prints both times, the speed-up with and without Spark's start-up, and the row counts.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import struct
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO / ".." / "shared" / "captures"
ETH_IPV4 = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02\x08\x00"
PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
REC = struct.Struct("<IIII")


def _ip_offset(linktype: int, d: bytes) -> int | None:
    """Where the IPv4 header starts in a frame, or None (not IPv4)."""
    if linktype == 1:
        off, etype = 14, d[12:14]
        while etype in (b"\x81\x00", b"\x88\xa8") and len(d) >= off + 4:
            etype, off = d[off + 2:off + 4], off + 4
        return off if etype == b"\x08\x00" else None
    if linktype == 276:
        return 20 if d[0:2] == b"\x08\x00" else None
    if linktype == 113:
        return 16 if d[14:16] == b"\x08\x00" else None
    if linktype in (0, 108):
        return 4 if d[0:4] in (b"\x02\x00\x00\x00", b"\x00\x00\x00\x02") else None
    return 0 if linktype in (101, 12, 14, 228) and d[:1] and d[0] >> 4 == 4 else None


def load_packets(sources: list[str]) -> list[tuple[float, bytes]]:
    """(relative time, IPv4 packet) of every source capture, captures one after the other."""
    from kdissect.capture.pcapfile import CaptureFile

    out: list[tuple[float, bytes]] = []
    base = 0.0
    for path in sources:
        first = None
        last = 0.0
        with CaptureFile(path) as cap:
            for fr in cap:
                off = _ip_offset(fr.linktype, fr.data)
                if off is None or len(fr.data) < off + 20:
                    continue
                first = fr.ts if first is None else first
                last = fr.ts - first
                out.append((base + last, fr.data[off:]))
        base += last + 1.0
    return out


def _readdress(ip: bytes, copy: int) -> bytes:
    """The packet with both addresses moved into 10.<copy>.x.y (the original host keeps its
    last two octets), so that every copy is a set of new conversations."""
    hi, lo = (copy >> 8) & 0xFF, copy & 0xFF

    def addr(a: bytes) -> bytes:
        return bytes((10, hi, lo, (a[2] * 7 + a[3]) & 0xFF))
    return ip[:12] + addr(ip[12:16]) + addr(ip[16:20]) + ip[20:]


def write_file(path: Path, packets: list[tuple[float, bytes]], copies: range, span: float) -> int:
    with open(path, "wb") as f:
        f.write(PCAP_HEADER)
        for copy in copies:
            start = 1_700_000_000.0 + copy * span
            for rel, ip in packets:
                ts = start + rel
                sec = int(ts)
                frame = ETH_IPV4 + _readdress(ip, copy)
                f.write(REC.pack(sec, int((ts - sec) * 1e6), len(frame), len(frame)))
                f.write(frame)
    return path.stat().st_size


def generate(out: Path, size_mb: int, big_mb: int = 200) -> list[Path]:
    sources = sorted(glob.glob(str(SHARED / "*" / "*.pcap*"))) or sorted(glob.glob(str(REPO / "captures" / "*.pcap*")))
    if not sources:
        sys.exit("no source captures (../shared/captures or captures/)")
    packets = load_packets(sources)
    span = packets[-1][0] + 1.0
    one = sum(16 + 14 + len(p) for _, p in packets)
    per_file = max(1, (16 << 20) // one)
    want = size_mb << 20
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    copy = total = 0
    big_copies = max(1, (big_mb << 20) // one)
    files.append(out / "big.pcap")
    total += write_file(files[-1], packets, range(copy, copy + big_copies), span)
    copy += big_copies
    while total < want:
        files.append(out / f"part-{len(files):04d}.pcap")
        total += write_file(files[-1], packets, range(copy, copy + per_file), span)
        copy += per_file
    print(f"generated {len(files)} files, {total / 1e6:.0f} MB, {copy} copies of {len(packets)} packets "
          f"from {len(sources)} captures", flush=True)
    return files


def single(files: list[Path], out: Path) -> tuple[float, int]:
    from kdissect.dissect.base import Options
    from kdissect.pipeline import dissect_file
    from kdissect.protocols import DissectorRegistry
    from kdissect.render.jsonout import export_json

    t = time.perf_counter()
    n = 0
    with open(out, "wb") as f:
        for path in files:
            for m in dissect_file(str(path), DissectorRegistry(), Options(max_bytes=0)):
                f.write(export_json(m, 0, False) + b"\n")
                n += 1
    return time.perf_counter() - t, n


def spark(files: list[Path], out: Path, master: str, split: int | None = None) -> tuple[float, float, dict[str, int]]:
    from kdissect.spark import job, session
    from kdissect.spark.worker import Config

    t = time.perf_counter()
    s = session.start(master, log_path=str(out) + ".log")
    started = time.perf_counter() - t
    try:
        p = job.make_plan(s, [str(f) for f in files], split)
        ranges = sum(len(c.ranges) for c in p.ranged)
        print(f"spark plan: {p.tasks} tasks ({ranges} of them byte ranges of big files)", flush=True)
        r = job.run(s, p, str(out), Config(max_bytes=0), overwrite=True)
        if p.ranged:
            size = sum(c.size for c in p.ranged)
            print(f"ranges read {p.ranges_read:,} bytes of {size:,} ({p.ranges_read / size:.3f}x)", flush=True)
    finally:
        s.stop()
    return time.perf_counter() - t, started, r.counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1100)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/kdissect-bench"))
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--keep", action="store_true", help="keep the generated captures")
    ap.add_argument("--split-kb", type=int, help="capture bytes per task (default: Spark's plan)")
    ap.add_argument("--spark-only", action="store_true", help="skip the single-process run")
    args = ap.parse_args()
    caps = args.dir / "captures"
    files = sorted(caps.glob("*.pcap")) if caps.exists() else []
    if sum(f.stat().st_size for f in files) < args.size_mb << 20:
        shutil.rmtree(caps, ignore_errors=True)
        files = generate(caps, args.size_mb)
    size = sum(f.stat().st_size for f in files)
    t_single, n_single = (0.0, 0) if args.spark_only else single(files, args.dir / "single.jsonl")
    if not args.spark_only:
        print(f"single process: {t_single:.1f} s, {n_single} messages, {size / 1e6 / t_single:.1f} MB/s", flush=True)
    split = args.split_kb * 1024 if args.split_kb else None
    t_spark, started, counts = spark(files, args.dir / "tables", args.master, split)
    work = t_spark - started
    print(f"spark {args.master}: {t_spark:.1f} s total, start-up {started:.1f} s, job {work:.1f} s; {counts}")
    if args.spark_only:
        return
    print(f"speed-up: {t_single / t_spark:.2f}x including Spark start-up, {t_single / work:.2f}x without")
    if counts["messages"] != n_single:
        print(f"MISMATCH: {n_single} messages single-process, {counts['messages']} in Spark")
    if not args.keep:
        shutil.rmtree(caps, ignore_errors=True)
    os.remove(args.dir / "single.jsonl")


if __name__ == "__main__":
    main()
