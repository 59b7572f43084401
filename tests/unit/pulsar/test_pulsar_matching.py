from __future__ import annotations

import lz4.block
import pytest
from pulsar_testlib import (
    ACK,
    ACK_RESPONSE,
    AUTH_CHALLENGE,
    AUTH_RESPONSE,
    CLOSE_PRODUCER,
    CONNECT,
    CONNECTED,
    ERROR,
    FLOW,
    LOOKUP,
    LOOKUP_RESPONSE,
    PARTITIONED_METADATA,
    PARTITIONED_METADATA_RESPONSE,
    PING,
    PONG,
    PRODUCER,
    PRODUCER_SUCCESS,
    SEND,
    SEND_ERROR,
    SEND_RECEIPT,
    SUBSCRIBE,
    SUCCESS,
    batch,
    keys,
    payload_frame,
    pb,
    run,
    simple,
)

from kdissect.dissect.base import ConversationState, Options
from kdissect.model import Message
from kdissect.pulsar import conversation
from kdissect.pulsar.conversation import PulsarConversation
from kdissect.pulsar.dissector import DISSECTOR

TOPIC = "persistent://public/default/orders"


def _state() -> ConversationState:
    return DISSECTOR.new_state()


def test_connect_connected_summary_and_match() -> None:
    st = _state()
    req = run(simple(CONNECT, pb((1, "Pulsar-CPP-v3.4.2"), (4, 21), (5, "none"))), state=st)
    assert req.summary == "CONNECT client=Pulsar-CPP-v3.4.2 protocol=21 auth=none"
    assert req.kind == "request" and req.info["version"] == 21
    resp = run(simple(CONNECTED, pb((1, "Pulsar Server"), (2, 21), (3, 5242880))), to_server=False, state=st)
    assert resp.peer is req and resp.kind == "response"
    assert resp.summary == "CONNECTED server=Pulsar Server protocol=21 max_message_size=5242880"


def test_ping_either_side_per_direction() -> None:
    st = _state()
    broker_ping = run(simple(PING), to_server=False, state=st)
    client_ping = run(simple(PING), to_server=True, state=st)
    assert broker_ping.kind == client_ping.kind == "request"
    client_pong = run(simple(PONG), to_server=True, state=st)  # answers the broker's ping
    assert client_pong.peer is broker_ping and client_pong.kind == "response"
    broker_pong = run(simple(PONG), to_server=False, state=st)
    assert broker_pong.peer is client_ping


def test_producer_topic_remembered_for_send_and_receipt() -> None:
    st = _state()
    prod = run(simple(PRODUCER, pb((1, TOPIC), (2, 1), (3, 7))), state=st)
    ok = run(simple(PRODUCER_SUCCESS, pb((1, 7), (2, "p-1"))), to_server=False, state=st)
    assert ok.peer is prod and ok.summary == f"PRODUCER_SUCCESS producer_name=p-1 for PRODUCER {TOPIC}"
    raw = batch((pb((3, 1)), b"a"), (pb((3, 1)), b"b"), (pb((3, 1)), b"c"))
    meta = pb((1, "p-1"), (2, 42), (3, 1), (8, 1), (9, len(raw)), (11, 3))
    send = run(payload_frame(SEND, pb((1, 1), (2, 42), (3, 3)), meta, lz4.block.compress(raw, store_size=False)),
               state=st)
    assert send.summary == f"SEND producer=1 seq=42 3 messages (lz4) {TOPIC}"
    assert send.info["topic"] == TOPIC and send.info["corr"] == "1:42"
    receipt = run(simple(SEND_RECEIPT, pb((1, 1), (2, 42), (3, pb((1, 9), (2, 40))))), to_server=False, state=st)
    assert receipt.peer is send and receipt.info["topic"] == TOPIC
    assert "message_id=9:40" in receipt.summary


