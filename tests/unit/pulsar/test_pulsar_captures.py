"""Field-level checks on real captures: the shared ones (a real broker for deepflow's capture;
real clients against a scripted responder for gen__*) and the project's own captures."""

from __future__ import annotations

from pathlib import Path

import pytest
from pulsar_testlib import OWN_CAPTURES, root
from support import SHARED

from kdissect.dissect.base import Options
from kdissect.model import Message, Severity
from kdissect.pipeline import dissect_file
from kdissect.render.jsonout import dumps, message_dict

SHARED_PULSAR = SHARED / "captures" / "pulsar"


def _load(path: Path, opts: Options | None = None) -> list[Message]:
    if not path.exists():
        pytest.skip(f"{path.name} not available")
    return [m for m in dissect_file(str(path), opts=opts) if m.protocol == "pulsar"]


def _ops(msgs: list[Message], op: str) -> list[Message]:
    return [m for m in msgs if m.info.get("op") == op]


def _clean(msgs: list[Message]) -> None:
    for m in msgs:
        assert not [d for d in m.diagnostics if d.severity == Severity.ERROR], (m, m.diagnostics)
        if m.kind == "response":
            assert m.peer is not None, m


def test_deepflow_real_broker_producer() -> None:
    msgs = _load(SHARED_PULSAR / "deepflowio__deepflow__pulsar-producer.pcap")
    assert len(msgs) == 32
    _clean(msgs)
    connect = _ops(msgs, "CONNECT")[0]
    assert connect.summary == "CONNECT client=Pulsar-CPP-v3.4.2 protocol=19 auth=none"
    connected = _ops(msgs, "CONNECTED")[0]
    assert root(connected, "connected").get("server_version") == "Pulsar Server3.2.0"  # type: ignore[union-attr]
    assert connected.peer is connect
    lookup = _ops(msgs, "LOOKUP_RESPONSE")[0]
    assert lookup.summary == "LOOKUP persistent://public/default/my-topic → broker pulsar://localhost:6650"
    sends = _ops(msgs, "SEND")
    assert len(sends) == 10
    for i, s in enumerate(sends):
        assert root(s, "checksum_status").value == "correct"  # type: ignore[union-attr]
        assert root(s, "payload").value == f"hello-pulsar-{i}".encode()  # type: ignore[union-attr]
        assert root(s, "metadata").get("producer_name") == "standalone-0-4"  # type: ignore[union-attr]
        assert s.summary == f"SEND producer=0 seq={i} 1 message persistent://public/default/my-topic"
    receipts = _ops(msgs, "SEND_RECEIPT")
    assert [r.peer for r in receipts] == sends
    assert [root(r, "send_receipt").get("message_id.entry_id") for r in receipts] == list(range(40, 50))  # type: ignore[union-attr]


def test_python_client_produce_consume() -> None:
    msgs = _load(SHARED_PULSAR / "gen__pulsar_py_produce_consume.pcap")
    _clean(msgs)
    send = _ops(msgs, "SEND")[0]
    meta = root(send, "metadata")
    assert meta is not None
    assert meta.get("partition_key") == "key-0" and meta.get("event_time") == 1700000000000
    props = {c.get("key"): c.get("value") for c in meta.child("properties").children or []}  # type: ignore[union-attr]
    assert props == {"k": "v0", "idx": "0"}
    assert root(send, "payload").value == b"pulsar message 0"  # type: ignore[union-attr]
    pushes = _ops(msgs, "MESSAGE")
    assert len(pushes) == 10 and all(m.kind == "event" and not m.expects_response for m in pushes)
    assert root(pushes[9], "payload").value == b"pulsar message 9"  # type: ignore[union-attr]
    ping = _ops(msgs, "PING")[0]
    assert not ping.to_server and _ops(msgs, "PONG")[0].peer is ping
    sub = _ops(msgs, "SUBSCRIBE")[0]
    assert root(sub, "subscribe").child("sub_type").display == "Shared"  # type: ignore[union-attr]


