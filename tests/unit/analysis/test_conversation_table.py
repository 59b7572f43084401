"""The conversations table keeps a conversation only while later packets may still count in it
(the tracker remembers it), and counts those that come."""

from __future__ import annotations

import gc

import pytest
from pcapgen import RST, TcpConn, ethernet

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
