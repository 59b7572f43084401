"""`kdissect export --positions` (docs/json.md, kdissect/render/positions.py): each message's
`positions` mirrors its `fields` with the [offset, length] of every field in the message's bytes.

On every capture under captures/: the shape mirrors `fields` exactly, spans nest inside their
struct's and array's spans, every field position the decoder knows is given, and the bytes at
each Kafka and ZooKeeper position decode to the field's value (Pulsar and RocketMQ: the text of
each string is in its bytes). Synthetic trees for what no capture shows: repeated names, unknown
positions, a data key spelled like the reserved one, positions outside the message. The command
line: -T json and -T jsonl agree, the compiled and pure paths write the same bytes, and the
default output has no `positions`.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support import CAPTURES, capture_args, sidecar_decode_as, sidecar_keylog

from kdissect.cli import cli
from kdissect.dissect.base import Options
from kdissect.errors import UsageError
from kdissect.model import ARRAY, BYTES, ENUM, RAW, SECRET, STRUCT, Field, Message, Pdu, Row
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry
from kdissect.render.jsonout import export_dict, message_dict
from kdissect.render.positions import ARRAY_SPAN, SPAN, message_positions

PROTOCOLS = ("kafka", "zookeeper", "pulsar", "rocketmq")
Span = tuple[int, int]


def _captures() -> list[Path]:
    return sorted(p for p in CAPTURES.rglob("*") if ".pcap" in p.name and p.is_file())


def _decode(path: Path) -> list[Message]:
    registry = DissectorRegistry(decode_as=sidecar_decode_as(path, path.parent.name))
    return list(dissect_file(str(path), registry, Options(tls_keylog=sidecar_keylog(path))))


@cache
def exported(path: Path) -> list[tuple[Message, dict[str, Any]]]:
    """The messages of a capture with their export (positions computed before any tree walk)."""
    return [(m, export_dict(m, 256, True)) for m in _decode(path)]


def is_span(p: Any) -> bool:
    return type(p) is list and len(p) == 2 and all(type(x) is int for x in p)


# ---------------------------------------------------------------------------------------------
# Shape, bounds, nesting


def check_mirror(fv: Any, pv: Any, size: int, where: str) -> None:
    """pv, a positions value, mirrors fv, the fields value at the same place."""
    if is_span(pv) and not isinstance(fv, dict):
        o, n = pv
        assert o >= 0 and n >= 0 and o + n <= size, f"{where}: {pv} outside the message's {size} bytes"
        return
    if isinstance(pv, dict):
        assert isinstance(fv, dict), f"{where}: an object where fields has {fv!r}"
        assert pv, f"{where}: an empty object is left out"
        for k, p in pv.items():
            if k == SPAN or (k.endswith(ARRAY_SPAN) and k not in fv):
                if k != SPAN:
                    assert isinstance(fv.get(k[:-len(ARRAY_SPAN)]), list), f"{where}.{k}: no array"
                assert is_span(p), f"{where}.{k}: {p!r}"
                check_mirror(None, p, size, f"{where}.{k}")
            else:
                assert k in fv, f"{where}.{k}: not a key of fields"
                check_mirror(fv[k], p, size, f"{where}.{k}")
        return
    assert type(pv) is list and isinstance(fv, list), f"{where}: {pv!r} for {fv!r}"
    assert len(pv) == len(fv), f"{where}: {len(pv)} positions for {len(fv)} elements"
    assert any(p is not None for p in pv), f"{where}: an array with nothing known is left out"
    for i, (f, p) in enumerate(zip(fv, pv, strict=True)):
        if p is not None:
            check_mirror(f, p, size, f"{where}[{i}]")


def spans_below(pv: Any) -> Iterator[Span]:
    """Every span in a positions value, its own included."""
    if is_span(pv):
        yield (pv[0], pv[1])
    elif isinstance(pv, dict):
        for p in pv.values():
            yield from spans_below(p)
    elif isinstance(pv, list):
        for p in pv:
            if p is not None:
                yield from spans_below(p)


def within(inner: Span, outer: Span) -> bool:
    return outer[0] <= inner[0] and inner[0] + inner[1] <= outer[0] + outer[1]


def check_nesting(pv: Any, where: str) -> int:
    """Spans lie within their struct's `_span` and their array's `<key>._span`; how many
    containers had a span."""
    if not isinstance(pv, (dict, list)) or is_span(pv):
        return 0
    items = list(pv.items()) if isinstance(pv, dict) else list(enumerate(pv))
    checked = 0
    own = pv.get(SPAN) if isinstance(pv, dict) else None
    if own is not None:
        checked += 1
        bad = [s for k, p in items if k != SPAN for s in spans_below(p) if not within(s, tuple(own))]
        assert not bad, f"{where}: {bad[:3]} outside the struct's {own}"
    for k, p in items:
        arr = pv.get(f"{k}{ARRAY_SPAN}") if isinstance(pv, dict) and isinstance(p, list) and not is_span(p) else None
        if arr is not None:
            checked += 1
            bad = [s for s in spans_below(p) if not within(s, tuple(arr))]
            assert not bad, f"{where}.{k}: {bad[:3]} outside the array's {arr}"
        checked += check_nesting(p, f"{where}.{k}")
    return checked


@pytest.mark.parametrize("path", _captures(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_positions_mirror_fields_and_nest(path: Path) -> None:
    msgs = exported(path)
    assert msgs
    containers = 0
    for m, d in msgs:
        where = f"{path.name} #{m.frame}"
        check_mirror(d["fields"], d["positions"], len(m.data), where)
        containers += check_nesting(d["positions"], where)
        # the message's first field starts at offset 0: its length prefix
        assert d["positions"], f"{where}: no positions"
        assert min(s[0] for s in spans_below(d["positions"])) == 0, where
    assert containers > 0 or all(not isinstance(p, dict) for _, d in msgs for p in d["positions"].values())


def test_a_control_record_spans_its_value() -> None:
    """The control struct covers the key, the value's length varint and the value."""
    d = next(d for m, d in exported(CAPTURES / "kafka" / "mock_ck_transactions.pcap") if m.frame == 130)
    control = d["positions"]["responses"][0]["partitions"][0]["records"][0]["records"][0]["control"]
    assert control["coordinator_epoch"] == [146, 4]
    assert within((146, 4), tuple(control[SPAN]))


