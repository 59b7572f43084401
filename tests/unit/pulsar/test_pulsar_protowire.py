from __future__ import annotations

import contextlib

import pytest
from pulsar_testlib import pb, varint

from kdissect.errors import BadValue, DecodeError, Truncated
from kdissect.model import ARRAY, DURATION_MS, DURATION_S, ENUM, RAW, STRUCT, TIME_MS, Severity, format_ms
from kdissect.pulsar import protowire
from kdissect.pulsar.protowire import WalkContext, decode, walk


def _walk(message: str, data: bytes, ctx: WalkContext | None = None):  # type: ignore[no-untyped-def]
    return decode(data, 0, len(data), message, ctx or WalkContext())


def test_scalars_enums_and_nested_messages() -> None:
    data = pb((1, 17), (2, pb((1, 9), (2, 40), (3, 2))), (3, 4), (4, [-1, 5]), (5, 7))
    f = _walk("CommandMessage", data)
    assert f.hint == STRUCT
    assert f.get("consumer_id") == 17
    mid = f.child("message_id")
    assert mid is not None and mid.get("ledger_id") == 9 and mid.get("entry_id") == 40 and mid.get("partition") == 2
    assert f.get("redelivery_count") == 4
    ack = f.child("ack_set")
    assert ack is not None and ack.hint == ARRAY
    assert [c.value for c in ack.children or []] == [-1, 5]  # int64 from a 10-byte varint
    assert f.get("consumer_epoch") == 7


def test_negative_int32_and_enum_symbol() -> None:
    f = _walk("CommandProducerSuccess", pb((1, 3), (2, "p"), (3, -1)))
    assert f.get("last_sequence_id") == -1
    sub = _walk("CommandSubscribe", pb((1, "t"), (2, "s"), (3, 3), (4, 1), (5, 2)))
    st = sub.child("sub_type")
    assert st is not None and st.hint == ENUM and st.value == 3 and st.display == "Key_Shared"
    unknown = _walk("CommandSubscribe", pb((1, "t"), (2, "s"), (3, 99), (4, 1), (5, 2))).child("sub_type")
    assert unknown is not None and unknown.display == "unknown(99)"


def test_packed_repeated_and_offsets() -> None:
    packed = varint(-3) + varint(8)
    data = pb((1, 1), (2, 2), (5, packed))
    f = _walk("MessageIdData", data)
    arr = f.child("ack_set")
    assert arr is not None and [c.value for c in arr.children or []] == [-3, 8]
    first = (arr.children or [])[0]
    assert data[first.offset : first.offset + first.length] == varint(-3)
    ledger = f.child("ledger_id")
    assert ledger is not None and (ledger.offset, ledger.length) == (0, 2)


def test_fixed64_double() -> None:
    f = _walk("CommandConsumerStatsResponse", pb((1, 5), (4, ("f64", 12.5))))
    assert f.get("msg_rate_out") == 12.5


def test_time_fields_get_a_date() -> None:
    f = _walk("MessageMetadata", pb((1, "p"), (2, 0), (3, 1700000000000)))
    t = f.child("publish_time")
    assert t is not None and t.hint == TIME_MS and format_ms(t.value) == "2023-11-14T22:13:20.000Z"


def test_varints_take_their_type_and_hint_from_the_plan() -> None:
    # Each varint's conversion and hint are worked out once per field of a message type.
    f = _walk("CommandNewTxn", pb((1, 1), (2, 30000), (3, 2)))
    ttl = f.child("txn_ttl_millis")
    assert ttl is not None and ttl.value == 30000 and ttl.hint == DURATION_MS
    sub = _walk("CommandSubscribe", pb((1, "t"), (2, "s"), (3, 0), (4, 1), (5, 2), (8, 2), (16, 7)))
    durable, rollback = sub.child("durable"), sub.child("start_message_rollback_duration_sec")
    assert durable is not None and durable.value is True and durable.hint is None
    assert rollback is not None and rollback.value == 7 and rollback.hint == DURATION_S
    assert protowire.plan("CommandNewTxn")[2].hint == DURATION_MS


def test_unknown_field_is_kept_raw_with_a_note() -> None:
    ctx = WalkContext()
    f = _walk("CommandFlow", pb((1, 4), (2, 100), (99, b"future"), (98, 5)), ctx)
    raw = f.child("field_99")
    assert raw is not None and raw.value == b"future" and raw.hint == RAW
    assert f.get("field_98") == 5
    assert f.get("message_permits") == 100
    assert [d.key for d in ctx.diags] == ["pulsar.unknown_field", "pulsar.unknown_field"]
    assert all(d.severity == Severity.NOTE for d in ctx.diags)


def test_unknown_fields_are_noted_once_a_field() -> None:
    # A PING with 100,000 unknown fields had as many diagnostics: 30 of them waiting for their
    # PONG (9 MB) took 1.3 GB.
    ctx = WalkContext()
    data = pb((1, 4)) + pb((99, 7)) * 5000 + pb((2, 100)) + pb((98, b"x")) * 3
    f = _walk("CommandFlow", data, ctx)
    ctx.settle()
    assert f.get("message_permits") == 100 and len(f.children or []) == 5005
    assert [(d.key, d.message, d.offset) for d in ctx.diags] == [
        ("pulsar.unknown_field", "CommandFlow field 99 (wire type 0) unknown to protocol version 21: kept raw "
         "(5000 times)", 2),
        ("pulsar.unknown_field", "CommandFlow field 98 (wire type 2) unknown to protocol version 21: kept raw "
         "(3 times)", 2 + 5000 * 3 + 2),
    ]


