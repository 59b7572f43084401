"""The conversations table keeps a conversation only while later packets may still count in it
(the tracker remembers it), and counts those that come."""

from __future__ import annotations

import gc
import json
import struct
import tracemalloc
from typing import Any

import pytest
from pcapgen import RST, TcpConn, ethernet, kafka_request, kafka_response
from support import CAPTURES

from kdissect.analysis import conversations
from kdissect.analysis.conversations import ConversationTable
from kdissect.capture.pcapfile import RawFrame
from kdissect.pipeline import Pipeline
from kdissect.stream.flow import Conversation
from kdissect.stream.tracker import Tracker


def test_conversations_whose_counts_are_final_are_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A million conversations of a SYN each (70 MB) were a million Conversations kept to the
    end of `kdissect conversations` (1.9 GB for 400,000 of them)."""
    monkeypatch.setattr(conversations, "SETTLE_EVERY", 10)
    table = ConversationTable()
    table.settle_at = 10
    pipe = Pipeline(observers=[table])
    pipe.tcp = Tracker(pipe.tcp.upper, remembered=5)
    frames: list[bytes] = []
    first = TcpConn(cport=20000)
    frames += [first.segment(True, b"x"), first.segment(True, b"", RST)]
    for i in range(200):
        c = TcpConn(cport=30000 + i)
        frames += [c.segment(True, b"ab"), c.segment(False, b"", RST)]
        if i == 1:
            frames.append(first.segment(False, b"late"))  # after its end: still counts in it
    gc.collect()
    gc.disable()
    try:
        for n, p in enumerate(frames, 1):
            f = ethernet(p)
            pipe.feed(RawFrame(n, 100.0 + n, 1, f, len(f)))
        alive = sum(isinstance(o, Conversation) for o in gc.get_objects())
    finally:
        gc.enable()
    pipe.finish()
    assert alive < 40
    rows = table.rows(filtered=False, empty=True)
    assert len(rows) == 201
    assert (rows[0]["packets"], rows[0]["bytes_to_server"], rows[0]["bytes_to_client"]) == (3, 1, 4)
    assert all((r["packets"], r["bytes_to_server"], r["bytes_to_client"]) == (2, 2, 0) for r in rows[1:])


def test_conversations_json_is_written_a_row_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same text as json.dumps(rows, indent=1), never the whole list at once: json with an
    indent builds the document from small pieces (1.8 GB for 400,000 rows)."""
    from click.testing import CliRunner

    from kdissect.cli import cli
    from kdissect.commands import conversations as command

    largest: list[int] = []
    dumps = json.dumps

    def counted(obj: object, **kwargs: Any) -> str:
        largest.append(len(obj) if isinstance(obj, list) else 1)
        return dumps(obj, **kwargs)

    rows: list[dict[str, Any]] = [{"stream": i, "client": "a:1", "tls": {"sni": "s\n\"x\"", "d": [1, {}]}, "e": []}
                                  for i in range(3)]
    for n in (0, 1, 3):
        assert "".join(command.json_rows(rows[:n])) == json.dumps(rows[:n], indent=1)
    monkeypatch.setattr(command.json, "dumps", counted)
    res = CliRunner().invoke(cli, ["conversations", "-a", "-F", "json", str(CAPTURES / "zookeeper" / "zk_session.pcap")])
    assert res.exit_code == 0 and len(json.loads(res.output)) > 1 and max(largest) == 1


def test_a_streams_final_counts_are_kept_packed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each stream's row was a dict, and its message counts another object, to the end: 0.82 GB
    for 400,000 conversations of an ApiVersions request and response (now 0.25 GB), where the
    table printed is 67 MB. The rows are the same."""
    monkeypatch.setattr(conversations, "SETTLE_EVERY", 10)
    n = 2000
    frames: list[bytes] = []
    for i in range(n):
        c = TcpConn(client=f"10.0.{i // 250}.{1 + i % 250}", cport=30000 + i)
        frames += [*c.handshake(), c.segment(True, kafka_request(18, 0, 1)),
                   c.segment(False, kafka_response(1, struct.pack(">hhhhh", 0, 1, 18, 0, 3))),
                   c.fin(True), c.fin(False)]
    table = ConversationTable()
    table.settle_at = 10
    pipe = Pipeline(observers=[table])
    pipe.tcp = Tracker(pipe.tcp.upper, remembered=5)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for k, p in enumerate(frames, 1):
            f = ethernet(p)
            for m in pipe.feed(RawFrame(k, 100.0 + k / 1000, 1, f, len(f))):
                table.on_message(m, None)
        for m in pipe.finish():
            table.on_message(m, None)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held / n < 300
    rows = table.rows(filtered=False)
    assert len(rows) == n
    assert rows[7] == {
        "stream": 7, "client": "10.0.0.8:30007", "server": "10.0.0.2:9092", "protocol": "kafka", "packets": 7,
        "bytes_to_server": 18, "bytes_to_client": 18, "messages": 2, "tls": None, "matched_messages": 2,
        "requests": 1, "responses": 1, "errors": 0, "expected": 0, "message_bytes": 36, "first_ts": 100.053,
        "duration_s": 0.001}


def test_a_message_of_a_packed_stream_counts_in_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream packed once its counts were final is made a row again by a message that still
    comes for it, and counts it."""
    monkeypatch.setattr(conversations, "SETTLE_EVERY", 5)
    table = ConversationTable()
    table.settle_at = 5
    pipe = Pipeline(observers=[table])
    pipe.tcp = Tracker(pipe.tcp.upper, remembered=2)
    messages = []
    for i in range(30):
        c = TcpConn(client=f"10.0.1.{1 + i}", cport=30000 + i)
        for p in [*c.handshake(), c.segment(True, kafka_request(18, 0, 1)),
                  c.segment(False, kafka_response(1, struct.pack(">hhhhh", 0, 1, 18, 0, 3))), c.fin(True),
                  c.fin(False)]:
            f = ethernet(p)
            for m in pipe.feed(RawFrame(len(messages) + 1, 100.0 + i, 1, f, len(f))):
                messages.append(m)
                table.on_message(m, None)
    assert 0 in table.final
    table.on_message(messages[0], None)  # stream 0's request again
    pipe.finish()
    rows = table.rows(filtered=False)
    assert [(r["stream"], r["matched_messages"], r["requests"]) for r in rows[:2]] == [(0, 3, 2), (1, 2, 1)]
    assert rows[0]["packets"] == 7 and rows[0]["client"] == "10.0.1.1:30000"
