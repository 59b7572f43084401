"""A frame cut short (the capture ends inside it, a length that overruns) keeps what was decoded
before the cut: the command's fields and the sub-message it cuts short, the payload section up
to the cut, the summary and the facts; then the MALFORMED diagnostic and the undecoded rest."""

from __future__ import annotations

from cut_short_support import capture_messages, check_cut, state_after_peer
from hypothesis import given, settings
from hypothesis import strategies as st
from pcapgen import TcpConn
from pulsar_testlib import (
    ERROR,
    LOOKUP,
    MESSAGE,
    SEND,
    SUBSCRIBE,
    batch,
    payload_frame,
    pb,
    root,
    run,
    simple,
)
from tests_support_pipeline import run_packets

from kdissect.pulsar.dissector import DISSECTOR

TOPIC = "persistent://public/default/t"


def names(fields: list | None) -> list[str]:
    return [f.name for f in fields or ()]


def test_subscribe_cut_inside_its_body() -> None:
    c = TcpConn(sport=6650)
    pkts = c.handshake()
    whole = simple(SUBSCRIBE, pb((1, TOPIC), (2, "subA"), (3, 0), (4, 7), (5, 3)))
    pkts.append(c.segment(True, whole[:52]))  # the capture ends inside consumer_id
    (msg,) = run_packets(pkts)
    assert msg.summary == f"SUBSCRIBE {TOPIC} subscription=subA sub_type=Exclusive (malformed)"
    assert msg.info["op"] == "SUBSCRIBE" and msg.info["topic"] == TOPIC
    assert names(msg.fields) == ["total_size", "command_size", "type", "subscribe", "undecoded"]
    sub = root(msg, "subscribe")
    assert names(sub.children) == ["topic", "subscription", "sub_type"]
    assert (sub.offset, sub.length) == (10, 41)
    # The field the cut falls in breaks where its tag starts: all of it is undecoded.
    assert [(d.key, d.offset) for d in msg.diagnostics] == [("tcp.incomplete", -1), ("pulsar.truncated", 51)]
    assert (msg.fields[-1].offset, msg.fields[-1].value) == (51, whole[51:52])


def test_error_cut_inside_its_text_keeps_the_error() -> None:
    state = DISSECTOR.new_state()
    run(simple(LOOKUP, pb((1, TOPIC), (2, 12))), True, state)
    whole = simple(ERROR, pb((1, 12), (2, 11), (3, f"Topic {TOPIC} not found")))
    msg = run(whole[:-10], False, state)
    assert msg.peer is not None and msg.peer.info["op"] == "LOOKUP"
    assert msg.summary == f"ERROR for LOOKUP {TOPIC} error=TopicNotFound (malformed)"
    assert msg.info["error"] == "TopicNotFound" and msg.info["error_code"] == 11
    assert names(root(msg, "error").children) == ["request_id", "error"]
    assert [d.key for d in msg.diagnostics] == ["pulsar.error", "pulsar.truncated"]
    assert msg.diagnostics[-1].offset == 16  # where the text field starts
    undecoded = msg.fields[-1]
    assert (undecoded.name, undecoded.offset, undecoded.value) == ("undecoded", 16, whole[16:-10])


def test_batch_cut_inside_its_second_entry() -> None:
    meta = pb((1, "prod"), (2, 5), (3, 1700000000000), (11, 2))
    data = payload_frame(SEND, pb((1, 7), (2, 5)), meta, batch((pb((3, 3)), b"abc"), (pb((3, 3)), b"def")))
    msg = run(data[:-2])
    assert msg.summary == "SEND producer=7 seq=5 2 messages (malformed)"
    assert names(msg.fields) == ["total_size", "command_size", "type", "send", "magic", "checksum",
                                 "checksum_status", "metadata_size", "metadata", "messages"]
    entries = root(msg, "messages").children or []
    assert names(entries) == ["message", "message", "undecoded"]
    assert names(entries[1].children) == ["index", "metadata_size", "payload_size"]
    assert (entries[2].offset, entries[2].value) == (len(data) - 3, b"d")
    assert [(d.key, d.offset) for d in msg.diagnostics] == [("pulsar.batch", len(data) - 3)]


def test_message_cut_inside_its_metadata() -> None:
    meta = pb((1, "prod"), (2, 5), (3, 1700000000000))
    data = payload_frame(MESSAGE, pb((1, 3), (2, pb((1, 7), (2, 9)))), meta, b"payload")
    msg = run(data[:41], False)
    assert msg.summary == "MESSAGE consumer=3 id=7:9 (malformed)"
    assert names(root(msg, "metadata").children) == ["producer_name", "sequence_id"]
    assert root(msg, "checksum_status").value == "unverified (incomplete frame)"
    assert [(d.key, d.offset) for d in msg.diagnostics] == [("pulsar.payload", 38)]
    assert (msg.fields[-1].name, msg.fields[-1].offset) == ("undecoded", 38)


def test_frame_cut_before_its_type() -> None:
    msg = run(simple(SUBSCRIBE, pb((1, TOPIC)))[:9])
    assert msg.summary == "malformed Pulsar request"
    assert names(msg.fields) == ["total_size", "command_size", "undecoded"]


# -- every cut of the messages in the project's captures ------------------------------------

CAPTURED = capture_messages("pulsar")
# A whole-frame verdict: a frame cut short leaves its checksum unverified.
WHOLE_FRAME = frozenset({"checksum_status"})


_state = state_after_peer(DISSECTOR.new_state, run)


def test_the_captures_have_frames() -> None:
    assert len(CAPTURED) > 30


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_a_cut_keeps_what_was_decoded_before_it(data: st.DataObject) -> None:
    m = data.draw(st.sampled_from(CAPTURED))
    check_cut(m, data.draw(st.integers(1, len(m.data) - 1)), run, _state, skip=WHOLE_FRAME)
