"""What kdissect says about a capture in which nothing was decoded."""

from __future__ import annotations

from kdissect.analysis.coverage import LINK_LINES, notes
from kdissect.pipeline import Counters, PortTally
from kdissect.pipeline.detect import looks_like


def test_first_bytes() -> None:
    assert looks_like(b"\x16\x03\x01\x02\x00") == "TLS"
    assert looks_like(b"GET /admin/v2 HTTP/1.1\r\n") == "HTTP"
    assert looks_like(b"SSH-2.0-OpenSSH_9.2") == "SSH"
    assert looks_like(b"\x00\x00\x00\x2c") == ""


def test_empty_and_non_tcp_captures() -> None:
    assert notes(Counters(), "c.pcap") == ["note: c.pcap: the capture holds no packets"]
    assert notes(Counters(frames=3), "c.pcap") == ["note: c.pcap: 3 frames, none of them TCP; nothing to decode"]
    only_wifi = Counters(frames=3, unsupported_links={105: 3})
    assert notes(only_wifi, "c.pcap") == ["warning: c.pcap: link type 105 is not supported; 3 frames skipped"]


def test_something_decoded_is_quiet_but_for_link_types() -> None:
    c = Counters(frames=10, tcp_segments=8, conversations=1, messages=4, recognised=1, unsupported_links={147: 2})
    assert notes(c, "c.pcap") == ["warning: c.pcap: link type 147 is not supported; 2 frames skipped"]


def test_many_unsupported_link_types_take_a_few_lines() -> None:
    """A pcapng file may declare 65,536 interfaces of as many link types: eight are named, the
    rest summed in one line (one line each was 7 MB of warnings from a 3.7 MB file)."""
    c = Counters(frames=70_000, messages=1, unsupported_links={lt: 1 + lt % 2 for lt in range(300, 20_300)})
    lines = notes(c, "c.pcap")
    assert len(lines) == LINK_LINES + 1
    assert lines[0] == "warning: c.pcap: link type 300 is not supported; 1 frame skipped"
    assert lines[-1] == f"warning: c.pcap: {20_000 - LINK_LINES} more link types are not supported; 29988 frames skipped"


def test_handshakes_only_and_recognised_without_messages() -> None:
    assert notes(Counters(frames=3, tcp_segments=3, conversations=1), "c") == [
        "note: c: 3 TCP segments in 1 conversation, none carrying data"]
    c = Counters(frames=5, tcp_segments=5, conversations=1, recognised=1)
    assert notes(c, "c") == ["note: c: 5 TCP segments in 1 conversation; 1 recognised but no complete message decoded"]


def test_busiest_ports_first_and_hints_once() -> None:
    c = Counters(frames=100, tcp_segments=100, conversations=6, undecoded={
        (3888, ""): PortTally(1, 10), (2888, ""): PortTally(2, 50), (8080, "HTTP"): PortTally(1, 20),
        (7000, ""): PortTally(1, 5), (9093, "TLS"): PortTally(1, 15)})
    (line,) = notes(c, "c")
    assert "busiest server ports: 2888 (2 conversations, 50 segments), 8080 HTTP (1 conversation, 20 segments), " \
           "9093 TLS (1 conversation, 15 segments); " in line
    assert line.count("ZooKeeper quorum (ZAB)") == 1  # a hint for a port beyond the busiest three too
    assert "port 8080 carries HTTP, which kdissect does not decode" in line
    assert line.endswith("; try --decode-as PORT=PROTO")
