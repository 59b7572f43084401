"""Header quirks and version policy, on byte literals."""

from __future__ import annotations

import struct

from kdissect.dissect.base import Options, run_dissector
from kdissect.kafka.conversation import KafkaConversation
from kdissect.kafka.dissector import DISSECTOR
from kdissect.kafka.error_codes import ERRORS, error_name
from kdissect.model import Field, Group, Message, Pdu, Severity


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def request(api: int, ver: int, corr: int, body: bytes, client: bytes = b"c") -> bytes:
    return frame(struct.pack(">hhih", api, ver, corr, len(client)) + client + body)


def run(data: bytes, to_server: bool, state: KafkaConversation) -> Message:
    msg = Message(Pdu(data, [1], 0.0, 0.0, to_server), 0, "c", "s", "kafka")
    run_dissector(DISSECTOR, msg, state, Options())
    return msg


def values(fields: list[Field]) -> list[object]:
    return [x for f in fields for x in [f.value, f.display, *values(f.children or [])]]


def keys(m: Message) -> set[str]:
    return {d.key for d in m.diagnostics}


def test_every_error_code_named() -> None:
    assert set(range(-1, 134)) <= set(ERRORS)
    assert error_name(6) == "NOT_LEADER_OR_FOLLOWER" and error_name(35) == "UNSUPPORTED_VERSION"
    assert error_name(9999) == "ERROR_9999"


def test_api_versions_v3_error_gets_v0_body_with_header_v0() -> None:
    state = DISSECTOR.new_state()
    # ApiVersions v3 request: header v2 (int16 client id + tags), compact strings, tags
    req = run(request(18, 3, 5, b"\x00" + b"\x02a\x02b\x00"), True, state)
    assert not keys(req) and req.info["client_id"] == "c"
    # response header v0 (no tags) + v0 body: error 35, one api (18, 0..2)
    resp = run(frame(struct.pack(">ihihhh", 5, 35, 1, 18, 0, 2)), False, state)
    assert resp.peer is req and resp.info["error"] == "UNSUPPORTED_VERSION"
    assert "kafka.api_versions_v0_body" in keys(resp)
    assert not [d for d in resp.diagnostics if d.group in (Group.MALFORMED, Group.UNDECODED)]


def test_newer_version_decoded_as_newest_with_assumption() -> None:
    state = DISSECTOR.new_state()
    # Heartbeat v99: decoded as v4 (flexible): compact group, generation, member, instance, tags
    m = run(request(12, 99, 1, b"\x00" + b"\x02g\x00\x00\x00\x01\x02m\x00\x00"), True, state)
    assert any(d.key == "kafka.newer_version" and d.group == Group.ASSUMPTION for d in m.diagnostics)
    assert m.info.get("group") == "g"


def test_unknown_api_key_is_undecoded_not_fatal() -> None:
    m = run(request(500, 0, 1, b"\x01\x02"), True, DISSECTOR.new_state())
    assert any(d.key == "kafka.unknown_api" and d.group == Group.UNDECODED for d in m.diagnostics)
    assert m.fields[-1].value == b"\x01\x02"


def test_removed_version_is_a_note_only() -> None:
    # Produce v0: acks=-1, timeout, one topic "t", one partition 0, null records
    body = struct.pack(">hii", -1, 1000, 1) + b"\x00\x01t" + struct.pack(">iii", 1, 0, -1)
    m = run(request(0, 0, 3, body), True, DISSECTOR.new_state())
    assert [d.severity for d in m.diagnostics] == [Severity.NOTE]
    assert m.summary == "Produce v0 request corr=3 client=c acks=all t[0]"


def test_response_without_request() -> None:
    m = run(frame(struct.pack(">ih", 77, 0)), False, DISSECTOR.new_state())
    assert m.info["corr"] == 77 and "kafka.request_not_captured" in keys(m)


def test_sasl_handshake_v0_then_raw_tokens() -> None:
    state = DISSECTOR.new_state()
    run(request(17, 0, 1, b"\x00\x05PLAIN"), True, state)
    ok = run(frame(struct.pack(">ihi", 1, 0, 1) + b"\x00\x05PLAIN"), False, state)
    assert ok.info["error_code"] == 0
    token = run(frame(b"\x00user\x00secret"), True, state)
    assert token.summary.startswith("SASL token request") and not keys(token)
    assert "secret" not in repr(values(token.fields))
    reply = run(frame(b""), False, state)
    assert reply.summary.startswith("SASL token response")
    after = run(request(3, 1, 2, struct.pack(">i", -1)), True, state)
    assert after.info["op"] == "Metadata"


