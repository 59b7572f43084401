"""Display filters on real captures, checked against the JSON export.

The reference is an independent resolver over `export` output (message_dict): for every key seen
in a capture's JSON and its first value, `key == value` and `key` (existence) must select exactly
the messages whose JSON has that value / that key.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support import SHARED_CAPTURES

from kdissect.cli import cli
from kdissect.filter import FilterError, compile_filter
from kdissect.filter.nodes import STRING_LIT, Literal
from kdissect.filter.printer import literal_text
from kdissect.model import ARRAY, RAW, Field
from kdissect.pipeline import dissect_file
from kdissect.render.jsonout import message_dict

CAPTURES = SHARED_CAPTURES
PRESENT = object()
SAMPLES = [
    "kafka/gen__mock_ck_produce_basic.pcap",
    "kafka/gen__mock_ck_errors.pcap",
    "kafka/gen__mock_kp_api_0_8_2.pcap",
    "zookeeper/gen__zk_kazoo_errors.pcap",
    "zookeeper/gen__zk_kazoo_multi.pcap",
    "pulsar/gen__pulsar_py_produce_consume.pcap",
    "rocketmq/deepflowio__deepflow__rocketmq-send-message-v2.pcap",
]


def capture(rel: str) -> Path:
    p = CAPTURES / rel
    if not p.exists():
        pytest.skip(f"{p} not available")
    return p


def flatten(v: Any) -> Iterator[Any]:
    if isinstance(v, list):
        for x in v:
            yield from flatten(x)
    elif isinstance(v, dict):
        yield PRESENT
    else:
        yield v


def ref_present(d: dict[str, Any], key: str) -> bool:
    """Whether an exported message has the key (a null value counts: the field is there)."""
    return bool(ref_values(d, key, keep_null=True))


def ref_values(d: dict[str, Any], key: str, keep_null: bool = False) -> list[Any]:
    """Values at key in an exported message: arrays transparent, info as the fallback."""
    proto, _, path = key.partition(".")
    if d["protocol"] != proto:
        return []
    level: list[Any] = [d["fields"]]
    for part in path.split("."):
        nxt: list[Any] = []
        for node in level:
            for x in _elements(node):
                if isinstance(x, dict) and part in x:
                    nxt.append(x[part])
        level = nxt
    if keep_null and level:
        return [PRESENT]  # the key is there (an empty array or a null value included)
    found = [v for node in level for v in flatten(node)]
    if not level and "." not in path and d["info"].get(path) is not None:
        found = list(flatten(d["info"][path]))
    return [v for v in found if keep_null or v is not None]


def _elements(node: Any) -> Iterator[Any]:
    if isinstance(node, list):
        for x in node:
            yield from _elements(x)
    else:
        yield node


def keys_of(d: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(key, first scalar value or PRESENT) for every path in an exported message's fields."""
    def walk(node: Any, prefix: str) -> Iterator[tuple[str, Any]]:
        for k, v in node.items():
            key = f"{prefix}.{k}"
            vals = [x for x in flatten(v) if x is not None]
            yield key, vals[0] if vals else None
            for x in _elements(v):
                if isinstance(x, dict):
                    yield from walk(x, key)
    yield from walk(d["fields"], d["protocol"])


def same(a: Any, b: Any) -> bool:
    return a == b and isinstance(a, bool) == isinstance(b, bool) and isinstance(a, str) == isinstance(b, str)


def byte_keys(fields: list[Field], prefix: str, out: set[str]) -> set[str]:
    """The keys of byte-string fields (base64 in the export: their literal is their bytes)."""
    for f in fields:
        key = f"{prefix}.{f.name}"
        if isinstance(f.value, (bytes, bytearray, memoryview)) and f.hint != RAW and not f.children:
            out.add(key)
        byte_keys(_below(f), key, out)
    return out


def _below(f: Field) -> list[Field]:
    if f.hint != ARRAY:
        return f.children or []
    return [g for e in f.children or () for g in (_below(e) if e.hint == ARRAY else e.children or [])]


def literal_for(v: Any) -> str | None:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str) and "…(+" not in v:
        return literal_text(Literal(STRING_LIT, v))
    return None


