"""What one Pulsar message may cost: batch entries and decoded fields are counted per message,
past the limit the rest is not decoded (with a diagnostic, in summary-only mode too), and the
decompressed bytes a message keeps are reported for the pipeline's budget."""

from __future__ import annotations

import struct

import pytest
import zstandard
from pulsar_testlib import SEND, batch, keys, payload_frame, pb, root, run

from kdissect.dissect import base
from kdissect.dissect.base import Options
from kdissect.model import Group, Message
from kdissect.pulsar.dissector import DISSECTOR

SEND_BODY = pb((1, 1), (2, 42))


def meta(*extra: tuple[int, object]) -> bytes:
    return pb((1, "prod"), (2, 42), (3, 1700000000000), *extra)  # type: ignore[arg-type]


def entries(n: int) -> bytes:
    return batch(*[(pb((3, 1)), b"x")] * n)


@pytest.mark.parametrize("detail", [True, False])
def test_batch_entries_past_the_limit_are_not_decoded(monkeypatch: pytest.MonkeyPatch, detail: bool) -> None:
    monkeypatch.setattr(base, "MAX_ENTRIES", 100)
    body = entries(1000)
    zbody = zstandard.ZstdCompressor().compress(body)
    msg = run(payload_frame(SEND, SEND_BODY, meta((8, 3), (9, len(body)), (11, 1000)), zbody),
              opts=Options(record_detail=detail))
    msgs = root(msg, "messages")
    assert msgs is not None and len(msgs.children or []) == 100
    assert msgs.label == "messages (first 100 of 1000)"
    assert keys(msg) == ["pulsar.batch_limit"]
    assert msg.diagnostics[0].group == Group.COMMENT
    assert msg.summary == "SEND producer=1 seq=42 1000 messages (zstd)"
    assert msg.inflated == len(body)


def test_fields_past_the_limit_are_not_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "MAX_ELEMENTS", 50)
    packed = pb((31, b"\x01" * 500))  # compacted_batch_indexes, packed: 500 varints
    msg = run(payload_frame(SEND, SEND_BODY, meta() + packed, b"payload"))
    assert keys(msg) == ["pulsar.field_limit"]
    d = msg.diagnostics[0]
    assert d.group == Group.UNDECODED and "more than 50 fields" in d.message
    metadata = root(msg, "metadata")
    assert metadata is not None
    indexes = metadata.child("compacted_batch_indexes")
    assert indexes is not None and 0 < len(indexes.children or []) < 50
    assert msg.summary == "SEND producer=1 seq=42 1 message"


def test_unknown_fields_count_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "MAX_ELEMENTS", 20)
    unknown = b"".join(struct.pack("BB", 99 << 3 & 0x7F | 0x80, 99 >> 4) + b"\x00" for _ in range(200))
    msg = run(payload_frame(SEND, SEND_BODY, meta() + unknown, b"p"))
    assert keys(msg).count("pulsar.unknown_field") < 20
    assert keys(msg)[-1] == "pulsar.field_limit"


def properties_entry_batch(n: int) -> bytes:
    """A batch of one entry whose metadata carries n empty properties, zstd-compressed: a few
    dozen bytes on the wire."""
    return batch((pb(*([(1, pb((1, b""), (2, b"")))] * n), (3, 1)), b"x"))


def properties_shown(msg: Message) -> int:
    msgs = root(msg, "messages")
    first = msgs.children[0] if msgs is not None and msgs.children else None
    properties = first.child("properties") if first is not None else None
    return len(properties.children or []) if properties is not None else 0


def test_a_compressed_entrys_many_fields_count_against_the_captures_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    """A decompressed batch entry's fields past FREE_ENTRY_FIELDS count against the capture's
    entries: no bytes of the capture bound them (100 SENDs of 80 bytes of zstd, each an entry of
    99,990 empty properties, took 11.5 CPU-seconds and 493 MB to export). Once the capture's
    entries are spent, the later batches show none; an entry of a few fields costs one entry."""
    monkeypatch.setattr(base, "MAX_ENTRIES", 1_000)
    body = properties_entry_batch(2_000)
    frame = payload_frame(SEND, SEND_BODY, meta((8, 3), (9, len(body)), (11, 1)),
                          zstandard.ZstdCompressor().compress(body))
    capture = base.CaptureState()
    msgs = []
    for _ in range(20):
        state = DISSECTOR.new_state()
        state.share(capture)
        msgs.append(run(frame, state=state))
    shown = [properties_shown(m) for m in msgs]
    assert shown[0] == 2_000 and shown[-1] == 0
    assert "pulsar.batch_limit" in keys(msgs[-1])
    allowance = 4 * 1_000 + 20 * len(frame) // 4
    assert capture.inflation.entries <= allowance + 3 * 2_000 + 1  # the last entry shown may pass it

    small = batch(*[(pb((3, 1)), b"x")] * 10)
    frame = payload_frame(SEND, SEND_BODY, meta((8, 3), (9, len(small)), (11, 10)),
                          zstandard.ZstdCompressor().compress(small))
    capture = base.CaptureState()
    state = DISSECTOR.new_state()
    state.share(capture)
    run(frame, state=state)
    assert capture.inflation.entries == 10