def test_raw_sasl_tokens_carry_the_mechanism_cut() -> None:
    # A SaslHandshake naming a mechanism of 32,000 characters, then tokens: each token carried
    # the whole name twice (facts and field), and 134 KB of tokens made 1.3 GB of JSON.
    state = DISSECTOR.new_state()
    name = b"M" * 32000
    hs = run(request(17, 0, 1, struct.pack(">h", len(name)) + name), True, state)
    assert name.decode() in values(hs.fields)  # the request itself keeps it whole
    run(frame(struct.pack(">ihi", 1, 0, 1) + b"\x00\x05PLAIN"), False, state)
    token = run(frame(b"x"), True, state)
    assert token.info["sasl_mechanism"] == "M" * 19 + "\u2026"
    assert "M" * 19 + "\u2026" in values(token.fields)
    assert len(repr(values(token.fields))) < 200


def test_raw_sasl_tokens_shorter_than_a_kafka_message_are_framed() -> None:
    # OAUTHBEARER's client_error_ack is the one byte 0x01: below the framer's 4-byte minimum, it
    # made the framer resynchronise and lose the tokens after it.
    state = DISSECTOR.new_state()
    client, server = DISSECTOR.new_framer(True, state), DISSECTOR.new_framer(False, state)
    stream = frame(b"\x01") + frame(b"ab") + frame(b"n,a=x,\x01auth=Bearer t\x01\x01")

    def framed(framer: object, data: bytes, to_server: bool) -> list[Message]:
        out = []
        for pdu in framer.feed(data, 1, 0.0):  # type: ignore[attr-defined]
            msg = Message(pdu, 0, "c", "s", "kafka")
            run_dissector(DISSECTOR, msg, state, Options())
            out.append(msg)
        return out

    before = framed(client, request(17, 0, 1, b"\x00\x0bOAUTHBEARER"), True)
    assert [m.info["op"] for m in before] == ["SaslHandshake"]
    framed(server, frame(struct.pack(">ihi", 1, 0, 1) + b"\x00\x0bOAUTHBEARER"), False)
    tokens = framed(client, stream + request(3, 1, 2, struct.pack(">i", -1)), True)
    assert [len(m.data) for m in tokens] == [5, 6, 26, 19] and not [k for m in tokens for k in keys(m)]
    assert [m.summary for m in tokens[:2]] == ["SASL token request (1 byte)", "SASL token request (2 bytes)"]
    assert tokens[3].info["op"] == "Metadata"
    # Outside raw tokens a length below 4 is no Kafka message: the framer resynchronises.
    plain = DISSECTOR.new_state()
    other = DISSECTOR.new_framer(True, plain)
    first = other.feed(frame(b"\x01") + request(3, 1, 2, struct.pack(">i", -1)), 1, 0.0)
    assert first == [] and [d.key for d in other.pending_diags] == ["framing.bad_length"]


def test_response_api_inferred_when_unambiguous() -> None:
    from kafka_captures import messages

    resp = next(m for m in messages("ajbanjara__Wireshark__kafka-testcases-v4__metadata.pcapng")
                if m.kind == "response" and m.info["version"] == 1 and m.info.get("topics"))
    alone = run(resp.data, False, DISSECTOR.new_state())
    assert alone.info["op"] == "Metadata" and alone.info["topics"] == resp.info["topics"]
    assert "kafka.api_inferred" in keys(alone) and "kafka.request_not_captured" not in keys(alone)


def _metadata_v0_response(corr: int) -> bytes:
    """A Metadata v0 response (one broker, no topics): 28 bytes of body, which only Metadata fits."""
    body = struct.pack(">iih", 1, 1, 9) + b"localhost" + struct.pack(">ii", 9092, 0)
    return frame(struct.pack(">i", corr) + body)


