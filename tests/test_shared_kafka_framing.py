"""Every shared Kafka capture frames without a framing error, every response finds its request
(except in captures named here), and every message is Kafka."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import SHARED, shared_captures, sidecar_decode_as

from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry

FRAMING_KEYS = {"framing.bad_length", "framing.resync", "tcp.gap", "tcp.incomplete", "tcp.overlap"}
# Captures whose responses cannot be matched, and why (see docs/kafka.md):
UNMATCHED_BY_DESIGN = {
    # The broker's answer echoes a request header: its correlation id is not the request's.
    "ajbanjara__Wireshark__kafka-testcases-v4__controlled-shutdown.pcapng",
    # Requests with API key 10000 and ControlledShutdown v1000 are answered by a broker that
    # closes or answers with bytes no request matches.
    "ajbanjara__Wireshark__kafka-testcases-v4__unsupported-version.pcapng",
    # The request was deliberately cut from the capture.
    "ajbanjara__Wireshark__kafka-testcases-v4__request-missing.pcapng",
}


def _captures() -> list[Path]:
    d = SHARED / "captures" / "kafka"
    return sorted(p for p in d.iterdir() if ".pcap" in p.name) if d.is_dir() else []


@pytest.mark.parametrize("path", _captures(), ids=lambda p: p.name)
def test_shared_kafka_capture_frames_cleanly(path: Path) -> None:
    shared_captures("kafka")
    registry = DissectorRegistry(decode_as=sidecar_decode_as(path, "kafka"))
    msgs = list(dissect_file(str(path), registry))
    assert msgs, "no Kafka message found"
    assert {m.protocol for m in msgs} == {"kafka"}
    framing = [(m.frame, d.key) for m in msgs for d in m.diagnostics if d.key in FRAMING_KEYS]
    assert framing == []
    if path.name not in UNMATCHED_BY_DESIGN:
        assert [m.frame for m in msgs if m.kind == "response" and m.match is None] == []
