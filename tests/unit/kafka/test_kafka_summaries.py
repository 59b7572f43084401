"""Kafka one-line summaries on real captures: topics named by id (Fetch v13+) shown by the names
learned earlier in the capture, on any of its conversations; the key facts of InitProducerId,
EndTxn, SaslHandshake and SaslAuthenticate (never a password)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from support import CAPTURES, SHARED_CAPTURES, shared_path, sidecar_decode_as

from kdissect.capture.l2l4 import decode
from kdissect.capture.pcapfile import CaptureFile
from kdissect.capture.pcapwriter import PcapWriter
from kdissect.dissect.base import CaptureState, Options
from kdissect.kafka.apis import APIS
from kdissect.kafka.dissector import DISSECTOR
from kdissect.kafka.topicids import ID_PATHS, MAX_IDS, MAX_NAME, NO_ID, TopicIds, teaches
from kdissect.model import Message
from kdissect.pipeline import Pipeline, dissect_file
from kdissect.protocols import DissectorRegistry
from kdissect.stream.flow import Endpoint

TRANSACTIONS = CAPTURES / "kafka" / "mock_ck_transactions.pcap"
SASL = CAPTURES / "kafka" / "scripted_ck_sasl.pcap"
FETCH, METADATA = 1, 3


def kafka(path: Path, opts: Options | None = None,
          flow_filter: Callable[[Endpoint, Endpoint], bool] | None = None) -> list[Message]:
    registry = DissectorRegistry(decode_as=sidecar_decode_as(path, "kafka"))
    return [m for m in dissect_file(str(path), registry, opts, flow_filter=flow_filter) if m.protocol == "kafka"]


def by_frame(msgs: list[Message]) -> dict[int, Message]:
    return {m.frames[-1]: m for m in msgs}


def op(msgs: list[Message], code: int) -> list[Message]:
    return [m for m in msgs if m.info.get("op_code") == code]


# -- topic ids -------------------------------------------------------------------------


def test_fetch_v16_names_topics_learned_from_metadata_on_another_connection() -> None:
    msgs = kafka(TRANSACTIONS)
    fetches = op(msgs, FETCH)
    assert {m.info["version"] for m in fetches} == {16}
    by = by_frame(msgs)
    assert by[122].summary == "Fetch v16 request corr=6 client=kd-gen kd-txn[0@0]"
    assert by[125].summary == "Fetch v16 response corr=6 kd-txn[0] hw=9 1 batch 4 records"
    assert by[135].summary == "Fetch v16 request corr=9 client=kd-gen kd-txn[0@8]"
    assert all(m.info["topics"] == ["kd-txn"] and m.info["topic"] == "kd-txn" for m in fetches)
    # The ids were learned from Metadata v13 responses of another TCP conversation.
    learned = {m.stream for m in op(msgs, METADATA) if m.kind == "response" and "kd-txn" in m.info.get("topics", ())}
    assert learned and not learned & {m.stream for m in fetches}


def test_an_id_not_learned_keeps_its_prefix(tmp_path: Path) -> None:
    """Only the Fetch conversation's packets captured: no name was learned."""
    client = next(m.src for m in op(kafka(TRANSACTIONS), FETCH) if m.kind == "request")
    port = int(str(client).rsplit(":", 1)[1])
    only = tmp_path / "fetch-only.pcap"
    with CaptureFile(str(TRANSACTIONS)) as cap:
        frames = [f for f in cap if (seg := decode(f)) is not None and port in (seg.sport, seg.dport)]
    with PcapWriter(str(only), frames[0].linktype) as w:
        for f in frames:
            w.write(f.data, f.wirelen, round(f.ts * 1e9))
    registry = DissectorRegistry(decode_as=sidecar_decode_as(TRANSACTIONS, "kafka"))
    msgs = op(list(dissect_file(str(only), registry)), FETCH)
    assert msgs, "the Fetch conversation was not decoded"
    first = msgs[0]
    assert first.summary == "Fetch v16 request corr=6 client=kd-gen 20004d03[0@0]"
    assert "topics" not in first.info


def test_a_share_of_the_capture_still_names_the_topics() -> None:
    """A worker decoding only the Fetch conversation (Spark's flow shares) decodes the others
    quietly: the names are learned, the output is the Fetch conversation's alone."""
    client = next(m.src for m in op(kafka(TRANSACTIONS), FETCH) if m.kind == "request")
    port = int(str(client).rsplit(":", 1)[1])

    def only_fetch(a: Endpoint, b: Endpoint) -> bool:
        return port in (a[1], b[1])

    msgs = kafka(TRANSACTIONS, flow_filter=only_fetch)
    assert msgs and all(port in (int(m.src.rsplit(":", 1)[1]), int(m.dst.rsplit(":", 1)[1])) for m in msgs)
    assert by_frame(msgs)[122].summary == "Fetch v16 request corr=6 client=kd-gen kd-txn[0@0]"


