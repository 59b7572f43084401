"""Messages dissected again from the spill file equal the pipeline's, byte for byte as JSON, for
every message of every capture (the project's and the shared ones); the rules that send a
message to its conversation's decode instead; the spill file."""

from __future__ import annotations

import functools
import struct
from array import array
from pathlib import Path

import pytest
from support import CAPTURES, shared_captures, sidecar_decode_as, sidecar_keylog

from kdissect.dissect.base import Options, run_dissector
from kdissect.kafka.dissector import DISSECTOR as KAFKA
from kdissect.model import Message, Pdu
from kdissect.pipeline import dissect_file, link
from kdissect.protocols import DissectorRegistry
from kdissect.render.jsonout import dumps_bytes, message_dict
from kdissect.tui import redissect, spill
from kdissect.tui import store as store_mod
from kdissect.tui.columns import Columns
from kdissect.tui.redecode import MessageCache
from kdissect.tui.redissect import Replay
from kdissect.tui.spill import Spill
from kdissect.tui.store import Store

PROTOCOLS = ("kafka", "zookeeper", "pulsar", "rocketmq", "tls")
ALL = sorted(p for proto in PROTOCOLS for p in (CAPTURES / proto).glob("*.pcap"))
SASL = CAPTURES / "kafka" / "scripted_ck_sasl.pcap"
ZK = CAPTURES / "zookeeper" / "zk_session.pcap"
FOUR = CAPTURES / "zookeeper" / "zk_four_letter_more.pcap"
PULSAR = CAPTURES / "pulsar" / "gen__pulsar_codecs_batches.pcap"
TXN = CAPTURES / "kafka" / "mock_ck_transactions.pcap"


def setup(path: Path, proto: str) -> tuple[DissectorRegistry, Options]:
    return (DissectorRegistry(decode_as=sidecar_decode_as(path, proto)),
            Options(tls_keylog=sidecar_keylog(path)))


@functools.cache
def fresh(path: Path, proto: str) -> tuple[bytes, ...]:
    """The messages of a decode as JSON once it is over (a request answered after it was output,
    as Kafka's acks=0 ones may be, then has its match, as the store's held Messages do)."""
    msgs = list(dissect_file(str(path), *setup(path, proto)))
    return tuple(dumps_bytes(message_dict(m)) for m in msgs)


def evicting(path: Path, proto: str, monkeypatch: pytest.MonkeyPatch) -> Store:
    """A store that holds none of its messages: each one asked for is dissected again."""
    monkeypatch.setattr(store_mod, "KEEP_ALL", 0)
    store = Store([str(path)], *setup(path, proto))
    store._cache = MessageCache(max_messages=1)
    store.start()
    assert store.wait(120) and (not store.keeps_all or len(store) == 0)
    return store


def no_conversation_decode(*_: object, **__: object) -> None:
    raise AssertionError("decoded the conversation again instead of dissecting the message")


