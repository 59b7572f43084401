"""Stream numbers against tshark's `tcp.stream` on every capture: each TCP packet's conversation,
the frames of each decoded message, and the packets `kdissect conversations` counts per stream
(one pipeline run and one tshark run a capture)."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from support import CAPTURES, SHARED_CAPTURES, sidecar_decode_as, sidecar_keylog

from kdissect.analysis.conversations import ConversationTable
from kdissect.capture.l2l4 import TcpSegment
from kdissect.capture.pcapfile import CaptureFile
from kdissect.dissect.base import Options
from kdissect.model import Message
from kdissect.pipeline import Decoding, Pipeline
from kdissect.protocols import DissectorRegistry
from kdissect.stream.flow import Conversation

PROTOCOLS = ("kafka", "zookeeper", "pulsar", "rocketmq", "tls")
OWN = sorted(p for p in CAPTURES.glob("*/*") if ".pcap" in p.name)
# The shared captures are listed when present; absent, one test says so and skips.
SHARED = sorted(p for d in PROTOCOLS if (SHARED_CAPTURES / d).is_dir()
                for p in (SHARED_CAPTURES / d).iterdir() if ".pcap" in p.name)
ALL = OWN + SHARED

needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")


def _id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


def tshark_streams(path: Path) -> dict[int, int]:
    """frame number -> tcp.stream, for the frames that have one."""
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number", "-e", "tcp.stream"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    rows = (line.split("\t") for line in out.splitlines())
    return {int(n): int(s) for n, s in rows if s}


def _run(path: Path) -> tuple[dict[int, int], list[Message], ConversationTable]:
    """Each TCP packet's stream, the messages and the conversations of one pipeline run."""
    table = ConversationTable()
    pipe = Pipeline(DissectorRegistry(decode_as=sidecar_decode_as(path, path.parent.name)),
                    Options(tls_keylog=sidecar_keylog(path)), observers=[table])
    streams: dict[int, int] = {}
    track = pipe.tcp.segment

    def numbered(seg: TcpSegment) -> Conversation[Decoding]:
        conv = track(seg)
        streams[seg.frame] = conv.index
        return conv

    pipe.tcp.segment = numbered  # type: ignore[method-assign]
    messages: list[Message] = []
    with CaptureFile(str(path)) as cap:
        for frame in cap:
            messages += pipe.feed(frame)
    messages += pipe.finish()
    return streams, messages, table


def test_the_shared_captures_are_there() -> None:
    if not SHARED:
        pytest.skip("../shared/captures is absent: the stream numbers are checked on the project's captures only")
    assert len(SHARED) > 50


@needs_tshark
@pytest.mark.parametrize("path", ALL, ids=_id)
def test_streams_are_tsharks(path: Path) -> None:
    theirs = tshark_streams(path)
    assert theirs, "tshark found no TCP"
    ours, messages, table = _run(path)
    assert ours == theirs  # every TCP packet
    for m in messages:
        assert {theirs[f] for f in m.frames} == {m.stream}, (m.frame, m.summary)
    # `kdissect conversations`: one row per stream, with all its packets (the last ACK too)
    rows = table.rows(filtered=False, empty=True)
    assert {r["stream"]: r["packets"] for r in rows} == dict(Counter(theirs.values()))