def test_fetch_v16_names_on_shared_consumer_group_capture() -> None:
    path = shared_path("captures", "kafka", "gen__mock_ck_consumer_group.pcap")
    fetches = op(kafka(path), FETCH)
    assert len(fetches) > 40
    assert all(m.info.get("topics") == ["grp"] for m in fetches), [m.summary for m in fetches if "grp" not in m.summary]
    assert by_frame(fetches)[123].summary == "Fetch v16 request corr=9 client=ck-c1 grp[1@0, 2@0, 3@0]"


def test_topic_id_paths_come_from_the_specification() -> None:
    assert ("topics",) in ID_PATHS[(FETCH, True)] and ("forgotten_topics_data",) in ID_PATHS[(FETCH, True)]
    assert ID_PATHS[(FETCH, False)] == (("responses",),)
    assert ID_PATHS[(METADATA, False)] == (("topics",),)
    assert ("topics",) in ID_PATHS[(75, False)]  # DescribeTopicPartitions
    assert (2, False) not in ID_PATHS  # ListOffsets names topics


def test_only_bodies_that_name_a_topic_beside_its_id_teach() -> None:
    assert teaches(METADATA, False, 10) and teaches(METADATA, True, 12)
    assert not teaches(METADATA, False, 9)  # no topic ids yet
    assert teaches(METADATA, False, APIS[METADATA].newest + 5)  # decoded as the newest
    assert teaches(75, False, 0)  # DescribeTopicPartitions
    assert not teaches(FETCH, False, 16) and not teaches(FETCH, True, 13)  # ids without names
    assert not teaches(0, True, 13) and not teaches(0, False, 3)  # Produce
    assert not teaches(2, False, 5) and not teaches(9999, False, 0)  # ListOffsets; an unknown API


def _lessons(path: Path, quiet: bool) -> dict[type, object]:
    pipe = Pipeline(DissectorRegistry(decode_as=sidecar_decode_as(path, "kafka")),
                    flow_filter=(lambda a, b: False) if quiet else None)
    with CaptureFile(str(path)) as cap:
        for frame in cap:
            pipe.feed(frame)
    pipe.finish()
    return pipe.shared.lessons()


def test_a_quiet_decoding_learns_what_a_full_one_learns() -> None:
    """A conversation another worker outputs is decoded only for what it teaches: the topic
    ids it learns, and the frames it learns them at, are those of a full decoding."""
    paths = sorted((CAPTURES / "kafka").glob("*.pcap*"))
    if SHARED_CAPTURES.exists():
        paths += sorted((SHARED_CAPTURES / "kafka").glob("*.pcap*"))
    taught = 0
    for path in paths:
        full = _lessons(path, quiet=False)
        assert _lessons(path, quiet=True) == full, path
        taught += sum(len(ids) for ids in full.values())
    assert taught > 0  # some captures teach ids


def test_topic_ids_are_bounded_and_forget_the_oldest() -> None:
    ids = TopicIds()
    ids.learn(NO_ID, "nothing")
    ids.learn("a", "")
    assert ids.names == {}
    for n in range(MAX_IDS + 2):
        ids.learn(f"id-{n}", f"t{n}")
    assert len(ids.names) == MAX_IDS
    assert ids.name("id-0") is None and ids.name("id-1") is None
    assert ids.name(f"id-{MAX_IDS + 1}") == f"t{MAX_IDS + 1}"
    ids.learn("id-2", "renamed")  # learned again: the newest, kept past the next eviction
    ids.learn("new", "n")
    assert ids.name("id-2") == "renamed" and ids.name("id-3") is None


def test_topic_ids_forget_the_oldest_in_constant_time() -> None:
    """Past MAX_IDS each new id forgets the oldest: learning the next MAX_IDS ids costs about what
    the first MAX_IDS did. (A dict's oldest key, next(iter(d)), steps over every slot earlier
    deletions emptied: a capture of 400,000 topic ids took 17 s to export, 4 s now.)"""
    import time

    names = [f"{n:032x}" for n in range(2 * MAX_IDS)]
    times = []
    for _ in range(3):  # a busy machine may slow one half: the best of three tries
        ids = TopicIds()
        start = time.perf_counter()
        for n in names[:MAX_IDS]:
            ids.learn(n, "t")
        filled = time.perf_counter()
        for n in names[MAX_IDS:]:
            ids.learn(n, "t")
        times.append((filled - start, time.perf_counter() - filled))
        assert len(ids.names) == MAX_IDS and ids.name(names[-1]) == "t" and ids.name(names[0]) is None
        if times[-1][1] < 3 * times[-1][0] + 0.05:
            break
    else:
        raise AssertionError(f"(filling, evicting) seconds: {times}")


