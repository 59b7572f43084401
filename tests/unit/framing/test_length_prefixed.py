from __future__ import annotations

import struct

from kdissect.framing.length_prefixed import LengthPrefixedFramer


def msg(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def starts_with_m(head: bytes) -> bool:
    return len(head) >= 5 and head[4:5] == b"M"


def test_many_messages_in_one_chunk() -> None:
    f = LengthPrefixedFramer(1000)
    data = msg(b"Ma") + msg(b"Mbb") + msg(b"") + msg(b"Mccc")
    pdus = f.feed(data, 1, 1.0)
    assert [p.data for p in pdus] == [msg(b"Ma"), msg(b"Mbb"), msg(b""), msg(b"Mccc")]
    assert all(p.frames == [1] for p in pdus)


def test_one_message_over_many_chunks() -> None:
    f = LengthPrefixedFramer(1000)
    data = msg(b"M" + b"x" * 99)
    out = []
    for i in range(0, len(data), 7):
        out += f.feed(data[i : i + 7], i // 7 + 1, float(i))
    assert [p.data for p in out] == [data]
    assert out[0].frames == list(range(1, (len(data) + 6) // 7 + 1))
    assert out[0].ts == 0.0 and out[0].ts_end == float((len(data) - 1) // 7 * 7)


def test_oversized_length_without_probe_drops_the_stream() -> None:
    f = LengthPrefixedFramer(10)
    pdus = f.feed(struct.pack(">I", 11) + b"x" * 11 + msg(b"ok"), 1, 0.0)
    assert pdus == []


def test_resync_after_a_gap_inside_an_unknown_region() -> None:
    f = LengthPrefixedFramer(1000)
    f.set_probe(starts_with_m, True)
    first = msg(b"M" + b"1" * 30)
    out = f.feed(first[:10], 1, 0.0)
    out += f.gap(100, 1, 3)  # the rest of `first` and more were lost
    junk = b"\x00\x00\x00\x05zzzzz" + b"\xff" * 7
    out += f.feed(junk + msg(b"M" + b"2" * 70) + msg(b"M" + b"3" * 70), 3, 1.0)
    datas = [p.data for p in out]
    assert datas[0] == first[:10]  # the partial message, flagged
    assert any(d.key == "tcp.gap" for d in out[0].diagnostics)
    assert datas[1:] == [msg(b"M" + b"2" * 70), msg(b"M" + b"3" * 70)]
    assert any(d.key == "framing.resync" for d in out[1].diagnostics)


def test_gap_inside_a_message_of_known_length_is_stepped_over() -> None:
    f = LengthPrefixedFramer(1000)
    f.set_probe(starts_with_m, True)
    first = msg(b"M" + b"1" * 50)
    out = f.feed(first[:20], 1, 0.0)
    out += f.gap(10, 1, 2)
    out += f.feed(first[30:] + msg(b"Mnext"), 2, 1.0)
    assert [p.data for p in out] == [first[:20], msg(b"Mnext")]
    assert not any(d.key == "framing.resync" for p in out for d in p.diagnostics)


def test_midstream_start_finds_the_boundary() -> None:
    f = LengthPrefixedFramer(1000)
    f.set_probe(starts_with_m, False)
    tail = b"\x07" * 13  # the end of a message whose start was not captured
    stream = tail + msg(b"M" + b"a" * 80) + msg(b"M" + b"b" * 80)
    out = f.feed(stream, 1, 0.0) + f.flush()
    assert [p.data for p in out] == [msg(b"M" + b"a" * 80), msg(b"M" + b"b" * 80)]


def test_flush_reports_an_incomplete_message() -> None:
    f = LengthPrefixedFramer(1000)
    f.feed(msg(b"M" * 40)[:20], 1, 0.0)
    (pdu,) = f.flush()
    assert len(pdu.data) == 20
    assert pdu.diagnostics[-1].key == "tcp.incomplete"