def test_an_unknown_field_again_costs_no_new_note(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each unknown field rewrote its note (a new Diagnostic with the count so far): 2.7 µs a
    # field, 7 s of CPU for 8 MB of FLOWs of unknown one-byte varints; the text is written once
    # the walk is done.
    made: list[str] = []
    real = protowire.replace
    monkeypatch.setattr(protowire, "replace", lambda d, **kw: made.append(kw["message"]) or real(d, **kw))
    ctx = WalkContext()
    _walk("CommandFlow", pb((1, 4), (2, 100)) + pb((99, 7)) * 1000 + pb((98, b"x")) * 1000, ctx)
    ctx.settle()
    assert len(made) == 2
    assert [d.message for d in ctx.diags] == [
        "CommandFlow field 99 (wire type 0) unknown to protocol version 21: kept raw (1000 times)",
        "CommandFlow field 98 (wire type 2) unknown to protocol version 21: kept raw (1000 times)"]


def test_unknown_fields_past_the_noted_ones_are_one_note() -> None:
    ctx = WalkContext()
    data = pb((1, 4), (2, 100)) + b"".join(pb((1000 + i, 1)) for i in range(protowire.MAX_UNKNOWN_NOTED + 50))
    _walk("CommandFlow", data, ctx)
    ctx.settle()
    assert len(ctx.diags) == protowire.MAX_UNKNOWN_NOTED + 1
    assert ctx.diags[-1].message == "50 more unknown fields (of other numbers): kept raw"


def test_wrong_wire_type_is_kept_raw() -> None:
    ctx = WalkContext()
    f = _walk("CommandFlow", pb((1, 4), (2, "not a number")), ctx)
    ctx.settle()
    assert f.get("field_2") == b"not a number"
    assert [d.key for d in ctx.diags] == ["pulsar.unknown_field", "pulsar.missing_required"]
    assert "unexpected wire type" in ctx.diags[0].message


def test_missing_required_is_a_warning() -> None:
    ctx = WalkContext()
    _walk("CommandFlow", pb((1, 4)), ctx)
    assert [(d.key, d.severity) for d in ctx.diags] == [("pulsar.missing_required", Severity.WARNING)]
    assert "message_permits" in ctx.diags[0].message


def test_malformed_submessage_keeps_siblings() -> None:
    ctx = WalkContext()
    bad_sub = varint(1 << 3) + b"\xff"  # a varint cut short
    f = _walk("CommandMessage", pb((1, 3), (2, bad_sub), (3, 1)), ctx)
    assert f.get("consumer_id") == 3 and f.get("redelivery_count") == 1
    mid = f.child("message_id")
    assert mid is not None and mid.hint == RAW and mid.value == bad_sub
    assert "pulsar.malformed_field" in [d.key for d in ctx.diags]


def test_notes_of_one_kind_past_the_cap_are_one_note() -> None:
    # A repeated field of empty or broken sub-messages (2 or 3 bytes each) took a note each,
    # about 150 bytes of JSON: 30,000 in a 60 KB PING made 4.5 MB.
    ctx = WalkContext()
    empty, broken = b"\x12\x00", b"\x12\x01\x00"  # connect {} (client_version missing); field 0
    f = _walk("BaseCommand", b"\x08\x12" + empty * 1000 + broken * 1000, ctx)
    ctx.settle()
    assert f.children is not None and sum(c.name == "connect" for c in f.children) == 2000
    keys = [d.key for d in ctx.diags]
    assert keys.count("pulsar.missing_required") == keys.count("pulsar.malformed_field") == 101  # MAX_NOTED and one
    last = [d for d in ctx.diags if d.key == "pulsar.missing_required"][-1]
    assert last.message == "900 more of this kind, the last: CommandConnect: required client_version missing"


def test_truncated_and_bad_lengths_raise_decode_errors() -> None:
    with pytest.raises(Truncated):
        walk(b"\x08", 0, 1, "CommandFlow", WalkContext(), 0)
    with pytest.raises(BadValue):
        walk(varint(2 << 3 | 2) + varint(50) + b"x", 0, 4, "CommandConnect", WalkContext(), 0)
    with pytest.raises(BadValue):
        walk(b"\x00\x01", 0, 2, "CommandFlow", WalkContext(), 0)  # field number 0
    with pytest.raises(BadValue):
        walk(varint(5 << 3 | 3), 0, 1, "CommandFlow", WalkContext(), 0)  # group wire type


def test_nesting_is_bounded() -> None:
    inner = pb((1, 1), (2, 2))
    for _ in range(protowire.MAX_DEPTH + 5):
        inner = pb((1, 1), (2, 2), (7, inner))
    ctx = WalkContext()
    f = _walk("MessageIdData", inner, ctx)  # the deepest level becomes raw, no RecursionError
    assert "pulsar.malformed_field" in [d.key for d in ctx.diags]
    assert f.get("ledger_id") == 1


def test_redaction() -> None:
    data = pb((1, "c"), (3, b"secret-token"))
    hidden = _walk("CommandConnect", data, WalkContext(redact=frozenset({("CommandConnect", "auth_data")})))
    assert hidden.get("auth_data") == "<redacted: 12 bytes>"
    shown = _walk("CommandConnect", data)
    assert shown.get("auth_data") == b"secret-token"


def test_everything_raised_is_a_decode_error() -> None:
    data = pb((1, 1), (2, pb((1, 2), (2, 3))))
    for cut in range(len(data)):
        with contextlib.suppress(DecodeError):
            walk(data[:cut], 0, cut, "CommandMessage", WalkContext(), 0)
