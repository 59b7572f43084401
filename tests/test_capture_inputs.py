"""Capture inputs and packet output on the command line: several captures merged in time order
(checked against mergecap), tshark's -r, -d and -T spellings, and -w (checked with capinfos,
tshark and by reading the written file back)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pcapgen import Pkt, write_pcap
from support import CAPTURES, capture_args, shared_captures

from kdissect.capture.pcapfile import CaptureFile
from kdissect.cliutil import tshark_decode_as

KDISSECT = [sys.executable, "-m", "kdissect"]
TXN = CAPTURES / "kafka" / "mock_ck_transactions.pcap"  # no two frames share a timestamp
SASL = CAPTURES / "kafka" / "scripted_ck_sasl.pcap"
# Produce messages decode without the context of other messages (a Fetch response names its
# topics by id, resolved from an earlier Metadata response that a file of Fetches lacks).
PRODUCE = "kdissect.op == Produce"


def run(*args: object, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KDISSECT, *map(str, args)], capture_output=True, text=stdin is None,
                          input=stdin, timeout=300, check=False)


def ok(*args: object) -> str:
    r = run(*args)
    assert r.returncode == 0, r.stderr
    return str(r.stdout)


def decode_args(*paths: Path) -> list[str]:
    return [a for p in paths for a in capture_args(p)]


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed: the test checks against Wireshark's own tools")
    return path


def split(path: Path, tmp: Path) -> tuple[Path, Path]:
    """The capture's odd frames in one file and its even frames in another (microsecond pcap,
    as the capture)."""
    a, b = tmp / "odd.pcap", tmp / "even.pcap"
    with CaptureFile(str(path)) as cap:
        frames = list(cap)
    for out, part in ((a, frames[0::2]), (b, frames[1::2])):
        write_pcap(str(out), [Pkt(f.ts, f.data, f.linktype, f.wirelen) for f in part], linktype=part[0].linktype)
    return a, b


def mergecap(tmp: Path, *paths: Path, fmt: str = "pcap") -> Path:
    """mergecap's merge, in the format of the inputs (so that times read back as the very same
    floats)."""
    out = tmp / f"merged.{fmt}"
    subprocess.run([tool("mergecap"), "-F", fmt, "-w", str(out), *map(str, paths)], check=True,
                   capture_output=True)
    return out


def jsonl(*args: object) -> list[dict[str, object]]:
    """The exported messages, times to the microsecond (the precision of the captures; a time
    read from nanosecond or pcapng ticks may differ in the last bit of its float)."""
    out = [json.loads(line) for line in ok("export", "-F", "jsonl", *args).splitlines()]
    for m in out:
        m["ts"] = round(m["ts"], 6)
    return out


def facts(messages: list[dict[str, object]]) -> list[tuple[object, ...]]:
    """What must survive a round trip through a written file (not frame or stream numbers)."""
    return [(m["ts"], m["src"], m["dst"], m["kind"], m["summary"]) for m in messages]


# -- several captures -----------------------------------------------------------------------


def test_split_capture_merges_back_like_mergecap(tmp_path: Path) -> None:
    a, b = split(TXN, tmp_path)
    dec = decode_args(TXN)
    merged_here = ok("read", *dec, b, a)
    assert merged_here == ok("read", *dec, mergecap(tmp_path, b, a))
    assert merged_here == ok("read", *dec, TXN)  # the parts interleave back into the original
    assert jsonl(*dec, a, b) == jsonl(*dec, TXN)


def test_two_captures_read_export_stats_conversations_as_mergecap(tmp_path: Path) -> None:
    dec = decode_args(TXN, SASL)
    merged = mergecap(tmp_path, SASL, TXN)
    assert ok("read", *dec, SASL, TXN) == ok("read", *dec, merged)
    assert jsonl(*dec, SASL, TXN) == jsonl(*dec, merged)
    both = json.loads(ok("stats", "-F", "json", *dec, SASL, TXN))
    assert both == json.loads(ok("stats", "-F", "json", *dec, merged))
    assert both["messages"] == sum(json.loads(ok("stats", "-F", "json", *dec, p))["messages"] for p in (SASL, TXN))
    convs = json.loads(ok("conversations", "-F", "json", *dec, SASL, TXN))
    assert convs == json.loads(ok("conversations", "-F", "json", *dec, merged))
    assert len(convs) == sum(len(json.loads(ok("conversations", "-F", "json", *dec, p))) for p in (SASL, TXN))


def test_shared_captures_merged(tmp_path: Path) -> None:
    paths = [p for p in shared_captures("kafka") if p.suffix == ".pcapng"][:3]
    if len(paths) < 2:
        pytest.skip("fewer than two shared pcapng Kafka captures")
    merged = mergecap(tmp_path, *paths, fmt="pcapng")
    assert ok("read", "-Y", "kafka", *paths) == ok("read", "-Y", "kafka", merged)


def test_standard_input_merges_with_a_file(tmp_path: Path) -> None:
    a, b = split(TXN, tmp_path)
    dec = decode_args(TXN)
    r = run("read", *dec, "-", b, stdin=a.read_bytes())
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == ok("read", *dec, TXN)
    r = run("read", "-", "-", stdin=a.read_bytes())
    assert r.returncode == 2 and b"standard input (-) can be read once only" in r.stderr


def test_a_bad_capture_among_several_is_one_line(tmp_path: Path) -> None:
    r = run("read", TXN, tmp_path / "missing.pcap")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"kdissect: error: cannot open {tmp_path / 'missing.pcap'}: "
                                             "No such file or directory"]


# -- tshark's spellings ----------------------------------------------------------------------


def test_dash_r_names_the_capture() -> None:
    dec = decode_args(TXN)
    plain = ok("read", *dec, TXN)
    assert ok("read", *dec, "-r", TXN) == plain
    for command in ("export", "stats", "conversations"):
        assert ok(command, *dec, "-r", TXN) == ok(command, *dec, TXN)
    assert ok("follow", *dec, "-s", "2", "-r", TXN) == ok("follow", *dec, "-s", "2", TXN)
    r = run("read")
    assert r.returncode == 2 and "no capture given" in r.stderr


def test_dash_d_is_decode_as() -> None:
    ports = json.loads(TXN.with_suffix(".json").read_text())["ports"]
    plain = ok("read", *decode_args(TXN), TXN)
    assert ok("read", TXN, *[a for p in ports for a in ("-d", f"tcp.port=={p},kafka")]) == plain
    low, *others = sorted(ports)
    assert ok("read", TXN, "-d", f"tcp.port=={low}-{low + 2},kafka",
              *[a for p in others for a in ("-d", f"tcp.port=={p},kafka")]) == plain
    as_zk = ok("read", TXN, "-d", f"tcp.port=={max(ports)},zookeeper")  # -d goes before the probes
    assert as_zk == ok("read", TXN, "--decode-as", f"{max(ports)}=zookeeper") and as_zk != plain
    assert tshark_decode_as("tcp.port == 9092 - 9094 , kafka") == ["9092=kafka", "9093=kafka", "9094=kafka"]
    for bad, message in (("udp.port==9092,kafka", "-d takes tcp.port=="), ("tcp.port==9094-9092,kafka", "out of range"),
                         ("tcp.port==9092,nosuch", "unknown protocol"),
                         ("tcp.port==\u0661\u0662,kafka", "-d takes"), (f"tcp.port=={'9' * 5000},kafka", "-d takes")):
        r = run("read", TXN, "-d", bad)
        assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    for bad in ("\u00b2=kafka", "\u0661\u0662=kafka", f"{'9' * 5000}=kafka"):  # digits int() refuses, or not ASCII
        r = run("read", TXN, "--decode-as", bad)
        assert r.returncode == 2 and "--decode-as takes" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_dash_t_is_the_export_format() -> None:
    dec = decode_args(TXN)
    for fmt in ("json", "jsonl"):
        assert ok("export", *dec, "-T", fmt, TXN) == ok("export", *dec, "-F", fmt, TXN)
    fields = ok("export", *dec, "-T", "fields", "-e", "kdissect.frame", "-e", "kafka.op", TXN)
    assert fields == ok("export", *dec, "-F", "fields", "-e", "kdissect.frame", "-e", "kafka.op", TXN)
    assert len(fields.splitlines()) == 86


# -- -w ----------------------------------------------------------------------------------------


def capinfos_packets(path: Path) -> int:
    out = subprocess.run([tool("capinfos"), "-M", "-c", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split("Number of packets:")[1].split()[0])


def tshark_frames(path: Path) -> int:
    out = subprocess.run([tool("tshark"), "-r", str(path), "-T", "fields", "-e", "frame.number"],
                         capture_output=True, text=True, check=True)
    return len(out.stdout.split())


@pytest.mark.parametrize("command", ["read", "export"])
def test_write_filtered_packets_reads_back_the_same(tmp_path: Path, command: str) -> None:
    dec = decode_args(TXN)
    out = tmp_path / "fetch.pcapng"
    r = run(command, *dec, TXN, "-Y", PRODUCE, "-w", out)
    assert r.returncode == 0 and r.stdout == "", r.stderr
    expected = jsonl(*dec, TXN, "-Y", PRODUCE)
    frames = sorted({n for m in expected for n in m["frames"]})  # type: ignore[attr-defined]
    assert f"{len(frames)} packets written" in r.stderr
    assert capinfos_packets(out) == tshark_frames(out) == len(frames)
    assert facts(jsonl(*dec, out, "-Y", PRODUCE)) == facts(expected)


def test_with_peer_writes_both_directions(tmp_path: Path) -> None:
    dec = decode_args(TXN)
    pairs = jsonl(*dec, TXN, "-Y", PRODUCE)
    assert {m["kind"] for m in pairs} == {"request", "response"}
    for kind in ("request", "response"):
        alone, paired = tmp_path / f"{kind}.pcapng", tmp_path / f"{kind}-peer.pcapng"
        ok("read", *dec, TXN, "-Y", f"{PRODUCE} && kdissect.kind == {kind}", "-w", alone)
        ok("read", *dec, TXN, "-Y", f"{PRODUCE} && kdissect.kind == {kind}", "-w", paired, "--with-peer")
        assert capinfos_packets(paired) == 2 * capinfos_packets(alone)
        assert facts(jsonl(*dec, paired)) == facts(pairs)


def test_write_and_print_with_count(tmp_path: Path) -> None:
    dec = decode_args(TXN)
    out = tmp_path / "two.pcapng"
    printed = ok("read", *dec, TXN, "-Y", PRODUCE, "-c", "1", "-w", out, "-P", "--with-peer")
    assert len(printed.splitlines()) == 1  # the first Fetch request; its response is written too
    assert [m["kind"] for m in jsonl(*dec, out)] == ["request", "response"]
    exported = ok("export", *dec, TXN, "-Y", PRODUCE, "-w", out, "-P", "-T", "jsonl")
    assert len(exported.splitlines()) == len(jsonl(*dec, TXN, "-Y", PRODUCE))


def test_follow_writes_one_conversation(tmp_path: Path) -> None:
    dec = decode_args(TXN)
    out = tmp_path / "stream.pcapng"
    r = run("follow", *dec, TXN, "-s", "2", "-w", out)
    assert r.returncode == 0 and r.stdout == "", r.stderr
    stream = jsonl(*dec, TXN, "-Y", "kdissect.stream == 2")
    back = jsonl(*dec, out)
    assert facts(back) == facts(stream) and {m["stream"] for m in back} == {0}
    # every packet of the stream, handshake, acknowledgements and end included, as tshark counts it
    if shutil.which("tshark"):
        whole = subprocess.run(["tshark", "-r", str(TXN), "-Y", "tcp.stream == 2"], capture_output=True,
                               text=True, check=True).stdout
        assert tshark_frames(out) == len(whole.splitlines()) > len({n for m in stream for n in m["frames"]})


def test_follow_with_a_filter_writes_the_matching_messages(tmp_path: Path) -> None:
    dec = decode_args(TXN)
    out = tmp_path / "some.pcapng"
    ok("follow", *dec, TXN, "-s", "2", "-Y", "kdissect.kind == request", "-w", out)
    requests = jsonl(*dec, TXN, "-Y", "kdissect.stream == 2 && kdissect.kind == request")
    assert facts(jsonl(*dec, out)) == facts(requests)


def test_write_merged_captures(tmp_path: Path) -> None:
    dec = decode_args(TXN, SASL)
    out = tmp_path / "all.pcapng"
    ok("read", *dec, SASL, TXN, "-w", out)
    assert facts(jsonl(*dec, out)) == facts(jsonl(*dec, SASL, TXN))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["read", "-", "-w", "__OUT__"], "it needs a capture file, not standard input"),
        (["read", str(TXN), "-w", str(TXN)], "that is the capture being read"),
        (["read", str(TXN), "--with-peer"], "--with-peer and -P go with -w FILE"),
        (["export", str(TXN), "-P"], "--with-peer and -P go with -w FILE"),
        (["read", str(TXN), "-w", "/nonexistent/dir/out.pcapng"], "cannot write"),
    ],
)
def test_write_refusals_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "out.pcapng"
    r = run(*[str(out) if a == "__OUT__" else a for a in args], stdin=TXN.read_bytes())
    lines = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("kdissect: error: ")
    assert message in lines[0]
    assert not out.exists()
