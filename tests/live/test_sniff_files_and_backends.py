"""`kdissect sniff` on loopback with a real Kafka client: pcapng ring buffers (-b) read back by
kdissect, tshark and capinfos, and the libpcap backend (--backend pcap) against the default
TPACKET_V3 one."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import MockCluster, export_jsonl, require_live, start_sniff
from test_sniff_kafka import consume, produce, sniff_args

from kdissect.capture.pcapfile import CaptureFile
from kdissect.capture.pcapwriter import PcapngWriter

pytestmark = pytest.mark.live
RING_NAME = re.compile(r"^ring_(\d{5})_(\d{14})\.pcapng$")


def key(m: dict[str, Any]) -> tuple[int, int, str, str]:
    return (m["stream"], m["frame"], m["kind"], m["summary"])


def ring_files(directory: Path) -> list[Path]:
    paths = sorted(p for p in directory.iterdir() if p.name.startswith("ring_"))
    assert all(RING_NAME.match(p.name) for p in paths), [p.name for p in paths]
    return paths


def check_readable(path: Path) -> int:
    """The packets of one file, checked by kdissect's reader and, when installed, by capinfos
    and tshark (interface name included)."""
    cap = CaptureFile(str(path))
    n = sum(1 for _ in cap)
    assert cap.warnings == [], cap.warnings
    if shutil.which("capinfos"):
        info = subprocess.run(["capinfos", "-c", "-I", str(path)], capture_output=True, text=True, timeout=30)
        assert info.returncode == 0, info.stderr
        assert re.search(rf"Number of packets:\s+{n}\n", info.stdout), info.stdout
        assert re.search(r"Name = lo\n", info.stdout), info.stdout
    if shutil.which("tshark"):
        res = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.interface_name"],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert res.stdout.split() == ["lo"] * n
    return n


def concatenate(paths: list[Path], out: Path) -> None:
    """The files of a ring, one after the other, as one pcapng (what mergecap -a does)."""
    with PcapngWriter(str(out), tsresol=9) as w:
        for p in paths:
            for f in CaptureFile(str(p)):
                w.write(f.data, f.wirelen, f.ts, f.linktype)


def test_ring_buffer_by_size_holds_every_message(mock_kafka: MockCluster, tmp_path: Path) -> None:
    ring_dir = tmp_path / "ring"
    ring_dir.mkdir()
    sn = start_sniff(sniff_args(mock_kafka, "-w", str(ring_dir / "ring.pcapng"), "-b", "filesize:8"))
    produce(mock_kafka.bootstrap, 150)
    assert consume(mock_kafka.bootstrap, 150) == 150
    time.sleep(0.3)
    assert sn.stop() == 0, sn.stderr_lines
    live = sn.messages()
    assert sum(m["info"]["op"] == "Produce" for m in live) == 300

    paths = ring_files(ring_dir)
    assert len(paths) >= 3, [p.name for p in paths]
    assert [int(RING_NAME.match(p.name)[1]) for p in paths] == list(range(1, len(paths) + 1))  # type: ignore[index]
    counts = [check_readable(p) for p in paths]
    assert all(p.stat().st_size >= 8000 for p in paths[:-1])  # a file switches once it holds 8 kB
    packets = int(re.match(r"kdissect: (\d+) packets", sn.summary)[1])  # type: ignore[index]
    assert sum(counts) == packets and f"{packets} written to {len(paths)} files, the last " in sn.summary

    whole = tmp_path / "whole.pcapng"
    concatenate(paths, whole)
    back = export_jsonl(whole, "--decode-as", f"{mock_kafka.ports[0]}=kafka")
    assert sorted(map(key, back)) == sorted(map(key, live))


def test_ring_buffer_keeps_the_last_files(mock_kafka: MockCluster, tmp_path: Path) -> None:
    sn = start_sniff(sniff_args(mock_kafka, "-w", str(tmp_path / "ring.pcapng"), "-b", "filesize:4",
                                "-b", "files:3"))
    produce(mock_kafka.bootstrap, 100)
    time.sleep(0.3)
    assert sn.stop() == 0, sn.stderr_lines
    opened = int(re.search(r"written to (\d+) files \(3 kept\)", sn.summary)[1])  # type: ignore[index]
    assert opened > 3, sn.summary
    paths = ring_files(tmp_path)
    assert [int(RING_NAME.match(p.name)[1]) for p in paths] == [opened - 2, opened - 1, opened]  # type: ignore[index]
    assert sn.summary.endswith(str(paths[-1]))
    for p in paths:
        check_readable(p)


def test_pcap_backend_decodes_what_the_default_backend_decodes(mock_kafka: MockCluster, tmp_path: Path) -> None:
    from kdissect.capture import bpf

    if bpf.libpcap() is None:
        pytest.skip("libpcap is not installed")
    out = tmp_path / "pcap-backend.pcapng"
    default = start_sniff(sniff_args(mock_kafka))
    viapcap = start_sniff(sniff_args(mock_kafka, "--backend", "pcap", "-w", str(out)))
    produce(mock_kafka.bootstrap, 40)
    assert consume(mock_kafka.bootstrap, 40) == 40
    time.sleep(0.3)
    assert default.stop() == 0, default.stderr_lines
    assert viapcap.stop() == 0, viapcap.stderr_lines
    a, b = default.messages(), viapcap.messages()
    assert sum(m["info"]["op"] == "Produce" and m["kind"] == "request" for m in b) == 40
    assert " 0 dropped by the kernel" in viapcap.summary
    summaries = (default.summary, viapcap.summary)
    # the same packets and messages: libpcap keeps one copy of each loopback packet, as the
    # default backend does; two sockets may see packets of the same instant in another order,
    # which moves frame numbers, not messages
    if all(" 0 dropped by the kernel" in s and "backlog" not in s for s in summaries):
        assert default.summary.split(",")[0] == viapcap.summary.split(",")[0], summaries

    def messages(ms: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
        return sorted((m["stream"], m["kind"], m["summary"]) for m in ms)

    assert messages(b) == messages(a), summaries
    assert check_readable(out) == int(viapcap.summary.split()[1])
    back = export_jsonl(out, "--decode-as", f"{mock_kafka.ports[0]}=kafka")
    assert sorted(map(key, back)) == sorted(map(key, b))


def one_error_line(res: subprocess.CompletedProcess[str], text: str) -> None:
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kdissect: error: ") and text in lines[0], res.stderr


def test_pcap_backend_errors() -> None:
    require_live()
    from kdissect.capture import bpf

    if bpf.libpcap() is None:
        pytest.skip("libpcap is not installed")
    res = subprocess.run([sys.executable, "-m", "kdissect", "sniff", "-i", "kd-none0", "--backend", "pcap",
                          "--duration", "1"], capture_output=True, text=True, timeout=30)
    one_error_line(res, "no such interface: 'kd-none0'")
    res = subprocess.run([sys.executable, "-m", "kdissect", "sniff", "-i", "lo", "--backend", "pcap",
                          "-f", "tcp prt 1", "--duration", "1"], capture_output=True, text=True, timeout=30)
    one_error_line(res, "bad capture filter 'tcp prt 1'")
    # a Python in which no libpcap can be loaded
    hide = ("import ctypes, sys\n"
            "class NoPcap(ctypes.CDLL):\n"
            "    def __init__(self, name, *a, **k):\n"
            "        if name and 'pcap' in str(name):\n"
            "            raise OSError(f'{name}: cannot open shared object file')\n"
            "        super().__init__(name, *a, **k)\n"
            "ctypes.CDLL = NoPcap\n"
            "from kdissect.cli import main\n"
            "sys.argv = ['kdissect', 'sniff', '-i', 'lo', '--backend', 'pcap', '--duration', '1']\n"
            "main()\n")
    res = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=30)
    one_error_line(res, "the pcap backend needs libpcap (the libpcap0.8 package on Debian)")
