"""Long texts in the JSON output: orjson reserves about eight bytes a character of a string before
writing it and, when that reservation fails, ends the process with a segmentation fault instead
of raising MemoryError. A document that may hold a text longer than jsonout.LONG_TEXT characters
is written by the standard library, byte for byte the same text."""

from __future__ import annotations

import json
import resource
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from pcapgen import Pkt, TcpConn, ethernet, kafka_request, write_pcap

from kdissect import accel
from kdissect.model import Field, Message, Pdu
from kdissect.render import jsonout


class CountingOrjson:
    """orjson with its calls to dumps counted."""

    def __init__(self) -> None:
        self.calls = 0
        if jsonout._orjson is None:  # imported with the first text encoded
            jsonout._load_orjson()
        self._orjson = jsonout._orjson

    def dumps(self, *args: Any, **kwargs: Any) -> bytes:
        self.calls += 1
        return self._orjson.dumps(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._orjson, name)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> CountingOrjson:
    c = CountingOrjson()
    monkeypatch.setattr(jsonout, "_orjson", c)
    return c


def stdlib(d: Any) -> bytes:
    return json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode()


def test_a_document_with_a_long_text_is_written_by_the_standard_library(counting: CountingOrjson) -> None:
    short = {"v": ["a" * jsonout.LONG_TEXT, 1]}
    assert jsonout.dumps_bytes(short) == stdlib(short) and counting.calls == 1
    for long in ({"v": ["a" * (jsonout.LONG_TEXT + 1), 1]}, {"k" * (jsonout.LONG_TEXT + 1): 0},
                 {"a": {"b": [[("é" * (jsonout.LONG_TEXT + 1),)]]}}):
        assert jsonout.dumps_bytes(long) == stdlib(long)
    assert counting.calls == 1


def test_a_message_that_may_hold_a_long_text_is_written_by_the_standard_library(counting: CountingOrjson) -> None:
    # The pure functions: the compiled message_json writes the text itself (its fall-back for
    # what it does not write is dumps_bytes, which searches the document).
    def message(data: bytes, inflated: bytes = b"", decompressed: int = 0) -> Message:
        m = Message(Pdu(data, [1], 0.0, 0.0, True), 0, "c", "s", "kafka")
        m.fields = [Field("undecoded", data, 0, len(data), hint="raw"), Field("inflated", inflated, -1, 0, hint="raw")]
        m.inflated = decompressed or len(inflated)
        return m

    with accel.pure_functions("kdissect.render.jsonout"):
        # Small, or large only in what it decompressed, which holds no long text: orjson.
        for m in (message(b"\x01" * 1000), message(b"\x01" * 1000, b"\x02" * 1000, jsonout.LONG_TEXT)):
            assert jsonout.message_json(m, 0) == stdlib(jsonout.message_dict(m, 0))
        assert counting.calls == 2
        # Its hex is past the limit, or the hex of what it decompressed is.
        for m in (message(b"\x01" * (jsonout.LONG_TEXT // 2 + 1)), message(b"\x01", b"\x02" * (jsonout.LONG_TEXT // 2 + 1))):
            assert jsonout.message_json(m, 0) == stdlib(jsonout.message_dict(m, 0))
            assert jsonout.export_json(m, 0, positions=True) == stdlib(jsonout.export_dict(m, 0, positions=True))
        assert counting.calls == 2


def legacy_gzip_produce(inflated: int) -> bytes:
    """A Produce v3 request whose one message is a gzip wrapper of `inflated` zeros (not an inner
    message set: the decompressed bytes are kept undecoded, as hex in the JSON)."""
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    z = co.compress(bytes(inflated)) + co.flush()
    body = bytes([1, 1]) + struct.pack(">qii", 0, -1, len(z)) + z
    msg = struct.pack(">I", zlib.crc32(body)) + body
    mset = struct.pack(">qi", 0, len(msg)) + msg
    produce = struct.pack(">hhiih", -1, 1, 30000, 1, 1) + b"t" + struct.pack(">iii", 1, 0, len(mset)) + mset
    return kafka_request(0, 3, 1, "p", produce)


def test_export_of_a_long_text_under_a_memory_limit_does_not_crash(tmp_path: Path) -> None:
    # 48 MiB of zeros in 49 KB: 96 million characters of hex, for which orjson reserved 800 MB
    # and crashed under a 1 GB address space (export --positions, compiled and pure alike).
    c = TcpConn()
    packets = c.handshake()
    req = legacy_gzip_produce(48 << 20)
    packets += [c.segment(True, req[i : i + 60000]) for i in range(0, len(req), 60000)]
    path = tmp_path / "long.pcap"
    write_pcap(str(path), [Pkt(1.0 + i / 1000, ethernet(p)) for i, p in enumerate(packets)])

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1_000_000_000, 1_000_000_000))

    for args in (["--positions"], []):
        p = subprocess.run([sys.executable, "-m", "kdissect", "export", "--format", "jsonl", *args, str(path)],
                           capture_output=True, preexec_fn=limit, timeout=120)
        assert p.returncode == 0, p.stderr.decode(errors="replace")[-500:]
        hexed = json.loads(p.stdout)["fields"]["topic_data"][0]["partition_data"][0]["records"][0]["records"][0]
        assert len(hexed) == 2 * (48 << 20) and set(hexed) == {"0"}
