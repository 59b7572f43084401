#!/usr/bin/env python3
"""kdissect against tshark on the same captures, in one run: CPU time and ratios.

    python3 bench/bench_tshark.py CAPTURE [CAPTURE ...] [--repeat 3] [--kdissect "kdissect"]

For each capture (a workload: generate them with bench/gen_capture.py), four pairs of commands,
all writing to /dev/null:

  export   `kdissect export --format jsonl`   against `tshark -T json`
  read     `kdissect read`                     against `tshark -r`
  start-up both `read` commands on a capture of the first message of CAPTURE only
  pure     `kdissect export` with KDISSECT_PURE=1 (the pure-Python path) against the default

Each pair runs alternately, `--repeat` times; the figure kept is the minimum CPU time (user +
system, from the kernel's accounting of the finished child), since the machines are shared
and noise only ever adds time. A ratio above 1 means kdissect used less CPU than the other
command. Kafka ports are found from the capture's SYNs (the mock cluster listens on random
ports) and given to both tools (`--decode-as`, `-d tcp.port==P,kafka`).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

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


def first_message(path: str, out: str, ports: list[int]) -> None:
    """The handshake and first data segment of the first connection to a Kafka port."""
    with open(path, "rb") as f, open(out, "wb") as o:
        reader = dpkt.pcap.Reader(f)
        writer = dpkt.pcap.Writer(o, linktype=reader.datalink())
        conn = None
        for ts, buf in reader:
            tcp = dpkt.ethernet.Ethernet(buf).data.data
            if not isinstance(tcp, dpkt.tcp.TCP):
                continue
            key = frozenset(((tcp.sport, 0), (tcp.dport, 1)))
            if conn is None and tcp.dport in ports and tcp.flags & dpkt.tcp.TH_SYN:
                conn = key
            if key == conn:
                writer.writepkt(buf, ts)
                if tcp.data and tcp.dport in ports:
                    return


@dataclass
class Run:
    cpu: float = float("inf")
    rss_mb: float = 0.0


def run_once(cmd: list[str], env: dict[str, str] | None, into: Run) -> None:
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen(cmd, stdout=null, stderr=subprocess.PIPE, env=env)
        assert p.stderr is not None
        err = p.stderr.read()
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {shlex.join(cmd)}\n{err.decode(errors='replace')[-2000:]}")
    into.cpu = min(into.cpu, usage.ru_utime + usage.ru_stime)
    into.rss_mb = max(into.rss_mb, usage.ru_maxrss / 1024)


def pair(a: list[str], b: list[str], repeat: int, env_a: dict[str, str] | None = None,
         env_b: dict[str, str] | None = None) -> tuple[Run, Run]:
    ra, rb = Run(), Run()
    for _ in range(repeat):
        run_once(a, env_a, ra)
        run_once(b, env_b, rb)
    return ra, rb


def count_messages(kd: list[str], path: str, ports: list[str]) -> int:
    out = subprocess.run(kd + ["export", path, "--format", "fields", "-e", "kdissect.frame", *ports],
                         capture_output=True, check=True).stdout
    return out.count(b"\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="+")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kdissect", default="kdissect")
    a = ap.parse_args()
    if not shutil.which("tshark"):
        sys.exit("tshark is not installed (apt-get install tshark)")
    kd = shlex.split(a.kdissect)
    # kdissect runs as installed: its bytecode cached (its output is written in blocks off a
    # terminal whatever PYTHONUNBUFFERED says).
    kd_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    pure_env = {**kd_env, "KDISSECT_PURE": "1"}
    print(f"{'capture / command':<44}{'kdissect s':>11}{'other s':>10}{'ratio':>8}{'msgs/CPU-s':>12}"
          f"{'max RSS MB':>11}")
    for path in a.captures:
        size_mb = os.path.getsize(path) / 1e6
        ports = server_ports(path)
        kd_ports = [arg for p in ports for arg in ("--decode-as", f"{p}=kafka")]
        ts_ports = [arg for p in ports for arg in ("-d", f"tcp.port=={p},kafka")]
        messages = count_messages(kd, path, kd_ports)
        print(f"{os.path.basename(path)}: {size_mb:.1f} MB, {messages} Kafka messages, {len(ports)} ports")
        with tempfile.TemporaryDirectory() as tmp:
            one = os.path.join(tmp, "one-message.pcap")
            first_message(path, one, ports)
            rows = [
                ("export jsonl vs tshark -T json", kd + ["export", path, "--format", "jsonl", *kd_ports],
                 ["tshark", "-n", "-r", path, *ts_ports, "-T", "json"], messages, kd_env),
                ("read vs tshark -r", kd + ["read", path, *kd_ports], ["tshark", "-n", "-r", path, *ts_ports],
                 messages, kd_env),
                ("start-up: read one message vs tshark -r", kd + ["read", one, *kd_ports],
                 ["tshark", "-n", "-r", one, *ts_ports], 1, kd_env),
            ]
            for name, kcmd, tcmd, n, env in rows:
                k, t = pair(kcmd, tcmd, a.repeat, env)
                print(f"  {name:<42}{k.cpu:11.2f}{t.cpu:10.2f}{t.cpu / k.cpu:7.2f}x{n / k.cpu:12.0f}"
                      f"{k.rss_mb:11.0f}")
            export = kd + ["export", path, "--format", "jsonl", *kd_ports]
            comp, pure = pair(export, export, a.repeat, kd_env, pure_env)
            print(f"  {'export: compiled core vs KDISSECT_PURE=1':<42}{comp.cpu:11.2f}{pure.cpu:10.2f}"
                  f"{pure.cpu / comp.cpu:7.2f}x{messages / comp.cpu:12.0f}{comp.rss_mb:11.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
