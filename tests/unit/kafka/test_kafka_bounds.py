"""What one Kafka message may cost: the decompression budget is the message's (all its
partitions together), records and batches shown and array elements are counted per message,
and past each limit decoding goes on without building more (or stops, for arrays) with a
diagnostic. Inputs are built here; kafka-python's record builders are the encoder."""

from __future__ import annotations

import struct

import crc32c
import pytest
import zstandard
from kafka.record.default_records import DefaultRecordBatchBuilder
from pcapgen import kafka_request, uvarint

from kdissect.dissect import base
from kdissect.dissect.base import Options, run_dissector
from kdissect.kafka import headers, summary
from kdissect.kafka.dissector import DISSECTOR
from kdissect.model import Field, Group, Message, Pdu, Severity

ZSTD = 4


def batch(values: list[bytes], codec: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 24)
    for i, v in enumerate(values):
        b.append(i, 1700000000000 + i, None, v, [])
    return bytes(b.build())


def same_records_batch(n: int) -> bytes:
    """A zstd RecordBatch v2 of n empty records, all alike (offset and timestamp deltas 0): a
    few dozen bytes on the wire."""
    record = bytes([12, 0, 0, 0, 1, 0, 0])  # length 6, attributes, deltas 0, null key, empty value, no headers
    after_crc = struct.pack(">hiqqqhii", ZSTD, n - 1, 0, 0, -1, -1, -1, n) + zstandard.compress(record * n)
    body = struct.pack(">iB", 0, 2) + struct.pack(">I", crc32c.crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(body)) + body


def produce(partitions: list[bytes], corr: int = 1) -> bytes:
    """Produce v3: one topic, one partition per records blob."""
    topic = b"t"
    body = struct.pack(">hhi", -1, 1, 30000) + struct.pack(">ih", 1, len(topic)) + topic
    body += struct.pack(">i", len(partitions))
    body += b"".join(struct.pack(">ii", i, len(rec)) + rec for i, rec in enumerate(partitions))
    return kafka_request(0, 3, corr, "p", body)


def dissect(data: bytes, opts: Options | None = None) -> Message:
    msg = Message(Pdu(data, [1], 0.0, 0.0, True), 0, "c", "s", "kafka")
    run_dissector(DISSECTOR, msg, DISSECTOR.new_state(), opts or Options())
    return msg


def field(msg: Message, name: str) -> Field:
    return next(f for f in msg.fields if f.name == name)


def partitions(msg: Message) -> list[Field]:
    topics = field(msg, "topic_data").children or []
    return topics[0].child("partition_data").children or []  # type: ignore[union-attr]


def records_shown(partition: Field) -> int:
    """Records decoded in a partition's first batch (none when it was not decompressed)."""
    batches = partition.child("records")
    first = batches.children[0] if batches is not None and batches.children else None
    records = first.child("records") if first is not None else None
    return len(records.children or []) if records is not None else 0


def keys(msg: Message) -> list[str]:
    return [d.key for d in msg.diagnostics]


def test_decompression_budget_is_the_messages_not_each_partitions() -> None:
    one = batch([bytes(400_000)], ZSTD)  # a few hundred bytes that inflate to 400 kB
    msg = dissect(produce([one] * 4), Options(max_decompressed=1_000_000))
    # two partitions fit in the budget; the third would pass it; the fourth is not tried
    assert [records_shown(p) for p in partitions(msg)] == [1, 1, 0, 0]
    assert keys(msg) == ["kafka.records.decompression_cap", "kafka.records.decompression_budget"]
    cap = msg.diagnostics[0]
    assert "bytes left of the message's 1000000-byte decompression budget" in cap.message
    assert (msg.diagnostics[1].severity, msg.diagnostics[1].group) == (Severity.WARNING, Group.UNDECODED)
    assert 800_000 < msg.inflated < 800_100  # what the two decoded batches inflated to
    assert msg.summary.endswith("t[0:1 record, 1:1 record, 2:0 records, 3:0 records]")


def dissect_in_one_capture(data: bytes, n: int, opts: Options) -> list[Message]:
    """n messages of `data`, each on a conversation of its own, all of one capture."""
    capture = base.CaptureState()
    msgs = []
    for corr in range(n):
        state = DISSECTOR.new_state()
        state.share(capture)
        msg = Message(Pdu(data, [1], 0.0, 0.0, True), corr, "c", "s", "kafka")
        run_dissector(DISSECTOR, msg, state, opts)
        msgs.append(msg)
    return msgs


