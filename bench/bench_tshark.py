#!/usr/bin/env python3
"""kdissect against tshark on the same capture, in one run: throughput and ratios.

    python3 bench/bench_tshark.py CAPTURE [--repeat 1] [--kdissect "kdissect"]

Times `kdissect export --format jsonl` against `tshark -T json` and `kdissect read` against
`tshark -r`, all writing to /dev/null. Kafka ports are found from the capture's SYNs (the mock
cluster listens on random ports) and given to both tools (`--decode-as`, `-d tcp.port==P,kafka`).
Generate a capture with bench/gen_capture.py.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time

import dpkt


def server_ports(path: str, limit: int = 64) -> list[int]:
    """Destination ports of SYNs (without ACK) in the capture."""
    ports: set[int] = set()
    with open(path, "rb") as f:
        for _, buf in dpkt.pcap.Reader(f):
            eth = dpkt.ethernet.Ethernet(buf)
            ip = eth.data
            if not isinstance(ip, (dpkt.ip.IP, dpkt.ip6.IP6)) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            if tcp.flags & dpkt.tcp.TH_SYN and not tcp.flags & dpkt.tcp.TH_ACK:
                ports.add(tcp.dport)
                if len(ports) >= limit:
                    break
    return sorted(ports)


def timed(cmd: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        with open(os.devnull, "wb") as null:
            r = subprocess.run(cmd, stdout=null, stderr=subprocess.PIPE)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            sys.exit(f"failed ({r.returncode}): {shlex.join(cmd)}\n{r.stderr.decode(errors='replace')[-2000:]}")
        best = min(best, dt)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--kdissect", default="kdissect")
    a = ap.parse_args()
    if not shutil.which("tshark"):
        sys.exit("tshark is not installed (apt-get install tshark)")
    size_mb = os.path.getsize(a.capture) / 1e6
    ports = server_ports(a.capture)
    kd = shlex.split(a.kdissect)
    kd_ports = [arg for p in ports for arg in ("--decode-as", f"{p}=kafka")]
    ts_ports = [arg for p in ports for arg in ("-d", f"tcp.port=={p},kafka")]
    runs = [
        ("export jsonl", kd + ["export", a.capture, "--format", "jsonl", *kd_ports],
         "tshark -T json", ["tshark", "-n", "-r", a.capture, *ts_ports, "-T", "json"]),
        ("read", kd + ["read", a.capture, *kd_ports],
         "tshark -r", ["tshark", "-n", "-r", a.capture, *ts_ports]),
    ]
    print(f"capture: {a.capture} ({size_mb:.1f} MB, {len(ports)} Kafka ports)")
    print(f"{'kdissect':<16}{'s':>8}{'MB/s':>9}   {'tshark':<16}{'s':>8}{'MB/s':>9}   ratio")
    for kname, kcmd, tname, tcmd in runs:
        kt = timed(kcmd, a.repeat)
        tt = timed(tcmd, a.repeat)
        print(f"{kname:<16}{kt:8.2f}{size_mb / kt:9.1f}   {tname:<16}{tt:8.2f}{size_mb / tt:9.1f}   "
              f"{tt / kt:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