def known_spans(fields: list[Field], size: int) -> Iterator[tuple[str, Span]]:
    """(name, span) of every scalar field the decoder placed in the message (Rows' child Fields
    built as it goes)."""
    for f in fields:
        if f.hint in (STRUCT, ARRAY) or f.children:
            yield from known_spans(f.children or [], size)
        elif f.offset >= 0:
            assert f.offset + f.length <= size, f"{f.name}: ({f.offset}, {f.length}) past {size} bytes"
            yield f.name, (f.offset, f.length)


def leaf_spans(pv: Any) -> Iterator[Span]:
    """The spans of scalars in a positions value (not structs' or arrays' own)."""
    if is_span(pv):
        yield (pv[0], pv[1])
    elif isinstance(pv, dict):
        for k, p in pv.items():
            if k != SPAN and not (k.endswith(ARRAY_SPAN) and is_span(p)):
                yield from leaf_spans(p)
    elif isinstance(pv, list):
        for p in pv:
            if p is not None:
                yield from leaf_spans(p)


@pytest.mark.parametrize("path", _captures(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_known_field_position_is_given(path: Path) -> None:
    for m, d in exported(path):
        known = {s for _, s in known_spans(m.fields, len(m.data))}
        assert set(leaf_spans(d["positions"])) == known, f"{path.name} #{m.frame}"


def test_every_protocol_has_struct_and_array_positions() -> None:
    structs, arrays = set(), set()
    for path in _captures():
        for m, d in exported(path):
            text = json.dumps(d["positions"])
            if f'"{SPAN}":' in text:
                structs.add(m.protocol)
            if f'{ARRAY_SPAN}":' in text:
                arrays.add(m.protocol)
    assert structs == arrays == set(PROTOCOLS)


# ---------------------------------------------------------------------------------------------
# The bytes at each position


def uvarint(b: bytes, i: int = 0) -> tuple[int, int] | None:
    """An unsigned varint at b[i:]: (value, end), or None."""
    v = shift = 0
    while i < len(b):
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return v, i
    return None


def zigzag(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def int_at(b: bytes, v: int) -> bool:
    """b encodes v: a big-endian integer of its length, a (zigzag) varint, or decimal text."""
    if type(v) is bool:
        return b == bytes([v])
    if len(b) in (1, 2, 4, 8) and v in (int.from_bytes(b, "big", signed=True), int.from_bytes(b, "big")):
        return True
    var = uvarint(b)
    if var is not None and var[1] == len(b) and v in (var[0], zigzag(var[0])):
        return True
    return b == str(v).encode()


# Length prefixes of strings and byte strings: (size, how the length is stored).
def prefixed_lengths(b: bytes) -> Iterator[tuple[int, int]]:
    """(length, prefix size) for each reading of b's start as a length prefix."""
    if len(b) >= 2:
        yield int.from_bytes(b[:2], "big"), 2
    if len(b) >= 4:
        yield int.from_bytes(b[:4], "big"), 4
    var = uvarint(b)
    if var is not None:
        yield var[0] - 1, var[1]  # Kafka's compact strings: length + 1
        yield zigzag(var[0]), var[1]  # record keys, values and header names


def bytes_at(b: bytes, v: bytes) -> bool:
    """b is v, or v after its length prefix (and the tag buffer a flexible header puts after the
    client id: one empty byte)."""
    if b == v:
        return True
    return any(n == len(v) and b[k:k + n] == v and b[k + n:] in (b"", b"\x00") for n, k in prefixed_lengths(b))


def uuid_at(b: bytes, v: str) -> bool:
    return len(b) == 16 and b.hex() == v.replace("-", "")


# Fields whose value is not the bytes at their position: a record's offset and timestamp are the
# batch's base plus the delta there; a SASL step is named after the exchange it covers.
DERIVED = {("kafka", "offset"), ("kafka", "timestamp"), ("kafka", "step")}


def value_at(proto: str, name: str, f: Field, b: bytes) -> bool | None:
    """Whether the bytes b at f's position decode to f's value (None: not checkable)."""
    v = f.value
    if f.hint == SECRET or (proto, name) in DERIVED:
        return None
    if isinstance(v, int):
        return int_at(b, v)
    if isinstance(v, str):
        return bytes_at(b, v.encode()) or uuid_at(b, v)
    if isinstance(v, bytes):
        return bytes_at(b, v)
    return None


KAFKA_ZK = [p for p in _captures() if p.parent.name in ("kafka", "zookeeper", "tls")]


@cache
def value_checks(path: Path) -> tuple[dict[str, int], list[tuple[Any, ...]]]:
    """How many positions of each protocol and value type were checked, and those whose bytes
    do not hold their field's value."""
    checked: dict[str, int] = {}
    wrong = []
    for m, _ in exported(path):
        for name, (o, n) in known_spans(m.fields, len(m.data)):
            f = _leaf(m.fields, name, o, n)
            ok = value_at(m.protocol, name, f, m.data[o:o + n])
            if ok is None:
                continue
            key = f"{m.protocol} {type(f.value).__name__}"
            checked[key] = checked.get(key, 0) + 1
            if not ok:
                wrong.append((m.frame, name, f.value, o, n, m.data[o:o + n].hex()))
    return checked, wrong


@pytest.mark.parametrize("path", KAFKA_ZK, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_kafka_and_zookeeper_positions_hold_the_values(path: Path) -> None:
    checked, wrong = value_checks(path)
    assert not wrong, f"{len(wrong)} positions do not hold their value: {wrong[:5]}"
    assert sum(checked.values()) > 0


def test_kafka_and_zookeeper_ints_strings_and_bytes_were_checked() -> None:
    total: dict[str, int] = {}
    for path in KAFKA_ZK:
        for key, n in value_checks(path)[0].items():
            total[key] = total.get(key, 0) + n
    for proto in ("kafka", "zookeeper"):
        assert all(total.get(f"{proto} {t}", 0) >= 20 for t in ("int", "str", "bytes", "bool")), total


def _leaf(fields: list[Field], name: str, offset: int, length: int) -> Field:
    """The scalar field of that name at that span."""
    stack = list(fields)
    while stack:
        f = stack.pop()
        if f.name == name and f.offset == offset and f.length == length and not f.children:
            return f
        stack.extend(f.children or ())
    raise AssertionError(f"no field {name} at ({offset}, {length})")


def test_kafka_request_header_positions() -> None:
    # ApiVersions v3: a 4-byte length, then the header: api_key, api_version, correlation_id,
    # client_id (int16 length and "kd-gen"), and the header's empty tag buffer, in the header's
    # span but not in client_id's.
    m, d = exported(CAPTURES / "kafka" / "mock_ck_transactions.pcap")[0]
    p = d["positions"]
    assert p["length"] == [0, 4] and m.data[:4] == (len(m.data) - 4).to_bytes(4, "big")
    assert p["header"] == {SPAN: [4, 17], "api_key": [4, 2], "api_version": [6, 2], "correlation_id": [8, 4],
                           "client_id": [12, 8]}
    assert m.data[12:20] == b"\x00\x06kd-gen" and m.data[20:21] == b"\x00"
    assert p["client_software_name"] == [21, 23]
    assert m.data[22:44] == b"confluent-kafka-python"


def test_kafka_array_positions() -> None:
    # ApiVersions v0 response: the api_keys array (an int32 count, then six bytes per entry).
    m, d = exported(CAPTURES / "kafka" / "mock_ck_transactions.pcap")[3]
    p = d["positions"]
    entries = d["fields"]["api_keys"]
    assert p[f"api_keys{ARRAY_SPAN}"] == [10, 4 + 6 * len(entries)]
    assert int.from_bytes(m.data[10:14], "big") == len(entries)
    assert p["api_keys"][1] == {SPAN: [20, 6], "api_key": [20, 2], "min_version": [22, 2], "max_version": [24, 2]}
    assert int.from_bytes(m.data[20:22], "big") == entries[1]["api_key"] == 1


def test_zookeeper_positions() -> None:
    msgs = exported(CAPTURES / "zookeeper" / "zk_session.pcap")
    m, d = next((m, d) for m, d in msgs if m.info.get("op") == "exists" and m.kind == "request")
    p, f = d["positions"], d["fields"]
    assert p == {"length": [0, 4], "xid": [4, 4], "opcode": [8, 4], "path": [12, 5], "watch": [17, 1]}
    assert m.data[12:17] == b"\x00\x00\x00\x01/" and f["path"] == "/"
    # a redacted password: its position is that of the masked bytes
    m, d = next((m, d) for m, d in msgs if m.kind == "response" and "passwd" in d["fields"])
    assert d["fields"]["passwd"].startswith("<redacted") and d["positions"]["passwd"] == [24, 16]


def text_in(f: Field, b: bytes) -> bool | None:
    """A string's text is in its bytes (Pulsar: after a protobuf key and length; RocketMQ: a
    JSON or binary header's value); an address of a stored message is its IPv4 and port."""
    v = f.value
    if not isinstance(v, str) or f.hint in (SECRET, ENUM):
        return None
    if f.name in ("born_host", "store_host"):
        host, port = v.rsplit(":", 1)
        return b == ipaddress.IPv4Address(host).packed + int(port).to_bytes(4, "big")
    if f.name == "checksum_status":  # the verdict on the CRC at that position
        return None
    return v.encode() in b


@pytest.mark.parametrize("path", [p for p in _captures() if p.parent.name in ("pulsar", "rocketmq")],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_pulsar_and_rocketmq_strings_are_in_their_bytes(path: Path) -> None:
    checked, wrong = 0, []
    for m, _ in exported(path):
        for f in _scalars(m.fields, inside_batch=False):
            ok = text_in(f, m.data[f.offset:f.offset + f.length])
            checked += ok is not None
            if ok is False:
                wrong.append((m.frame, f.name, f.value, f.offset, f.length))
    assert checked > 0
    assert not wrong, wrong[:5]


def _scalars(fields: list[Field], inside_batch: bool) -> Iterator[Field]:
    """Scalars with a position, outside Pulsar batches (whose messages may come from a compressed
    payload: each has the payload's span)."""
    for f in fields:
        if f.hint in (STRUCT, ARRAY) or f.children:
            yield from _scalars(f.children or [], inside_batch or f.name == "messages")
        elif f.offset >= 0 and not inside_batch:
            yield f


def test_pulsar_command_positions() -> None:
    m, d = exported(CAPTURES / "pulsar" / "gen__pulsar_codecs_batches.pcap")[0]
    p = d["positions"]
    assert p["total_size"] == [0, 4] and p["command_size"] == [4, 4]
    assert p["connect"][SPAN] == [10, 35]
    o, n = p["connect"]["client_version"]
    assert m.data[o:o + n] == b"\x0a\x11Pulsar-CPP-v4.2.0"


# ---------------------------------------------------------------------------------------------
# Synthetic trees


def message(fields: list[Field], size: int = 64) -> Message:
    m = Message(Pdu(bytes(size), [1], 0.0, 0.0, True), 0, "a:1", "b:2", "kafka")
    m.fields = fields
    return m


def test_unknown_positions_are_left_out_and_arrays_keep_their_length() -> None:
    tree = [
        Field("a", 1, 0, 4),
        Field("b", 2),  # no position
        Field("s", None, -1, 0, [Field("x", 1)], STRUCT),  # nothing known inside
        Field("arr", None, 4, 9, [Field("e", 1), Field("e", 2, 8, 4)], ARRAY),
        Field("none", None, -1, 0, [Field("e", 1)], ARRAY),
        Field("empty", None, 13, 1, [], ARRAY),
    ]
    want = {"a": [0, 4], "arr": [None, [8, 4]], f"arr{ARRAY_SPAN}": [4, 9], f"empty{ARRAY_SPAN}": [13, 1]}
    assert message_positions(message(tree)) == want


def test_positions_outside_the_message_or_of_the_wrong_type_are_unknown() -> None:
    tree = [Field("past", 1, 60, 8), Field("neg", 1, 2, -1), Field("text", 1, "3", 1),  # type: ignore[arg-type]
            Field("flag", 1, True, 1),
            Field("ok", 1, 60, 4)]
    assert message_positions(message(tree)) == {"ok": [60, 4]}


def test_repeated_names_are_one_array_as_in_fields() -> None:
    tree = [Field("tag", b"\x01", 0, 2, hint=RAW), Field("tag", b"\x02", hint=RAW), Field("tag", b"\x03", 4, 2, hint=RAW),
            Field("arr", None, 6, 4, [Field("", 1, 6, 4)], ARRAY), Field("arr", None, 10, 4, [Field("", 2, 10, 4)], ARRAY)]
    m = message(tree)
    fields = message_dict(m, 0)["fields"]
    assert fields["tag"] == ["01", "02", "03"] and fields["arr"] == [[1], [2]]
    # the span of an array is left out when its name holds several fields
    assert message_positions(m) == {"tag": [[0, 2], None, [4, 2]], "arr": [[[6, 4]], [[10, 4]]]}


def test_a_scalar_with_sub_fields_gives_its_own_span_as_value() -> None:
    flags = Field("attributes", 5, 4, 2, [Field("compression", 1, 4, 2, hint=ENUM, display="gzip")], "flags", "gzip")
    m = message([flags])
    assert message_dict(m, 0)["fields"]["attributes"] == {"compression": 1, "compression_name": "gzip", "value": 5}
    assert message_positions(m) == {"attributes": {"compression": [4, 2], "value": [4, 2]}}


def test_a_data_key_spelled_like_a_reserved_key_wins() -> None:
    props = Field("properties", None, 0, 20, [Field(SPAN, "v", 2, 3), Field(f"k{ARRAY_SPAN}", "w", 5, 3),
                                              Field("k", None, 8, 4, [Field("", 1, 8, 4)], ARRAY)], STRUCT)
    assert message_positions(message([props])) == {"properties": {SPAN: [2, 3], f"k{ARRAY_SPAN}": [5, 3],
                                                                  "k": [[8, 4]]}}


def test_rows_give_the_same_positions_before_and_after_their_fields_exist() -> None:
    inner = Field("headers", None, 30, 6, [Field("", b"h", 31, 1, hint=BYTES)], ARRAY)
    row = Row("record", (("key", BYTES), ("value", BYTES), ("headers", ARRAY)), (b"k", None, inner),
              (10, 1, 12, 0, 30, 6), 8, 30)
    m = message([row])
    want = {"record": {SPAN: [8, 30], "key": [10, 1], "value": [12, 0], "headers": [[31, 1]],
                       f"headers{ARRAY_SPAN}": [30, 6]}}
    assert message_positions(m) == want
    assert row.children  # builds the child Fields
    got = message_positions(m)
    assert got["record"] == {SPAN: [8, 30], "key": [10, 1], "value": [12, 0], "headers": [[31, 1]],
                             f"headers{ARRAY_SPAN}": [30, 6]}


def test_real_rows_give_the_same_positions_once_walked() -> None:
    path = CAPTURES / "kafka" / "mock_ck_large_values.pcap"
    fresh = _decode(path)
    before = [message_positions(m) for m in fresh]
    for m in fresh:
        list(known_spans(m.fields, len(m.data)))  # builds every Row's child Fields
    assert [message_positions(m) for m in fresh] == before
    assert any('"records"' in json.dumps(p) for p in before)


# ---------------------------------------------------------------------------------------------
# The command line


def run_export(path: Path, *args: str) -> bytes:
    r = CliRunner().invoke(cli, ["export", str(path), *capture_args(path), *args])
    assert r.exit_code == 0, r.output
    return r.stdout_bytes


ONE_PER_PROTOCOL = [CAPTURES / "kafka" / "mock_ck_transactions.pcap", CAPTURES / "zookeeper" / "zk_session.pcap",
                    CAPTURES / "pulsar" / "gen__pulsar_codecs_batches.pcap",
                    CAPTURES / "rocketmq" / "gen_encoder_binary.pcap"]


@pytest.mark.parametrize("path", ONE_PER_PROTOCOL, ids=lambda p: p.parent.name)
def test_json_and_jsonl_carry_the_same_positions(path: Path) -> None:
    lines = [json.loads(x) for x in run_export(path, "--positions", "-T", "jsonl").splitlines()]
    array = json.loads(run_export(path, "--positions", "-T", "json"))
    assert lines == array and lines
    assert all("positions" in d for d in lines)
    assert [d["positions"] for d in lines] == [d["positions"] for _, d in exported(path)]
    plain = [json.loads(x) for x in run_export(path, "-T", "jsonl").splitlines()]
    assert all("positions" not in d for d in plain)
    assert plain == [{k: v for k, v in d.items() if k != "positions"} for d in lines]


def test_positions_do_not_go_with_field_values() -> None:
    path = ONE_PER_PROTOCOL[0]
    r = CliRunner().invoke(cli, ["export", str(path), "--positions", "-T", "fields", "-e", "kafka.header.api_key"])
    assert isinstance(r.exception, UsageError) and str(r.exception) == "--positions goes with --format json or jsonl"


def _export_in_subprocess(pure: bool, path: Path) -> bytes:
    env = {**os.environ, "KDISSECT_PURE": "1" if pure else "0"}
    cmd = [sys.executable, "-m", "kdissect", "export", str(path), *capture_args(path), "--positions", "-T", "jsonl"]
    r = subprocess.run(cmd, env=env, capture_output=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


@pytest.mark.parametrize("path", ONE_PER_PROTOCOL, ids=lambda p: p.parent.name)
def test_pure_and_compiled_paths_write_the_same_positions(path: Path) -> None:
    pure = _export_in_subprocess(True, path)
    assert pure.count(b'"positions":') == len(exported(path))
    assert _export_in_subprocess(False, path) == pure