def test_a_captures_messages_decompress_within_the_captures_budget() -> None:
    """Each message has its own budget, and the capture's messages together four messages' worth
    plus 100 bytes a byte they carry: a capture of small compression bombs costs work in
    proportion to its size, however many messages it holds."""
    one = produce([batch([bytes(400_000)], ZSTD)])  # a few hundred bytes that inflate to 400 kB
    opts = Options(max_decompressed=1_000_000)
    msgs = dissect_in_one_capture(one, 200, opts)
    inflated = sum(m.inflated for m in msgs)
    assert inflated <= 4 * 1_000_000 + 100 * 200 * len(one)
    assert [records_shown(partitions(m)[0]) for m in msgs[:10]] == [1] * 10  # the first four messages' worth
    refused = [m for m in msgs if records_shown(partitions(m)[0]) == 0]
    assert len(refused) > 150
    assert all("the capture's decompression budget" in m.diagnostics[0].message for m in refused)
    # The first message of a new capture decodes whole.
    assert records_shown(partitions(dissect(one, opts))[0]) == 1


def test_a_captures_messages_show_records_within_the_captures_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A message shows at most MAX_ENTRIES records and batches, and the capture's messages
    together four messages' worth plus one for every 4 bytes they carry: a capture of small compressed
    batches of countless tiny records costs work in proportion to its size."""
    monkeypatch.setattr(base, "MAX_ENTRIES", 1_000)
    one = produce([same_records_batch(5_000)])  # a hundred bytes that hold 5,000 records
    msgs = dissect_in_one_capture(one, 100, Options())
    shown = [records_shown(partitions(m)[0]) for m in msgs]
    assert all(m.summary.endswith("t[0:5000 records]") for m in msgs)  # counted from the batch headers
    assert shown[:4] == [999] * 4  # each message's 1,000: its batch and 999 records
    assert 0 < shown[-1] < 999  # what the message's own bytes earned
    assert sum(shown) <= 4 * 1_000 + 100 * len(one) // 4
    assert shown[-1] < 999
    assert all("the capture has shown as many records and batches as its budget allows" in m.diagnostics[0].message
               for m, k in zip(msgs, shown, strict=True) if k < 999)


def many_headers_batch(h: int) -> bytes:
    """A zstd RecordBatch v2 of one record with h headers (empty key, null value): a few dozen
    bytes on the wire."""
    body = bytes([0, 0, 0, 1, 1]) + uvarint(2 * h) + b"\x00\x01" * h  # attributes, deltas, null key and value
    record = uvarint(2 * len(body)) + body
    after_crc = struct.pack(">hiqqqhii", ZSTD, 0, 0, 0, -1, -1, -1, 1) + zstandard.compress(record)
    batch = struct.pack(">iB", 0, 2) + struct.pack(">I", crc32c.crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(batch)) + batch


def headers_shown(msg: Message) -> int:
    batches = partitions(msg)[0].child("records")
    first = batches.children[0] if batches is not None and batches.children else None
    records = first.child("records") if first is not None else None
    record = records.children[0] if records is not None and records.children else None
    headers = record.child("headers") if record is not None else None
    return len(headers.children or []) if headers is not None else 0


def test_a_compressed_records_headers_count_against_the_captures_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The headers of a compressed batch's records are bounded by no bytes of the capture: they
    count against its entries, so that once four messages' worth (and what the capture's bytes
    earn) are shown, its records are counted from their batch headers. (100 Produce requests of
    44 bytes of zstd, each a record of 99,990 headers: 240 MB of JSON from 22 KB, now 12 MB.)"""
    monkeypatch.setattr(base, "MAX_ENTRIES", 1_000)
    one = produce([many_headers_batch(5_000)])
    msgs = dissect_in_one_capture(one, 50, Options())
    shown = [headers_shown(m) for m in msgs]
    assert shown[0] == 5_000 and shown[-1] == 0
    assert sum(shown) <= 4 * 1_000 + 50 * len(one) // 4 + 5_000  # one message may pass the allowance
    assert all(m.summary.endswith("t[0:1 record]") for m in msgs)


def test_records_shown_are_counted_per_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "MAX_ENTRIES", 10)
    msg = dissect(produce([batch([b"v"] * 4)] * 3))
    # batch + 4 records, batch + 4 records: 10 shown; the third partition's batch is counted
    # from its header, like the records past the limit
    assert [len(p.child("records").children or []) for p in partitions(msg)] == [1, 1, 0]  # type: ignore[union-attr]
    assert [records_shown(p) for p in partitions(msg)] == [4, 4, 0]
    assert keys(msg) == ["kafka.records.limit"]
    assert msg.summary.endswith("t[0:4 records, 1:4 records, 2:4 records]")


