from __future__ import annotations

import gc
import struct
import time
import tracemalloc

import pytest

from kdissect import accel
from kdissect.framing import length_prefixed
from kdissect.framing.length_prefixed import LengthPrefixedFramer
from kdissect.stream.reassembly import Buffered


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


class CountingFramer(LengthPrefixedFramer):
    """Counts the candidate offsets judged: the measure of the resynchronisation's work."""

    judged = 0

    def _verdict(self, i: int) -> tuple[bool | None, int]:
        self.judged += 1
        return super()._verdict(i)


def test_resync_work_is_linear_behind_a_candidate_that_waits_for_data() -> None:
    # A plausible header announcing 50 MB, then zeros in 1460-byte segments: the candidate
    # waits for data that never confirms it, and every later offset must be judged only once.
    f = CountingFramer(100 * 1024 * 1024, min_frame=4)
    f.set_probe(starts_with_m, False)
    stream = struct.pack(">I", 50_000_000) + b"M" + b"\x00" * (256 * 1024)
    for i in range(0, len(stream), 1460):
        f.feed(stream[i : i + 1460], i // 1460 + 1, float(i))
    assert f.judged <= len(stream) + 2 * len(stream) // 1460
    assert len(f.waiting) == 1


def test_resync_work_is_linear_with_many_waiting_candidates() -> None:
    f = CountingFramer(1 << 30)
    f.set_probe(starts_with_m, False)
    stream = (struct.pack(">I", 1 << 29) + b"M") * 2000  # each such offset waits for 512 MB
    for i in range(0, len(stream), 100):
        f.feed(stream[i : i + 100], i // 100 + 1, float(i))
    # Each offset is judged once; a waiting candidate again only when its data has come.
    assert f.judged <= len(stream) + 64 * 4


def test_a_message_filling_the_first_segments_is_a_boundary_whatever_its_bytes() -> None:
    # Captured mid-connection: the first segments hold one whole message the probe does not
    # recognise; it is still framed, and no boundary is invented inside it.
    f = LengthPrefixedFramer(1000)
    f.set_probe(starts_with_m, False)
    odd = msg(b"X" + b"\x00\x00\x00\x05Mzzzz" + b"y" * 20)
    out = f.feed(odd[:9], 1, 0.0) + f.feed(odd[9:], 2, 0.5)
    out += f.feed(msg(b"M" + b"a" * 40), 3, 1.0)
    out += f.flush()
    assert [p.data for p in out] == [odd, msg(b"M" + b"a" * 40)]
    assert not any(d.key == "framing.resync" for p in out for d in p.diagnostics)


def test_only_the_first_segments_of_a_stream_frame_without_the_probe() -> None:
    f = LengthPrefixedFramer(1000)
    f.set_probe(starts_with_m, True)
    out = f.feed(msg(b"Ma"), 1, 0.0) + f.gap(10, 1, 2)
    odd = msg(b"X" * 10)  # after a gap, a segment the probe rejects is not a message
    out += f.feed(odd, 2, 0.5) + f.feed(msg(b"M" + b"b" * 40), 3, 1.0) + f.flush()
    assert [p.data for p in out] == [msg(b"Ma"), msg(b"M" + b"b" * 40)]


def test_a_length_that_ends_mid_segment_is_not_a_first_segment_boundary() -> None:
    f = LengthPrefixedFramer(1000)
    f.set_probe(starts_with_m, False)
    junk = b"\x00\x00\x00\x02zz" + b"\xff" * 5  # frames 6 bytes inside an 11-byte segment
    out = f.feed(junk, 1, 0.0) + f.feed(msg(b"M" + b"a" * 40) + msg(b"Mb"), 2, 1.0) + f.flush()
    assert [p.data for p in out] == [msg(b"M" + b"a" * 40), msg(b"Mb")]


def test_an_empty_message_is_a_message_when_in_sync() -> None:
    f = LengthPrefixedFramer(1000, min_frame=4)
    f.set_probe(starts_with_m, True)
    out = f.feed(msg(b"Maaaa") + msg(b"") + msg(b"Mbbbb"), 1, 0.0)
    assert [p.data for p in out] == [msg(b"Maaaa"), msg(b""), msg(b"Mbbbb")]
    assert not any(p.diagnostics for p in out)


def test_a_short_length_below_the_minimum_resynchronises() -> None:
    f = LengthPrefixedFramer(1000, min_frame=4)
    f.set_probe(starts_with_m, True)
    out = f.feed(msg(b"Maaaa") + b"\x00\x00\x00\x02zz" + msg(b"Mbbbb"), 1, 0.0) + f.flush()
    assert [p.data for p in out] == [msg(b"Maaaa"), msg(b"Mbbbb")]
    assert out[1].diagnostics[0].message == "message length 2 outside 4..1000: resynchronising"


def test_a_message_in_many_segments_costs_little_per_segment() -> None:
    # What the framer keeps of each segment of a message not yet whole: a million one-byte
    # segments of a large message took about 200 bytes each (239 MB for a 71 MB capture).
    f = LengthPrefixedFramer(1 << 30)
    f.feed(struct.pack(">I", 1 << 20) + b"M", 1, 1.0)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(20_000):
            assert f.feed(b"x", i + 2, 2.0 + i) == []
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 20_000 * 48
    (pdu,) = f.flush()
    assert pdu.frames == list(range(1, 20_002)) and (pdu.ts, pdu.ts_end) == (1.0, 20_001.0)


def test_chunks_behind_the_buffer_are_dropped() -> None:
    f = LengthPrefixedFramer(1000)
    out = []
    for i in range(5000):  # a message of 5 bytes in 5 segments, 1,000 times
        out += f.feed(msg(b"M")[i % 5 : i % 5 + 1] if i % 5 < 4 else b"M", i + 1, float(i))
    assert [p.frames for p in out[:2]] == [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]
    assert len(out) == 1000 and out[-1].frames == list(range(4996, 5001))
    assert len(f.index._ends) - f.index._first < 2


def test_bytes_without_a_boundary_are_one_resync_diagnostic() -> None:
    # Each segment of bytes in which no boundary was found added a diagnostic, all of them
    # kept until a message came: 300,000 segments of junk were one message with 300,000.
    f = LengthPrefixedFramer(1000)
    f.set_probe(starts_with_m, True)
    out = f.feed(b"\xff" * 8, 1, 0.0)
    for i in range(5000):
        out += f.feed(b"\xff" * 100, i + 2, 1.0)
    out += f.feed(msg(b"Mok") + msg(b"Mnext"), 5002, 2.0)
    assert [p.data for p in out] == [msg(b"Mok"), msg(b"Mnext")]
    assert [(d.key, d.message) for d in out[0].diagnostics] == [
        ("framing.bad_length", "message length 4294967295 outside 0..1000: resynchronising"),
        ("framing.resync", "skipped 500007 bytes to the next message boundary (frames 1-5001)"),
    ]


def test_gaps_one_after_another_are_one_gap() -> None:
    # A peer acknowledging bytes never captured, one segment after another, made a gap
    # diagnostic each, kept as long as the stream lasted (and dropped at its end).
    f = LengthPrefixedFramer(1000)
    f.set_probe(starts_with_m, True)
    out = f.feed(msg(b"Ma"), 1, 0.0)
    for i in range(5000):
        out += f.gap(1, i + 1, i + 2)
    assert len(f.pending_diags) == 1
    out += f.feed(msg(b"M" + b"b" * 10), 5002, 1.0) + f.flush()
    assert [p.data for p in out] == [msg(b"Ma"), msg(b"M" + b"b" * 10)]
    assert [(d.key, d.message) for d in out[1].diagnostics] == [
        ("tcp.gap", "5000 bytes missing from the capture between frames 1 and 5001"),
    ]


def test_gaps_apart_stay_apart() -> None:
    f = LengthPrefixedFramer(1000)
    f.set_probe(starts_with_m, True)
    out = f.feed(msg(b"M" + b"1" * 50)[:20], 1, 0.0)
    out += f.gap(10, 1, 2)  # inside the message: it is stepped over
    out += f.gap(5, 2, 3)
    out += f.feed(msg(b"M" + b"1" * 50)[35:], 3, 1.0)  # the rest of the message, skipped
    out += f.gap(7, 3, 4)
    out += f.feed(msg(b"Mb"), 4, 1.0) + f.flush()
    assert [d.message for p in out for d in p.diagnostics] == [
        "10 bytes missing from the capture between frames 1 and 2",
        "5 bytes missing from the capture between frames 2 and 3",  # bytes were captured after it
        "7 bytes missing from the capture between frames 3 and 4",
        "stream ended inside a message: 6 bytes captured",
    ]


def test_retransmissions_one_after_another_are_one_overlap() -> None:
    # A message started, then its first segment retransmitted with other bytes 300,000 times:
    # one tcp.overlap diagnostic each on the message (51 MB: 219 MB, and 54 MB of JSON). The
    # retransmissions noted for one message are one diagnostic.
    f = LengthPrefixedFramer(1000)
    f.overlap(5, 7)
    out = f.feed(msg(b"M" + b"1" * 50)[:20], 8, 0.0)
    for i in range(5000):
        f.overlap(20, 9 + i)
    out += f.feed(msg(b"M" + b"1" * 50)[20:], 5009, 1.0)
    f.overlap(3, 5010)
    out += f.feed(msg(b"M2"), 5011, 2.0)
    assert [[d.message for d in p.diagnostics] for p in out] == [
        ["frames 7-5008: 5001 retransmissions of 100005 bytes in all that differ from those first captured "
         "(the first-seen bytes are used)"],
        ["frame 5010 retransmits 3 bytes that differ from those first captured (the first-seen bytes are used)"],
    ]


def test_an_empty_message_is_a_bad_length_where_none_may_be_empty() -> None:
    # Pulsar, RocketMQ and ZooKeeper have no empty message: a length of 0 made a message of 4
    # bytes each, so 1 MB of zeros was 250,000 malformed messages (3 s and 93 MB of JSON).
    from kdissect.dissect.base import ConversationState
    from kdissect.pulsar.dissector import DISSECTOR as PULSAR
    from kdissect.rocketmq.dissector import DISSECTOR as ROCKETMQ
    from kdissect.zookeeper.dissector import DISSECTOR as ZOOKEEPER

    for d in (PULSAR, ROCKETMQ, ZOOKEEPER):
        state = d.new_state()
        assert isinstance(state, ConversationState)
        f = d.new_framer(True, state)
        f.set_probe(lambda head, d=d, state=state: d.probe_boundary(head, True, state), True)
        out = f.feed(b"\x00" * 4000, 1, 0.0) + f.flush()
        assert len(out) <= 1, d.name
        assert all(len(p.data) != 4 for p in out), d.name
    # Kafka's empty SASL token is a message, one a segment: 1 MB of zeros was 250,000 messages
    # (3.1 s, 93 MB of JSON).
    kafka = LengthPrefixedFramer(1000, min_frame=4)
    kafka.set_probe(starts_with_m, True)
    out = kafka.feed(msg(b"") * 1000 + msg(b"Mbbbb"), 1, 0.0) + kafka.feed(msg(b""), 2, 1.0)
    assert [p.data for p in out] == [msg(b""), msg(b"Mbbbb"), msg(b"")]
    assert [d.key for d in out[1].diagnostics] == ["framing.bad_length", "framing.resync"]


def test_framers_of_a_capture_keep_a_bounded_number_of_bytes_in_all() -> None:
    # 20 Kafka connections each sending 50 MB of a 100 MB request (1.7 MB of gzip) kept 1 GB in
    # their framers (2.3 GB in all). Past the pool's limit, the framer whose message grows cuts it
    # (framing.unbuffered) and skips the rest; the next message is framed as usual.
    pool = Buffered(10_000)
    framers = [LengthPrefixedFramer(1 << 20) for _ in range(4)]
    for f in framers:
        f.set_probe(starts_with_m, True)
        f.set_pool(pool)
    out: list[list] = [[] for _ in framers]
    for f, got in zip(framers, out, strict=True):
        got += f.feed(struct.pack(">I", 9_000) + b"M" + bytes(3_000), 1, 0.0)
    assert pool.used <= 10_000
    for f, got in zip(framers, out, strict=True):
        got += f.feed(bytes(5_999) + msg(b"Mnext"), 2, 0.0)
        assert pool.used <= 10_000
    cut = [got[0] for got in out if got and got[0].diagnostics]
    assert cut and all(p.diagnostics[-1].key == "framing.unbuffered" for p in cut)
    assert all(len(p.data) < 9_004 for p in cut)
    assert all(got[-1].data == msg(b"Mnext") for got in out)
    assert pool.used == 0


def test_resync_judges_a_candidate_in_well_under_a_microsecond() -> None:
    # A stream of b"\0\0\0\x40" captured mid-connection: three offsets in four are plausible
    # lengths, each judged. Judging one with a probe that says no took 0.74 µs compiled with the
    # regular expression as first filter, 0.6 µs with the compiled one and the length read as a
    # slice and int.from_bytes, 0.49 µs read with struct. (A guard: the bound leaves room.)
    if accel.PURE or length_prefixed.__file__ is None or length_prefixed.__file__.endswith(".py"):
        pytest.skip("the compiled framer is not in use")
    data = b"\x00\x00\x00\x40" * 150_000
    f = LengthPrefixedFramer(100 * 1024 * 1024, min_frame=4)
    f.set_probe(lambda head: False, False)
    t0 = time.process_time()
    for i in range(0, len(data), 1460):
        f.feed(data[i : i + 1460], 1, 0.0)
    spent = time.process_time() - t0
    assert spent / (len(data) * 3 // 4) < 0.9e-6


def test_a_chunk_that_is_one_whole_message_is_not_copied() -> None:
    f = LengthPrefixedFramer(1000, min_frame=2)
    chunk = msg(b"Mab")
    (pdu,) = f.feed(chunk, 7, 2.5)
    assert pdu.data is chunk and (pdu.frames, pdu.ts, pdu.ts_end) == ([7], 2.5, 2.5)
    assert (f.base, bytes(f.buf), f.counted) == (len(chunk), b"", 0)


def _state(f: LengthPrefixedFramer) -> tuple[object, ...]:
    return (f.base, bytes(f.buf), f.synced, f.skip_to, f.empty_ok, f.counted, f.pool.used,
            [(d.key, d.message) for d in f.pending_diags])


_CHUNKS = [
    msg(b"Ma"), msg(b"Mbb"), msg(b""), msg(b"M"), msg(b"Mccc") + msg(b"Md"), msg(b"Mx" * 600), msg(b"Me")[:5],
    b"\x00\x00", b"\xff\xff\xff\xff" + b"M" * 4, msg(b"Mffff"), msg(b"Mg")[:3],
]


@pytest.mark.parametrize("min_frame,empty,probe", [(0, True, False), (2, True, True), (2, False, True), (5, False, False)])
def test_a_chunk_gives_what_it_gives_buffered(min_frame: int, empty: bool, probe: bool) -> None:
    """feed (which takes a chunk that is one whole message as it is) gives the same messages
    (bytes, frames, times, diagnostics), and leaves the same state, as feeding every chunk
    through the buffer, whatever the chunks (whole messages, several, empty ones, short ones,
    bad lengths, pieces) and their order."""
    import random

    rng = random.Random(5)
    for _ in range(300):
        fast = LengthPrefixedFramer(1000, min_frame=min_frame, empty=empty)
        buffered = LengthPrefixedFramer(1000, min_frame=min_frame, empty=empty)
        if probe:
            fast.set_probe(starts_with_m, True)
            buffered.set_probe(starts_with_m, True)
        for i in range(rng.randint(1, 8)):
            chunk = rng.choice(_CHUNKS)
            got, want = fast.feed(chunk, i + 1, float(i)), buffered._feed(chunk, i + 1, float(i))
            assert [(p.data, p.frames, p.ts, p.ts_end, p.to_server, [d.message for d in p.diagnostics]) for p in got] == \
                [(p.data, p.frames, p.ts, p.ts_end, p.to_server, [d.message for d in p.diagnostics]) for p in want]
            assert _state(fast) == _state(buffered)