def test_pulsar_flex_batch() -> None:
    msgs = _load(SHARED_PULSAR / "gen__pulsar_flex_basic.pcap")
    _clean(msgs)
    batch = [m for m in _ops(msgs, "SEND") if root(m, "messages") is not None][0]
    entries = root(batch, "messages").children or []  # type: ignore[union-attr]
    assert [e.get("payload") for e in entries][0] == b"batched one"
    assert entries[2].get("payload") == b"batched three"
    assert entries[0].get("properties.key") == "pulsar" and entries[0].get("properties.value") == "flex"
    assert batch.summary == "SEND producer=0 seq=2 3 messages persistent://public/default/flex-topic"
    assert len(_ops(msgs, "ACK_RESPONSE")) == 4


def test_connect_only_capture() -> None:
    msgs = _load(SHARED_PULSAR / "gen__pulsar_py_connect_only.pcap")
    assert [m.info["op"] for m in msgs] == ["CONNECT"]
    assert msgs[0].summary.startswith("CONNECT client=Pulsar-CPP-v4.2.0 protocol=20")


CODECS = ("none", "lz4", "zlib", "zstd", "snappy")


def test_own_capture_every_codec_batched() -> None:
    msgs = _load(OWN_CAPTURES / "gen__pulsar_codecs_batches.pcap")
    _clean(msgs)
    for direction in ("SEND", "MESSAGE"):
        found = _ops(msgs, direction)
        assert len(found) == 5
        for m, codec in zip(found, CODECS, strict=True):
            assert m.info["topic"] == f"persistent://public/default/codec-{codec}"
            entries = root(m, "messages").children or []  # type: ignore[union-attr]
            assert len(entries) == 4
            for i, e in enumerate(entries):
                assert e.get("payload").startswith(f"{codec.upper() if codec != 'zlib' else 'ZLib'} message {i} ".encode())
                assert e.get("properties.value") == str(i) and e.get("partition_key") == f"k{i % 2}"
            tag = "" if codec == "none" else f" ({codec})"
            assert f"4 messages{tag} persistent://" in m.summary
        if direction == "MESSAGE":
            assert all(root(m, "broker_entry_metadata") is not None for m in found)


def test_own_capture_chunks_auth_errors() -> None:
    msgs = _load(OWN_CAPTURES / "gen__pulsar_chunks_auth_errors.pcap")
    _clean(msgs)
    chunks = [m for m in _ops(msgs, "SEND") if "chunk" in m.summary]
    assert [root(m, "metadata").get("chunk_id") for m in chunks] == [0, 1, 2, 3]  # type: ignore[union-attr]
    assert len({root(m, "metadata").get("uuid") for m in chunks}) == 1  # type: ignore[union-attr]
    assert root(chunks[0], "metadata").get("num_chunks_from_msg") == 4  # type: ignore[union-attr]
    challenge = _ops(msgs, "AUTH_CHALLENGE")[0]
    assert challenge.kind == "request" and _ops(msgs, "AUTH_RESPONSE")[0].peer is challenge
    errors = [m for m in msgs if m.info.get("error")]
    assert {m.info["error"] for m in errors} == {"TopicNotFound", "PersistenceError"}
    exported = "\n".join(dumps(message_dict(m, 1 << 20)) for m in msgs)
    assert "s3cr3t-t0ken" not in exported and "redacted" in exported


def test_own_capture_secrets_shown_on_request() -> None:
    msgs = _load(OWN_CAPTURES / "gen__pulsar_chunks_auth_errors.pcap", Options(show_secrets=True))
    connect = _ops(msgs, "CONNECT")[0]
    assert root(connect, "connect").get("auth_data") == b"s3cr3t-t0ken"  # type: ignore[union-attr]


def test_own_capture_encrypted() -> None:
    msgs = _load(OWN_CAPTURES / "gen__pulsar_encrypted.pcap")
    _clean(msgs)
    for m in _ops(msgs, "SEND") + _ops(msgs, "MESSAGE"):
        assert root(m, "metadata").get("encryption_keys.key") == "kdissect-key"  # type: ignore[union-attr]
        assert "(lz4, encrypted)" in m.summary
        assert "pulsar.encrypted" in [d.key for d in m.diagnostics]