def test_long_names_are_cut_in_summaries_and_kept_whole_in_facts() -> None:
    # A topic or producer name of 1 MB was written whole in the summary of its command and of
    # every SEND and answer naming it: read wrote 60 MB for 50 MB of such commands.
    from kdissect.pulsar.summary import MAX_TEXT

    topic, name = "persistent://t/n/" + "x" * 1_000_000, "p" * 1_000_000
    cut = lambda s: s[: MAX_TEXT - 1] + "…"  # noqa: E731
    st = _state()
    prod = run(simple(PRODUCER, pb((1, topic), (2, 1), (3, 7))), state=st)
    ok = run(simple(PRODUCER_SUCCESS, pb((1, 7), (2, name))), to_server=False, state=st)
    assert prod.summary == f"PRODUCER {cut(topic)} producer_id=1" and prod.info["topic"] == topic
    assert ok.summary == f"PRODUCER_SUCCESS producer_name={cut(name)} for PRODUCER {cut(topic)}"
    send = run(payload_frame(SEND, pb((1, 1), (2, 42), (3, 1)), pb((1, name), (2, 42), (3, 1)), b"a"), state=st)
    assert send.summary == f"SEND producer=1 seq=42 1 message {cut(topic)}" and send.info["topic"] == cut(topic)


def test_a_topic_remembered_for_an_id_is_cut_as_summaries_cut_it() -> None:
    # Every SEND of a producer and every FLOW of a consumer carry in their facts the topic the
    # id was created for: a PRODUCER and a SUBSCRIBE of a 1 MB topic, then 40,000 small SENDs and
    # FLOWs (3.1 MB), made more than 7 GB of JSON. The command naming the topic keeps it whole.
    from kdissect.pulsar.summary import MAX_TEXT

    topic = "persistent://t/n/" + "x" * 1_000_000
    short = topic[: MAX_TEXT - 1] + "…"
    st = _state()
    prod = run(simple(PRODUCER, pb((1, topic), (2, 1), (3, 7))), state=st)
    sub = run(simple(SUBSCRIBE, pb((1, topic), (2, "sub"), (3, 0), (4, 9), (5, 8))), state=st)
    assert prod.info["topic"] == topic and sub.info["topic"] == topic
    assert st.producers == {1: short} and st.consumers == {9: short}
    send = run(payload_frame(SEND, pb((1, 1), (2, 42)), pb((1, "p"), (2, 42), (3, 1)), b"a"), state=st)
    flow = run(simple(FLOW, pb((1, 9), (2, 100))), state=st)
    assert send.info["topic"] == short and flow.info["topic"] == short


def test_a_long_error_message_is_cut_in_the_diagnostic_as_in_the_summary() -> None:
    # The pulsar.error diagnostic quoted the error message whole: three answers whose message has
    # 4 MB (12 MB) made read -V write 12 MB, each diagnostic one line of 4 MB (10 KB now), and
    # export 36 MB (24 MB now: the field and error_message keep the message whole).
    from kdissect.pulsar.summary import MAX_TEXT

    text = "e" * 4_000_000
    st = _state()
    run(simple(LOOKUP, pb((1, TOPIC), (2, 1))), state=st)
    err = run(simple(ERROR, pb((1, 1), (2, 2), (3, text))), to_server=False, state=st)
    cut = text[: MAX_TEXT - 1] + "…"
    assert err.info["error_message"] == text and err.summary.endswith(f"error=PersistenceError: {cut}")
    assert [d.message for d in err.diagnostics] == [f"ERROR: PersistenceError: {cut}"]


def test_a_message_id_nesting_its_first_chunk_s_is_cut_in_the_summary() -> None:
    # A MessageIdData without ledger_id shows as {its first three fields}, and may hold its first
    # chunk's id, again and again: ids nesting three first_chunk_message_ids a level, ten levels
    # (30 ACKs, SEEKs and SEND_RECEIPTs, 10.7 MB), made summary lines of 75 KB (read: 1.8 MB,
    # now 34 KB). The field tree keeps them.
    from kdissect.pulsar.summary import MAX_TEXT

    mid = pb((2, 1))
    for _ in range(10):
        mid = pb((2, 1), (7, [mid] * 3))
    ack = run(simple(ACK, pb((1, 6), (2, 0), (3, mid))), state=_state())
    assert len(ack.summary) < MAX_TEXT + 100
    assert ack.summary.startswith("ACK consumer_id=6 ack_type=Individual message_id={entry_id=1, first_chunk_message_id={entry_id=1")
    assert ack.summary.endswith("…")
    plain = run(simple(ACK, pb((1, 6), (2, 0), (3, pb((2, 2), (3, 4))))), state=_state())
    assert plain.summary == "ACK consumer_id=6 ack_type=Individual message_id={entry_id=2, partition=4}"