def test_topic_ids_learn_no_name_longer_than_kafka_allows() -> None:
    """What the table holds is bounded by its count of ids times the longest legal name, however
    long the names a capture pairs with ids."""
    ids = TopicIds()
    ids.learn("a", "t" * MAX_NAME)
    ids.learn("b", "t" * (MAX_NAME + 1))
    ids.learn("a", "x" * 1_000_000)  # keeps the name learned before
    assert ids.names == {"a": "t" * MAX_NAME}
    assert list(ids.lessons()) == ["a"]


def test_capture_state_is_shared_only_when_given() -> None:
    a, b = DISSECTOR.new_state(), DISSECTOR.new_state()
    assert a.capture.get(TopicIds) is not b.capture.get(TopicIds)
    shared = CaptureState()
    a.capture = b.capture = shared
    assert a.capture.get(TopicIds) is b.capture.get(TopicIds) is shared.get(TopicIds)


# -- transactions ----------------------------------------------------------------------


def test_init_producer_id_and_end_txn() -> None:
    by = by_frame(kafka(TRANSACTIONS))
    assert by[41].summary == "InitProducerId v4 request corr=4 client=kd-gen txn=kd-txn-1 timeout=60000ms"
    assert by[42].summary == "InitProducerId v4 response corr=4 producer=755285000 epoch=0"
    assert by[62].summary == "EndTxn v1 request corr=6 client=kd-gen COMMIT txn=kd-txn-1 producer=755285000 epoch=0"
    assert by[63].summary == "EndTxn v1 response corr=6"
    assert by[68].summary == "EndTxn v1 request corr=8 client=kd-gen ABORT txn=kd-txn-1 producer=755285000 epoch=0"


def test_idempotent_init_producer_id() -> None:
    path = shared_path("captures", "kafka", "gen__mock_kp_basic.pcap")
    by = by_frame(kafka(path))
    assert by[20].summary == "InitProducerId v1 request corr=2 client=kp-gen idempotent"
    assert by[21].summary == "InitProducerId v1 response corr=2 producer=76908000 epoch=0"


# -- SASL ------------------------------------------------------------------------------


def test_sasl_summaries() -> None:
    by = by_frame(kafka(SASL))
    expected = {
        8: "SaslHandshake v1 request corr=2 client=kd-sasl mechanism=PLAIN",
        9: "SaslHandshake v1 response corr=2",
        10: "SaslAuthenticate v1 request corr=3 client=kd-sasl PLAIN user=alice",
        11: "SaslAuthenticate v1 response corr=3",
        46: "SaslAuthenticate v1 request corr=3 client=kd-sasl PLAIN user=bob",
        47: "SaslAuthenticate v1 response corr=3 message='authentication failed' SASL_AUTHENTICATION_FAILED",
        64: "SaslHandshake v1 request corr=2 client=kd-sasl mechanism=SCRAM-SHA-256",
        67: "SaslAuthenticate v1 request corr=3 client=kd-sasl SCRAM-SHA-256 client_first user=alice",
        69: "SaslAuthenticate v1 response corr=3 SCRAM-SHA-256 server_first",
        70: "SaslAuthenticate v1 request corr=4 client=kd-sasl SCRAM-SHA-256 client_final",
        71: "SaslAuthenticate v1 response corr=4 SCRAM-SHA-256 server_final",
        109: "SaslAuthenticate v1 request corr=3 client=kd-sasl SCRAM-SHA-512 client_first user=bob",
        129: "SaslAuthenticate v1 request corr=3 client=kd-sasl OAUTHBEARER client_initial",
    }
    assert {f: by[f].summary for f in expected} == expected


def test_sasl_summaries_never_show_a_password() -> None:
    for opts in (Options(), Options(show_secrets=True)):
        summaries = " ".join(m.summary for m in kafka(SASL, opts))
        assert "user=alice" in summaries and "user=bob" in summaries
        for secret in ("alice-secret", "bob-secret", "wrong", "eyJ"):
            assert secret not in summaries


def test_sasl_handshake_refused_lists_the_enabled_mechanisms() -> None:
    path = shared_path("captures", "kafka", "ajbanjara__Wireshark__kafka-testcases-v4__sasl-handshake.pcapng")
    req, resp = kafka(path)
    assert req.summary == "SaslHandshake v0 request corr=0 client=test mechanism=unknown_mechanism"
    assert resp.summary == "SaslHandshake v0 response corr=0 enabled=[GSSAPI] ILLEGAL_SASL_STATE"
