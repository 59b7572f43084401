"""How values read in the text tree (-V): hex for CRCs, magic numbers, zxids and flags, units on
durations, named acks, "1 byte", and true/false/null; on hand-made fields and on real captures."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from support import CAPTURES, sidecar_decode_as

from kdissect.cli import cli
from kdissect.model import DURATION_MS, DURATION_S, ENUM, FLAGS, HEX, RAW, Field, duration_hint
from kdissect.render.text import hex_text, tree_lines, value_text
from kdissect.text import value_word


@pytest.mark.parametrize(("value", "size", "text"), [
    (0x1A2B3C4D, 4, "0x1a2b3c4d"),
    (0x10, 2, "0x0010"),
    (0, 1, "0x00"),
    (0x100000003, 8, "0x100000003"),  # 64 bits: no leading zeros, as ZooKeeper writes zxids
    (0x10000A1B2C30000, 8, "0x10000a1b2c30000"),
    (-1, 8, "0xffffffffffffffff"),
    (-1, 4, "0xffffffff"),
    (-2, 0, "0xfffffffffffffffe"),  # no known width: 64 bits
    (0x1F2, 3, "0x1f2"),  # not a fixed width (a varint): not padded
])
def test_hex_text(value: int, size: int, text: str) -> None:
    assert hex_text(value, size) == text


def test_integers_by_hint() -> None:
    assert value_text(Field("crc", 0x0E01, 0, 2, hint=HEX), 0) == "0x0e01"
    assert value_text(Field("attributes", 16, 0, 2, hint=FLAGS, display="transactional"), 0) == \
        "0x0010 (transactional)"
    assert value_text(Field("attributes", 0, 0, 2, hint=FLAGS, display="none"), 0) == "0x0000"
    assert value_text(Field("acks", -1, 0, 2, hint=ENUM, display="all"), 0) == "all (-1)"
    assert value_text(Field("timeout_ms", 30000, 0, 4, hint=DURATION_MS), 0) == "30000 ms"
    assert value_text(Field("rollback_sec", 5, hint=DURATION_S), 0) == "5 s"
    assert value_text(Field("count", 7), 0) == "7"


def test_true_false_null_and_strings() -> None:
    assert value_text(Field("watch", True), 0) == "true"
    assert value_text(Field("read_only", False), 0) == "false"
    assert value_text(Field("error_message", None), 0) == "null"
    assert value_text(Field("watch", True, hint=DURATION_MS), 0) == "true"  # a bool is no number
    assert value_text(Field("topic", "t1"), 0) == "'t1'"
    assert [value_word(v) for v in (None, True, False, 0, "x")] == ["null", "true", "false", "0", "x"]


def test_byte_counts_singular_and_plural() -> None:
    assert value_text(Field("v", b"a", hint=None), 0) == "'a' [1 byte]"
    assert value_text(Field("v", b"\x00\x01", hint=RAW), 0) == "00 01 [2 bytes]"
    assert value_text(Field("v", b"abc"), 2) == "'ab' …(+1 byte) [3 bytes]"
    assert value_text(Field("v", b"abcd"), 2) == "'ab' …(+2 bytes) [4 bytes]"


def test_long_strings_and_names_are_cut_as_bytes_are() -> None:
    # A string was shown whole: a ZooKeeper path, a RocketMQ remark or a four-letter-word reply
    # of 4 MB was a line of 4 MB in read -V (its default --max-bytes is 256).
    assert value_text(Field("path", "/" + "p" * 4_000_000), 256) == repr("/" + "p" * 255) + " …(+3999745 characters)"
    assert value_text(Field("path", "/ab"), 2) == "'/a' …(+1 character)"
    assert value_text(Field("path", "/ab"), 3) == "'/ab'"
    assert value_text(Field("path", "/ab"), 0) == "'/ab'"
    key = "K" * 1000
    assert tree_lines([Field("k", 1, label=key)], 8) == ["    KKKKKKKK…: 1"]
    assert tree_lines([Field("k", 1, label=key)], 0) == [f"    {key}: 1"]


def test_tree_lines_use_the_value_forms() -> None:
    fields = [Field("done", False), Field("tags", None, children=[Field("", True), Field("", None)], hint="array")]
    assert tree_lines(fields, 0) == ["    done: false", "    tags [2]", "        [0] true", "        [1] null"]


def test_duration_hint_from_names() -> None:
    assert duration_hint("session_timeout_ms") == DURATION_MS
    assert duration_hint("suspend_timeout_millis") == DURATION_MS
    assert duration_hint("start_message_rollback_duration_sec") == DURATION_S
    assert duration_hint("max_bytes") is None
    assert duration_hint("items") is None


def _read(path: Path, proto: str) -> list[str]:
    args = ["read", "-V", "--no-color", str(path)]
    for port, name in sidecar_decode_as(path, proto).items():
        args += ["--decode-as", f"{port}={name}"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return [line.strip() for line in result.output.splitlines()]


def test_kafka_produce_and_record_batch_lines() -> None:
    lines = _read(CAPTURES / "kafka" / "mock_ck_transactions.pcap", "kafka")
    for line in ("acks: all (-1)", "timeout_ms: 30000 ms", "crc: 0x209c660e",
                 "attributes: 0x0010 (transactional)", "throttle_time_ms: 0 ms", "magic: 2"):
        assert line in lines, line
    assert not any(line.startswith("crc: ") and "0x" not in line for line in lines)


def test_zookeeper_session_lines() -> None:
    lines = _read(CAPTURES / "zookeeper" / "zk_session.pcap", "zookeeper")
    for line in ("time_out: 4000 ms", "session_id: 0x100000b18980000", "last_zxid_seen: 0x0", "read_only: false"):
        assert line in lines, line
    zxids = [line for line in lines if line.startswith("zxid: ")]
    assert zxids and all(line.startswith("zxid: 0x") for line in zxids)


def test_pulsar_magic_and_checksum_lines() -> None:
    lines = _read(CAPTURES / "pulsar" / "gen__pulsar_codecs_batches.pcap", "pulsar")
    assert "magic: 0x0e01" in lines
    checksums = [line for line in lines if line.startswith("checksum: ")]
    assert checksums and all(len(line) == len("checksum: 0x12345678") for line in checksums)


def test_rocketmq_flag_lines() -> None:
    lines = _read(CAPTURES / "rocketmq" / "gen_cpp_produce_pull.pcap", "rocketmq")
    assert "flag: 0x01 (RESPONSE)" in lines
    assert any(line.startswith("suspendTimeoutMillis: ") and line.endswith(" ms") for line in lines)


@pytest.mark.parametrize("path", sorted(CAPTURES.glob("*/*.pcap")), ids=lambda p: p.name)
def test_no_python_reprs_or_one_bytes(path: Path) -> None:
    text = "\n".join(_read(path, path.parent.name))
    for word in (": True", ": False", ": None", "] True", "] False", "] None", "=None", "=True", "=False",
                 " 1 bytes", "(+1 bytes)", "[1 bytes]"):
        assert word not in text, f"{path.name}: {word!r}"