def test_chunks_sharing_a_sequence_id_match_in_order() -> None:
    st = _state()
    sends = [run(simple(SEND, pb((1, 0), (2, 5))), state=st) for _ in range(3)]
    receipts = [run(simple(SEND_RECEIPT, pb((1, 0), (2, 5))), to_server=False, state=st) for _ in range(3)]
    assert [r.peer for r in receipts] == sends
    err = run(simple(SEND_ERROR, pb((1, 0), (2, 5), (3, 2), (4, "disk"))), to_server=False, state=st)
    assert err.peer is None and err.info["error"] == "PersistenceError"


def test_conversation_state_is_typed_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conversation, "MAX_IDS", 2)
    st = DISSECTOR.new_state()
    assert isinstance(st, PulsarConversation)
    for pid in range(3):
        run(simple(PRODUCER, pb((1, f"{TOPIC}-{pid}"), (2, pid), (3, 10 + pid))), state=st)
    run(simple(SUBSCRIBE, pb((1, TOPIC), (2, "sub"), (3, 0), (4, 8), (5, 10))), state=st)
    assert st.producers == {1: f"{TOPIC}-1", 2: f"{TOPIC}-2"}  # the oldest was forgotten
    assert st.consumers == {8: TOPIC}
    run(simple(SEND, pb((1, 1), (2, 5))), state=st)
    assert st.send_seq == {}  # a lone SEND keeps no counter
    run(simple(SEND, pb((1, 1), (2, 5))), state=st)
    assert st.send_seq == {(1, 5): [2, 0]}
    for _ in range(2):
        run(simple(SEND_RECEIPT, pb((1, 1), (2, 5))), to_server=False, state=st)
    assert st.send_seq == {}


def test_sends_never_answered_leave_no_counters() -> None:
    """300 conversations of 4,096 SENDs never answered (42 MB) kept 1.2 million counters (260 of
    the 600 MB stats took)."""
    st = _state()
    for seq in range(100):
        run(simple(SEND, pb((1, 1), (2, seq))), state=st)
    assert st.send_seq == {}
    st = _state()
    order = ["s", "r", "s", "r", "s", "s", "r", "s", "r", "r"]  # chunks answered as they come, or later
    sends: list[Message] = []
    peers = []
    for step in order:
        if step == "s":
            sends.append(run(simple(SEND, pb((1, 0), (2, 5))), state=st))
        else:
            peers.append(run(simple(SEND_RECEIPT, pb((1, 0), (2, 5))), to_server=False, state=st).peer)
    assert peers == sends and st.send_seq == {}


def test_a_plain_conversation_state_is_refused() -> None:
    with pytest.raises(TypeError):
        run(simple(PING), state=ConversationState())


def test_send_error_matches_and_reports() -> None:
    st = _state()
    send = run(simple(SEND, pb((1, 2), (2, 9))), state=st)
    err = run(simple(SEND_ERROR, pb((1, 2), (2, 9), (3, 2), (4, "disk full"))), to_server=False, state=st)
    assert err.peer is send
    assert err.info["error_code"] == 2 and err.info["error"] == "PersistenceError"
    assert err.summary.endswith("error=PersistenceError: disk full")
    assert "pulsar.error" in keys(err)


def test_lookup_summary_and_request_id_families() -> None:
    st = _state()
    # one connection, two request-id sequences: a lookup and a subscribe both use request_id 1
    lookup = run(simple(LOOKUP, pb((1, TOPIC), (2, 1))), state=st)
    sub = run(simple(SUBSCRIBE, pb((1, TOPIC), (2, "s"), (3, 1), (4, 0), (5, 1))), state=st)
    ok = run(simple(SUCCESS, pb((1, 1))), to_server=False, state=st)
    assert ok.peer is sub and ok.summary == f"SUCCESS for SUBSCRIBE {TOPIC}"
    resp = run(simple(LOOKUP_RESPONSE, pb((1, "pulsar://broker-1:6650"), (3, 1), (4, 1))), to_server=False, state=st)
    assert resp.peer is lookup
    assert resp.summary == f"LOOKUP {TOPIC} → broker pulsar://broker-1:6650"
    assert resp.info["corr"] == 1


