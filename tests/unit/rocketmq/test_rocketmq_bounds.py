"""What one RocketMQ frame may cost: the decompression budget is the frame's (all its stored
messages together), messages and their fields are counted per frame, and JSON documents and
ext-fields are bounded; past a limit the rest is not decoded, with a diagnostic."""

from __future__ import annotations

import gc
import json
import tracemalloc

import pytest
import zstandard
from conftest import Run

from kdissect.dissect import base
from kdissect.dissect.base import Options
from kdissect.model import Field, Group, Message
from kdissect.rocketmq import encode as enc
from kdissect.rocketmq import header, jfields, ljson

ZSTD_COMPRESSED = 0x1 | (2 << 8)  # sysflag: COMPRESSED, compression type ZSTD


def root(msg: Message, name: str) -> Field:
    return next(f for f in msg.fields if f.name == name)


def keys(msg: Message) -> list[str]:
    return [d.key for d in msg.diagnostics]


def test_decompression_budget_is_the_frames_not_each_messages(run: Run) -> None:
    body = zstandard.ZstdCompressor().compress(bytes(400_000))
    stored = b"".join(enc.stored_message("t", body, queue_offset=i, sysflag=ZSTD_COMPRESSED) for i in range(4))
    run(enc.frame(11, opaque=3, ext={"topic": "t"}))
    resp = run(enc.frame(0, opaque=3, flag=1, body=stored), to_server=False, opts=Options(max_decompressed=1_000_000))
    bodies = [m.get("body") for m in root(resp, "messages").children or []]
    assert [len(b) for b in bodies[:2]] == [400_000, 400_000]
    assert bodies[2:] == [body, body]  # kept compressed
    assert keys(resp) == ["rocketmq.decompress", "rocketmq.decompression_budget"]
    assert resp.diagnostics[1].group == Group.UNDECODED
    assert resp.inflated == 800_000
    assert resp.info["messages"] == 4


def test_messages_past_the_limit_are_not_decoded(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "MAX_ENTRIES", 10)
    body = enc.batch([(b"m%d" % i, {"KEYS": str(i)}) for i in range(50)])
    msg = run(enc.frame(320, opaque=6, ext={"topic": "t"}, body=body))
    msgs = root(msg, "messages")
    assert len(msgs.children or []) == 10 and msgs.label == "messages (first 10)"
    assert keys(msg) == ["rocketmq.message_limit"]
    assert "10 shown" in msg.diagnostics[0].message


def test_fields_of_messages_count_too(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "MAX_ELEMENTS", 40)
    body = enc.batch([(b"m", {f"K{j}": "v" for j in range(10)}) for _ in range(20)])
    msg = run(enc.frame(320, opaque=6, ext={"topic": "t"}, body=body))
    assert 1 < len(root(msg, "messages").children or []) < 20
    assert keys(msg) == ["rocketmq.message_limit"]


def test_json_past_the_value_limit_is_kept_raw(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ljson, "MAX_VALUES", 100)
    body = json.dumps(list(range(500))).encode()
    msg = run(enc.frame(103, opaque=8, body=body))
    assert "rocketmq.body_json" in keys(msg)
    assert "more than 100 values" in msg.diagnostics[keys(msg).index("rocketmq.body_json")].message


@pytest.mark.parametrize("serialize", [enc.SERIALIZE_JSON, enc.SERIALIZE_ROCKETMQ])
def test_ext_fields_past_the_limit_are_not_decoded(run: Run, monkeypatch: pytest.MonkeyPatch, serialize: int) -> None:
    monkeypatch.setattr(header, "MAX_ELEMENTS", 30)
    ext = {f"k{i}": "v" for i in range(100)}
    msg = run(enc.frame(34, opaque=9, ext=ext, serialize=serialize))
    assert keys(msg) == ["rocketmq.ext_limit"]
    assert len(root(msg, "ext_fields").children or []) == 30


def test_long_keys_are_not_kept_after_their_message(run: Run) -> None:
    # The names of wire keys are cached, and a key is data: 300 headers with a different 1 MB
    # key each kept 600 MB after their messages had gone.
    def decode(i: int) -> None:
        key = f"{i:04d}" + "longKey" * 30_000  # 210 KB
        msg = run(enc.frame(11, opaque=i, flag=2, ext={key: "1"}, serialize=enc.SERIALIZE_JSON))  # one-way
        name = root(msg, "ext_fields").children[0].name
        assert (name[:20], len(name)) == (f"{i:04d}long_keylong_key", 4 + 8 * 30_000)

    decode(0)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(1, 6):
            decode(i)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 200_000
    assert jfields.snake("brokerAddrs") == "broker_addrs"