def assert_all_dissected_again(path: Path, proto: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = evicting(path, proto, monkeypatch)
    monkeypatch.setattr(store_mod, "conversation_messages", no_conversation_decode)
    want = fresh(path, proto)
    assert len(store) == len(want)
    for i in reversed(range(len(store))):
        assert dumps_bytes(message_dict(store.message(i))) == want[i], i
    store.stop()


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_message_dissected_again_is_the_same(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_all_dissected_again(path, "kafka" if path.parent.name == "tls" else path.parent.name, monkeypatch)


@pytest.mark.parametrize("proto", ("kafka", "zookeeper", "pulsar", "rocketmq"))
def test_shared_captures_dissected_again_are_the_same(proto: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for path in shared_captures(proto):
        with monkeypatch.context() as m:
            assert_all_dissected_again(path, proto, m)


# -- what a message depends on -------------------------------------------------------------------


def loaded(path: Path, proto: str) -> Store:
    store = Store([str(path)], *setup(path, proto))
    store.start()
    assert store.wait(60)
    return store


def contexts(store: Store) -> list[tuple[int, int]]:
    assert store._replay is not None
    return [(i, c) for i, c in enumerate(store._replay.context) if c >= 0]


def differs_without_context(store: Store, i: int, monkeypatch: pytest.MonkeyPatch) -> bool:
    replay = store._replay
    assert replay is not None
    with monkeypatch.context() as m:
        m.setattr(replay, "context", [-1] * len(store))
        alone = replay.message(store.cols, i, store.registry, store.opts)
    assert alone is not None
    return dumps_bytes(message_dict(alone)) != fresh(Path(store.captures[0]), store.row(i).protocol)[i]


def test_kafka_sasl_authenticate_needs_its_handshake(monkeypatch: pytest.MonkeyPatch) -> None:
    store = loaded(SASL, "kafka")
    found = contexts(store)
    assert found and all(store.row(c).summary.startswith("SaslHandshake v1 request") for _, c in found)
    assert all(store.row(i).summary.startswith("SaslAuthenticate") for i, _ in found)


@pytest.mark.parametrize("path", [FOUR, ZK], ids=lambda p: p.name)
def test_zookeeper_depends_on_each_sides_first_packet(path: Path) -> None:
    store = loaded(path, "zookeeper")
    found = dict(contexts(store))
    assert found
    for i, c in found.items():
        s = store.stream_indices(store.row(i).stream)
        firsts = {s[0], next((j for j in s if store.cols.endpoints(j) != store.cols.endpoints(s[0])), -1)}
        assert c in firsts and c < i


def test_pulsar_ids_need_the_command_that_named_their_topic(monkeypatch: pytest.MonkeyPatch) -> None:
    store = loaded(PULSAR, "pulsar")
    found = contexts(store)
    assert found
    assert {store.row(c).summary.split()[0] for _, c in found} <= {"PRODUCER", "SUBSCRIBE"}
    assert any(differs_without_context(store, i, monkeypatch) for i, _ in found)


def pipeline_like(pdus: list[tuple[bytes, bool]]) -> tuple[Columns, Replay, list[Message]]:
    """Messages of one Kafka conversation dissected in order, linked, numbered and indexed as
    the store indexes them."""
    cols, replay, state, out = Columns(), Replay(), KAFKA.new_state(), []
    for n, (data, to_server) in enumerate(pdus):
        m = Message(Pdu(data, [n + 1], float(n), float(n) + 0.5, to_server), 0,
                    *(("c:1", "s:9092") if to_server else ("s:9092", "c:1")), "kafka")
        run_dissector(KAFKA, m, state, Options())
        if m.peer is not None:
            link(m.peer, m)
        m.number = n + 1
        replay.add(n, m)
        cols.add(m)
        out.append(m)
    return cols, replay, out


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def kafka_request(api: int, ver: int, corr: int, body: bytes) -> bytes:
    return frame(struct.pack(">hhih", api, ver, corr, 1) + b"c" + body)


def test_raw_sasl_tokens_need_the_v0_handshake() -> None:
    cols, replay, msgs = pipeline_like([
        (kafka_request(17, 0, 1, b"\x00\x05PLAIN"), True),
        (frame(struct.pack(">ihi", 1, 0, 1) + b"\x00\x05PLAIN"), False),
        (frame(b"\x00user\x00secret"), True),
        (frame(b""), False),
        (kafka_request(3, 1, 2, struct.pack(">i", -1)), True),
    ])
    assert list(replay.context) == [-1, -1, 1, 1, -1]
    assert msgs[2].summary.startswith("SASL token request") and msgs[3].summary.startswith("SASL token response")
    for i, m in enumerate(msgs):
        again = replay.message(cols, i, DissectorRegistry(), Options())
        assert again is not None and dumps_bytes(message_dict(again)) == dumps_bytes(message_dict(m)), i
    assert replay.order(cols, 3) == [0, 1, 3]
    replay.context = array("i", [-1] * len(msgs))
    alone = replay.message(cols, 3, DissectorRegistry(), Options())
    assert alone is not None and not alone.summary.startswith("SASL token")


# -- the rules that decode the conversation instead --------------------------------------------------


def test_past_max_context_the_conversation_is_decoded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redissect, "MAX_CONTEXT", 1)
    store = evicting(TXN, "kafka", monkeypatch)
    assert store._replay is not None
    want = fresh(TXN, "kafka")
    responses = [i for i in range(len(store)) if store.row(i).peer is not None and store.row(i).kind == "response"]
    assert responses and all(store._replay.order(store.cols, i) is None for i in responses)
    for i in responses[:5]:
        assert dumps_bytes(message_dict(store.message(i))) == want[i]


def test_forgotten_topic_ids_send_id_messages_to_their_conversation(monkeypatch: pytest.MonkeyPatch) -> None:
    path = CAPTURES / "kafka" / "expert_producer_anomalies.pcap"
    monkeypatch.setattr(redissect, "MAX_IDS", 2)
    store = evicting(path, "kafka", monkeypatch)
    replay = store._replay
    assert replay is not None and replay.topics.overflow is not None
    later = [i for i in range(replay.topics.overflow + 1, len(store)) if replay.bits[i] & redissect.TOPIC_IDS]
    assert later and all(replay.order(store.cols, i) is None for i in later)
    want = fresh(path, "kafka")
    for i in later[:3]:
        assert dumps_bytes(message_dict(store.message(i))) == want[i]


def test_topic_ids_are_those_taught_before_the_message() -> None:
    store = loaded(CAPTURES / "kafka" / "expert_kip848_rebalance.pcap", "kafka")
    topics = store._replay.topics if store._replay is not None else None
    assert topics is not None and topics.names
    tid, taught = next(iter(topics.names.items()))
    first = taught[0][0]
    from kdissect.kafka.topicids import TopicIds

    assert topics.as_of(first).get(TopicIds).name(tid) is None
    assert topics.as_of(first + 1).get(TopicIds).name(tid) == taught[0][1]


def test_messages_naming_topics_by_id_need_the_ids_learned(monkeypatch: pytest.MonkeyPatch) -> None:
    store = loaded(CAPTURES / "kafka" / "expert_kip848_rebalance.pcap", "kafka")
    replay = store._replay
    assert replay is not None
    monkeypatch.setattr(replay.topics, "as_of", lambda i: redissect.CaptureState())
    assert any(differs_without_context(store, i, monkeypatch) for i in range(len(store))
               if replay.bits[i] & redissect.TOPIC_IDS)


def test_after_stop_messages_are_decoded_from_the_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    store = evicting(ZK, "zookeeper", monkeypatch)
    store.stop()
    assert store._replay is not None and store._replay.spill.closed
    want = fresh(ZK, "zookeeper")
    assert dumps_bytes(message_dict(store.message(3))) == want[3]


def test_replay_takes_little_memory_per_message() -> None:
    store = loaded(TXN, "kafka")
    assert store._replay is not None
    assert store._replay.nbytes() <= 40 * len(store)
    assert store._replay.spill.size >= sum(len(store.message(i).data) for i in range(len(store)))


# -- the spill file -------------------------------------------------------------------------------------


def test_spill_reads_back_from_file_and_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "CHUNK", 10)
    s = Spill()
    records = [bytes([n]) * n for n in range(1, 30)]
    offsets = [s.append(r) for r in records]
    assert s.size == sum(map(len, records))
    for at, r in zip(offsets, records, strict=True):
        assert s.read(at, len(r)) == r
    assert s.read(s.size - 1, 2) is None and s.read(-1, 1) is None
    s.close()
    assert s.read(0, 1) is None and s.append(b"x") == -1