def test_records_limit_in_summary_only_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "MAX_ENTRIES", 2)
    msg = dissect(produce([batch([b"v"] * 4)] * 3), Options(record_detail=False))
    assert msg.summary.endswith("t[0:4 records, 1:4 records, 2:4 records]")
    assert keys(msg) == ["kafka.records.limit"]


def metadata_v0(n: int) -> bytes:
    body = struct.pack(">i", n) + b"".join(struct.pack(">h", 2) + b"t%d" % (i % 10) for i in range(n))
    return kafka_request(3, 0, 9, "m", body)


def test_array_past_the_element_limit_keeps_the_first_elements(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "MAX_ELEMENTS", 50)
    msg = dissect(metadata_v0(1000))
    topics = field(msg, "topics")
    assert len(topics.children or []) == 50 and topics.label == "topics (first 50 of 1000)"
    assert keys(msg) == ["kafka.array_cap"]
    d = msg.diagnostics[0]
    assert (d.severity, d.group) == (Severity.WARNING, Group.UNDECODED)
    assert "1000 elements" in d.message and "the first 50 are shown" in d.message
    assert msg.summary.startswith("Metadata v0 request corr=9 client=m topics=[t0, t1, t2")
    assert msg.info["topics"][:2] == ["t0", "t1"]


def test_names_in_the_summary_are_cut_after_a_topic_name_s_longest() -> None:
    # A client id (or topic) of 32,767 characters was written whole in the summary line, so
    # read wrote 4 MB for 4 MB of ApiVersions requests.
    long_ = "c" * 32767
    body = struct.pack(">i", 2) + b"".join(struct.pack(">h", len(t)) + t for t in (b"t" * 300, b"t" * 249))
    msg = dissect(kafka_request(3, 0, 9, long_, body))
    cut = "c" * (summary.MAX_NAME - 1) + "…"
    assert msg.summary == f"Metadata v0 request corr=9 client={cut} topics=[{'t' * 248}…, {'t' * 249}]"
    assert msg.info["client_id"] == long_


def test_array_limit_inside_a_nested_array_keeps_the_tree_so_far(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "MAX_ELEMENTS", 5)
    msg = dissect(produce([batch([b"v"])] * 8))  # topics: 1, then 8 partitions: 9 elements
    parts = partitions(msg)
    assert len(parts) == 4 and parts[-1].child("records") is not None
    assert keys(msg) == ["kafka.array_cap"]
    assert "8 elements" in msg.diagnostics[0].message
    assert not any(d.group == Group.MALFORMED for d in msg.diagnostics)


def test_impossible_counts_stay_malformed() -> None:
    msg = dissect(kafka_request(3, 0, 9, "m", struct.pack(">i", 1_000_000) + b"\x00\x00" * 10))
    assert keys(msg) == ["kafka.badlength"]


def test_a_million_empty_topic_names_stop_at_the_default_limit() -> None:
    msg = dissect(kafka_request(3, 0, 9, "m", struct.pack(">i", 1_000_000) + b"\x00\x00" * 1_000_000))
    assert len(field(msg, "topics").children or []) == base.MAX_ELEMENTS
    assert keys(msg) == ["kafka.array_cap"]


def test_a_header_of_too_many_tagged_fields_is_garbage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(headers, "MAX_ELEMENTS", 100)
    tagged = bytes([200, 1]) + b"".join(bytes([i, 0]) for i in range(100)) + bytes([0x81, 0x01, 0]) * 100
    payload = struct.pack(">hhih", 18, 3, 5, 1) + b"c" + tagged + b"\x00\x00\x00"
    msg = dissect(struct.pack(">i", len(payload)) + payload)
    assert keys(msg) == ["kafka.badlength"]


def test_inferring_a_responses_api_spends_one_messages_allowance_of_elements(monkeypatch: pytest.MonkeyPatch) -> None:
    # A response without its request, of 60,000 small array elements that many response plans
    # read to the end: every plan had its own allowance, so one inference decoded 736,000
    # elements (0.66 s for 360 KB, 8 such responses a conversation); the plans now share one.
    from kdissect.kafka import infer

    n = 60_000
    body = struct.pack(">ii", 0, n) + struct.pack(">hi", 0, 0) * n
    data = struct.pack(">ii", 4 + len(body), 7) + body
    budgets: list[base.Budget] = []
    real = infer.Ctx

    def ctx(*args: object, **kwargs: object) -> object:
        c = real(*args, **kwargs)  # type: ignore[arg-type]
        budgets.append(c.budget)
        return c

    monkeypatch.setattr(infer, "Ctx", ctx)
    assert infer.infer_response(data, Options()) is None
    spent = sum(b.elements_limit - b.elements_left for b in {id(b): b for b in budgets}.values())
    assert 0 < spent <= base.MAX_ELEMENTS