def test_only_the_first_responses_of_a_conversation_have_their_api_inferred() -> None:
    # Each inference tries every response plan: a conversation gets MAX_INFERRED of them, and
    # none once one of its responses has found its request (later strays are lost requests, not
    # a capture that started mid-connection).
    from kdissect.kafka.conversation import MAX_INFERRED

    state = DISSECTOR.new_state()
    strays = [run(_metadata_v0_response(corr), False, state) for corr in range(100, 100 + 3 * MAX_INFERRED)]
    inferred = ["kafka.api_inferred" in keys(m) for m in strays]
    assert inferred == [True] * MAX_INFERRED + [False] * (2 * MAX_INFERRED)
    assert all("kafka.request_not_captured" in keys(m) for m in strays[MAX_INFERRED:])
    state = DISSECTOR.new_state()
    assert "kafka.api_inferred" in keys(run(_metadata_v0_response(1), False, state))
    run(request(3, 0, 2, struct.pack(">i", 0)), True, state)
    assert run(_metadata_v0_response(2), False, state).info["op"] == "Metadata"  # found its request
    late = run(_metadata_v0_response(3), False, state)
    assert keys(late) >= {"kafka.request_not_captured"} and "kafka.api_inferred" not in keys(late)


def test_responses_to_requests_dropped_from_the_pending_ones_decode_as_their_api() -> None:
    # A client that pipelines more requests than a connection keeps pending: the oldest are
    # dropped, but their API and version are remembered, so that their responses still decode
    # (not linked to them), instead of being paired with another request or left raw.
    state = KafkaConversation(max_pending=4)
    for corr in range(10, 16):
        run(request(3, 0, corr, struct.pack(">i", 0)), True, state)
    answers = [run(_metadata_v0_response(corr), False, state) for corr in range(10, 16)]
    assert [m.info["op"] for m in answers] == ["Metadata"] * 6
    assert [m.info["corr"] for m in answers] == list(range(10, 16))
    assert ["kafka.request_dropped" in keys(m) for m in answers] == [True, True, False, False, False, False]
    assert [m.peer is None for m in answers] == [True, True, False, False, False, False]
    assert not any(keys(m) & {"kafka.correlation_mismatch", "kafka.api_inferred", "kafka.request_not_captured"}
                   for m in answers)


def test_the_client_id_of_a_flexible_header_spans_its_string_not_the_tagged_fields() -> None:
    # Metadata v12 (flexible): client_id "client", then a tagged section with one field.
    tags = bytes([1, 5, 2]) + b"ab"
    data = struct.pack(">hhih", 3, 12, 7, 6) + b"client" + tags + b"\x01\x00\x00"
    req = run(frame(data), True, KafkaConversation())
    header = req.fields[1]
    client = header.children[3]
    assert (client.name, client.value, client.offset, client.length) == ("client_id", "client", 12, 8)
    tag = header.children[4]
    assert (tag.name, tag.value) == ("tag_5", b"ab")
    assert header.length == 8 + 8 + len(tags)


def test_the_conversations_of_a_capture_share_an_allowance_of_inferences() -> None:
    # Each conversation had its own MAX_INFERRED: thousands of connections of a few small stray
    # responses each (a 0.9 MB capture of 3,000) took 6.4 s of inference; the capture now infers
    # CAPTURE_INFERRED responses, and one more for every INFER_BYTES bytes its messages carried.
    from kdissect.dissect.base import CaptureState
    from kdissect.kafka.conversation import CAPTURE_INFERRED, INFER_BYTES

    capture = CaptureState()
    inferred = []
    for corr in range(CAPTURE_INFERRED + 50):
        state = DISSECTOR.new_state()
        state.share(capture)
        inferred.append("kafka.api_inferred" in keys(run(_metadata_v0_response(corr), False, state)))
    carried = (CAPTURE_INFERRED + 50) * len(_metadata_v0_response(0))
    assert carried < INFER_BYTES
    assert inferred == [True] * CAPTURE_INFERRED + [False] * 50
    state = DISSECTOR.new_state()
    state.share(capture)
    big = run(frame(struct.pack(">i", 1) + b"\x00" * 2 * INFER_BYTES), False, state)  # two more: one its own
    assert "kafka.api_inferred" not in keys(big)
    assert "kafka.api_inferred" in keys(run(_metadata_v0_response(7), False, state))