def test_error_answers_any_request() -> None:
    st = _state()
    pm = run(simple(PARTITIONED_METADATA, pb((1, TOPIC), (2, 3))), state=st)
    err = run(simple(ERROR, pb((1, 3), (2, 11), (3, "no such topic"))), to_server=False, state=st)
    assert err.peer is pm and err.info["error"] == "TopicNotFound"
    assert err.summary == f"ERROR for PARTITIONED_METADATA {TOPIC} error=TopicNotFound: no such topic"
    resp = run(simple(PARTITIONED_METADATA_RESPONSE, pb((1, 4), (2, 3))), to_server=False, state=st)
    assert resp.peer is None  # already answered


def test_ack_with_and_without_request_id() -> None:
    st = _state()
    run(simple(SUBSCRIBE, pb((1, TOPIC), (2, "s"), (3, 0), (4, 6), (5, 1))), state=st)
    plain = run(simple(ACK, pb((1, 6), (2, 0), (3, pb((1, 1), (2, 2))))), state=st)
    assert plain.expects_response is False and plain.kind == "request"
    assert plain.info["topic"] == TOPIC
    acked = run(simple(ACK, pb((1, 6), (2, 1), (3, pb((1, 1), (2, 3))), (8, 11))), state=st)
    assert acked.expects_response is True
    resp = run(simple(ACK_RESPONSE, pb((1, 6), (6, 11))), to_server=False, state=st)
    assert resp.peer is acked


def test_flow_is_oneway_and_close_from_broker_is_an_event() -> None:
    st = _state()
    flow = run(simple(FLOW, pb((1, 0), (2, 1000))), state=st)
    assert flow.expects_response is False and flow.summary == "FLOW consumer_id=0 message_permits=1000"
    forced = run(simple(CLOSE_PRODUCER, pb((1, 0), (2, 99))), to_server=False, state=st)
    assert forced.kind == "event" and forced.expects_response is False
    own = run(simple(CLOSE_PRODUCER, pb((1, 0), (2, 5))), state=st)
    assert own.kind == "request" and own.expects_response is True


def test_auth_handshake_and_refresh() -> None:
    st = _state()
    conn = run(simple(CONNECT, pb((1, "c"), (3, b"tok-1"), (4, 21), (5, "token"))), state=st)
    challenge = run(simple(AUTH_CHALLENGE, pb((1, "s"), (2, pb((1, "token"), (2, b"chal"))))), to_server=False,
                    state=st)
    assert challenge.peer is conn and challenge.kind == "response"
    answer = run(simple(AUTH_RESPONSE, pb((1, "c"), (2, pb((1, "token"), (2, b"tok-2"))))), state=st)
    assert answer.kind == "request"
    connected = run(simple(CONNECTED, pb((1, "s"), (2, 21))), to_server=False, state=st)
    assert connected.peer is answer
    # later: a broker-initiated refresh
    refresh = run(simple(AUTH_CHALLENGE, pb((1, "s"), (2, pb((1, "token"), (2, b"again"))))), to_server=False,
                  state=st)
    assert refresh.kind == "request"
    reply = run(simple(AUTH_RESPONSE, pb((2, pb((1, "token"), (2, b"tok-3"))))), state=st)
    assert reply.peer is refresh and reply.kind == "response"


def test_auth_data_redacted_unless_show_secrets() -> None:
    frame = simple(CONNECT, pb((1, "c"), (3, b"tok-secret"), (4, 21), (5, "token")))
    hidden = run(frame)
    connect = next(f for f in hidden.fields if f.name == "connect")
    assert connect.get("auth_data") == "<redacted: 10 bytes>"
    shown = run(frame, opts=Options(show_secrets=True))
    assert next(f for f in shown.fields if f.name == "connect").get("auth_data") == b"tok-secret"
    resp = run(simple(AUTH_RESPONSE, pb((2, pb((1, "token"), (2, b"tok-2"))))))
    assert next(f for f in resp.fields if f.name == "auth_response").get("response.auth_data") == "<redacted: 5 bytes>"


def test_session_updates_answer_once_then_push() -> None:
    st = _state()
    lookup = run(simple(70, pb((1, 4), (2, "topic://t/n/x"))), state=st)  # SCALABLE_TOPIC_LOOKUP
    first = run(simple(71, pb((1, 4), (5, "topic://t/n/x"))), to_server=False, state=st)
    later = run(simple(71, pb((1, 4))), to_server=False, state=st)
    assert first.peer is lookup and first.kind == "response"
    assert later.peer is None and later.kind == "event" and later.expects_response is False
    assert first.summary == "SCALABLE_TOPIC_UPDATE topic://t/n/x session_id=4"
