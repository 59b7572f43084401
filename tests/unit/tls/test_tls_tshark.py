"""Differential check against tshark decrypting the same captures with the same key logs: every
Kafka message tshark finds inside TLS is one kdissect decrypts, in the same frame, with the same
length, API key, version, correlation id, client id, topics and request frame; and the
connections' TLS versions and cipher suites agree."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support import CAPTURES, sidecar_decode_as

from kdissect.dissect.base import Options
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry

pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
KAFKA = sorted(p for p in (CAPTURES / "tls").glob("kafka_*.pcap"))
FIELDS = ["frame.number", "kafka.len", "kafka.api_key", "kafka.api_version", "kafka.correlation_id",
          "kafka.client_id", "kafka.topic_name", "kafka.request_frame"]


def tshark(path: Path, port: int, fields: list[str], display: str) -> list[list[str]]:
    keys = path.with_suffix(".keys")
    cmd = ["tshark", "-r", str(path), "-o", f"tls.keylog_file:{keys}", "-d", f"tcp.port=={port},tls",
           "-d", f"tls.port=={port},kafka", "-Y", display, "-T", "fields", "-E", "occurrence=a"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


@pytest.mark.parametrize("path", KAFKA, ids=lambda p: p.name)
def test_same_messages_as_tshark(path: Path) -> None:
    port = json.loads(path.with_suffix(".json").read_text())["tls_port"]
    registry = DissectorRegistry(decode_as=sidecar_decode_as(path, "kafka"))
    ours = {m.frames[-1]: m for m in dissect_file(str(path), registry, Options(tls_keylog=str(path.with_suffix(".keys"))))
            if m.tls is not None}
    rows = tshark(path, port, FIELDS, f"kafka && tcp.port=={port}")
    assert len(rows) == len(ours)
    for frame, length, api, version, corr, client, topics, request_frame in rows:
        m = ours[int(frame)]
        assert int(length) == len(m.data) - 4
        assert int(corr) == m.info["corr"]
        if api:  # tshark leaves out what it could not match
            assert int(api) == m.info["op_code"]
        if version:
            assert int(version) == m.info["version"]
        if client:
            assert client == m.info["client_id"]
        if topics:
            assert set(topics.split(",")) <= set(m.info.get("topics") or [m.info.get("topic")])
        if request_frame:
            assert m.match is not None and m.match.frame == int(request_frame)


@pytest.mark.parametrize("path", KAFKA, ids=lambda p: p.name)
def test_same_tls_facts_as_tshark(path: Path) -> None:
    port = json.loads(path.with_suffix(".json").read_text())["tls_port"]
    hellos = tshark(path, port, ["tcp.stream", "tls.handshake.ciphersuite", "tls.handshake.extensions.supported_version",
                                 "tls.handshake.version", "tls.handshake.extensions_server_name"],
                    "tls.handshake.type == 2")
    registry = DissectorRegistry(decode_as=sidecar_decode_as(path, "kafka"))
    seen = {(m.tls.cipher, m.tls.version) for m in dissect_file(str(path), registry,
            Options(tls_keylog=str(path.with_suffix(".keys")))) if m.tls is not None}
    from kdissect.tls.suites import suite_name, version_name

    theirs = {(suite_name(int(suite, 16)), version_name(int(sv or v, 16))) for _s, suite, sv, v, _n in hellos}
    assert seen == theirs