def bytes_literal(v: Any) -> str | None:
    """A byte string's filter literal (hex bytes) from its base64 in the export."""
    if not isinstance(v, str) or "…(+" in v:
        return None
    b = base64.b64decode(v)
    return ":".join(f"{x:02x}" for x in b) if b else None


@pytest.mark.parametrize("rel", SAMPLES)
def test_filters_agree_with_the_export(rel: str) -> None:
    path = capture(rel)
    msgs = list(dissect_file(str(path)))
    dicts = [message_dict(m) for m in msgs]
    tried = 0
    seen: dict[str, Any] = {}
    for d in dicts:
        for key, v in keys_of(d):
            seen.setdefault(key, v)
    assert seen, "the capture decodes to fields"
    binary: set[str] = set()
    for m in msgs:
        byte_keys(m.fields, m.protocol, binary)
    for key, v in sorted(seen.items()):
        try:
            exists = compile_filter(key)
        except FilterError:
            continue  # a JSON key that is not a valid filter token (none expected)
        want = [ref_present(d, key) for d in dicts]
        assert [exists(m) for m in msgs] == want, key
        lit = literal_for(v) if key not in binary else bytes_literal(v)
        if lit is None:
            continue
        eq = compile_filter(f"{key} == {lit}")
        want = [any(same(x, v) for x in ref_values(d, key)) for d in dicts]
        assert [eq(m) for m in msgs] == want, f"{key} == {lit}"
        tried += 1
    assert tried >= 5


def _export_jsonl(path: Path, *args: str) -> list[dict[str, Any]]:
    res = CliRunner().invoke(cli, ["export", str(path), "-F", "jsonl", *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]


def test_produce_count_matches_the_export() -> None:
    path = capture("kafka/gen__mock_ck_produce_basic.pcap")
    everything = _export_jsonl(path)
    produce = [d for d in everything if d["kind"] == "request" and d["info"].get("op") == "Produce"]
    assert len(produce) == 7
    only = _export_jsonl(path, "-Y", "kafka.header.api_key == 0")
    assert [d["frame"] for d in only] == [d["frame"] for d in produce]
    acks = _export_jsonl(path, "-Y", "kafka.header.api_key == 0 and kafka.acks == -1")
    assert len(acks) == 7


def test_error_names_on_a_real_capture() -> None:
    path = capture("kafka/gen__mock_ck_errors.pcap")
    everything = _export_jsonl(path)
    by_name = _export_jsonl(path, "-Y", "kafka.error == NOT_LEADER_OR_FOLLOWER")
    want = [d["frame"] for d in everything if d["info"].get("error") == "NOT_LEADER_OR_FOLLOWER"]
    assert want and [d["frame"] for d in by_name] == want
    nested = _export_jsonl(path, "-Y", "kafka.error_code == NOT_LEADER_OR_FOLLOWER")
    assert set(want) <= {d["frame"] for d in nested}
    slow = _export_jsonl(path, "-Y", "kdissect.rtt_ms > 100 && kdissect.kind == response")
    assert slow and all(d["match"]["rtt_ms"] > 100 for d in slow)
    assert len(slow) == sum(1 for d in everything
                            if d["kind"] == "response" and d["match"] and d["match"]["rtt_ms"] > 100)


def test_zookeeper_paths_and_protocol_name() -> None:
    path = capture("zookeeper/gen__zk_kazoo_errors.pcap")
    everything = _export_jsonl(path)
    zk = _export_jsonl(path, "-Y", "zookeeper")
    assert len(zk) == len(everything) > 0
    nonode = _export_jsonl(path, "-Y", "zookeeper.err == NONODE")
    assert nonode and all(d["fields"]["err_name"].lower() == "nonode" for d in nonode)


def test_bad_filter_is_one_error_with_exit_2() -> None:
    path = capture("kafka/gen__mock_ck_produce_basic.pcap")
    res = subprocess.run([sys.executable, "-m", "kdissect", "export", str(path), "-Y", "kafka.error_code == "],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert res.stdout == ""
    first, caret = res.stderr.rstrip("\n").split("\n")
    assert first == "kdissect: error: filter: expected a value at column 21: kafka.error_code == "
    assert caret == " " * (len(first)) + "^"
