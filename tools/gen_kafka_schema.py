#!/usr/bin/env python3
"""Generate kdissect's Kafka schema tables from a Kafka message specification directory.

Usage:
    python3 tools/gen_kafka_schema.py [SPEC_DIR]

SPEC_DIR defaults to ../shared/kafka-spec/message (any Kafka checkout's
clients/src/main/resources/common/message works). Writes:
    kdissect/kafka/apis.py            api key -> (name, lowest, newest, first flexible version)
    kdissect/kafka/schema_messages.py per request/response/embedded message: its field tables

Only facts are carried over (names, types, version ranges, tags, defaults, entity kinds); the
upstream prose is dropped. The spec files are JSON with // comments, which are stripped here
without touching string literals.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SPEC = ROOT / ".." / "shared" / "kafka-spec" / "message"
OPEN = 32767  # the upper bound of an open version range ("3+")
EMBEDDED = ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment")

# Fields that versions removed in Kafka 4.0 still need but the newest spec files no longer list.
# (message, dotted parent path of spec names, insert after field) -> field definition.
# Facts from the Kafka protocol of those versions.
REMOVED_FIELDS: dict[tuple[str, str, str], dict[str, Any]] = {
    ("ListOffsetsRequest", "Topics.Partitions", "Timestamp"):
        {"name": "MaxNumOffsets", "type": "int32", "versions": "0"},
    ("ListOffsetsResponse", "Topics.Partitions", "ErrorCode"):
        {"name": "OldStyleOffsets", "type": "[]int64", "versions": "0"},
    ("OffsetCommitRequest", "Topics.Partitions", "CommittedOffset"):
        {"name": "CommitTimestamp", "type": "int64", "versions": "1"},
    ("DescribeConfigsResponse", "Results.Configs", "ReadOnly"):
        {"name": "IsDefault", "type": "bool", "versions": "0"},
}

TIMESTAMP_NAMES = re.compile(r"(Timestamp|TimestampMs|AppendTimeMs|StartTimeMs|ExpiryTimeMs|"
                             r"IssueTimeMs|LastUpdatedTimestamp)$")


def strip_comments(text: str) -> str:
    """Remove // comments outside string literals."""
    out: list[str] = []
    i, n, in_str = 0, len(text), False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            in_str = c != '"'
            i += 1
        elif c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(strip_comments(path.read_text(encoding="utf-8")))
    return data


def vrange(spec: str | None) -> tuple[int, int]:
    """'3+' -> (3, OPEN); '0-2' -> (0, 2); '4' -> (4, 4); 'none'/None -> (0, -1) (empty)."""
    if spec is None or spec == "none":
        return (0, -1)
    if spec.endswith("+"):
        return (int(spec[:-1]), OPEN)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def snake(name: str) -> str:
    name = name.replace("KRaft", "Kraft")
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def flags_of(f: dict[str, Any]) -> str:
    out = ""
    name, typ, entity = f["name"], f["type"], f.get("entityType", "")
    if typ == "int16" and name.endswith("ErrorCode"):
        out += "E"
    if entity == "topicName" and typ == "string":
        out += "T"
    if entity == "groupId" and typ == "string":
        out += "G"
    if typ == "int64" and TIMESTAMP_NAMES.search(name):
        out += "M"
    return out


class Emitter:
    """Turns one message's fields into Python source, naming common structs once."""

    def __init__(self, msg: dict[str, Any]) -> None:
        self.msg = msg
        self.common = {c["name"]: c for c in msg.get("commonStructs", [])}
        self.defs: list[str] = []
        self.done: set[str] = set()
        self.prefix = "_" + msg["name"]

    def fields(self, fields: list[dict[str, Any]], path: str) -> str:
        fields = self.patched(fields, path)
        items = [self.field(f, path) for f in fields]
        return "(" + "".join(i + ", " for i in items) + ")"

    def patched(self, fields: list[dict[str, Any]], path: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for f in fields:
            out.append(f)
            extra = REMOVED_FIELDS.get((self.msg["name"], path, f["name"]))
            if extra is not None:
                out.append(extra)
        return out

    def field(self, f: dict[str, Any], parent: str) -> str:
        typ: str = f["type"]
        base = typ[2:] if typ.startswith("[]") else typ
        path = f"{parent}.{f['name']}" if parent else f["name"]
        children = "None"
        if base[:1].isupper():
            children = self.struct(base, f, path)
            typ = "[]struct" if typ.startswith("[]") else "struct"
        v = vrange(f["versions"])
        nv = vrange(f.get("nullableVersions"))
        tv = vrange(f.get("taggedVersions"))
        tag = f.get("tag", -1)
        default = f.get("default")
        row = (snake(f["name"]), typ, v[0], v[1], nv[0], nv[1], tag, tv[0], tv[1], flags_of(f),
               None if default is None else str(default))
        return "(" + ", ".join(repr(x) for x in row) + ", " + children + ")"

    def struct(self, base: str, f: dict[str, Any], path: str) -> str:
        if "fields" in f:
            return self.fields(f["fields"], path)
        if base not in self.common:
            raise SystemExit(f"{self.msg['name']}: unknown struct type {base}")
        var = f"{self.prefix}_{base}"
        if var not in self.done:
            self.done.add(var)
            body = self.fields(self.common[base]["fields"], path)
            self.defs.append(f"{var} = {body}")
        return var


def collect(spec_dir: Path) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]], dict[str, Any]]:
    requests: dict[int, dict[str, Any]] = {}
    responses: dict[int, dict[str, Any]] = {}
    embedded: dict[str, Any] = {}
    for path in sorted(spec_dir.glob("*.json")):
        msg = load(path)
        kind = msg.get("type")
        if kind == "request":
            requests[msg["apiKey"]] = msg
        elif kind == "response":
            responses[msg["apiKey"]] = msg
        elif msg["name"] in EMBEDDED:
            embedded[msg["name"]] = msg
    return requests, responses, embedded


def api_row(req: dict[str, Any], resp: dict[str, Any]) -> tuple[str, int, int, int | None]:
    valid, flex = vrange(req["validVersions"]), vrange(req["flexibleVersions"])
    if (valid, flex) != (vrange(resp["validVersions"]), vrange(resp["flexibleVersions"])):
        raise SystemExit(f"{req['name']}: request and response version ranges differ")
    name = req["name"][: -len("Request")]
    return name, valid[0], valid[1], flex[0] if flex[1] >= 0 else None


HEADER = ("# Generated by tools/gen_kafka_schema.py from Apache Kafka's protocol message "
          "specifications\n# (Apache-2.0, Copyright The Apache Software Foundation). "
          "Do not edit: regenerate.\n")


def write_apis(out: Path, rows: dict[int, tuple[str, int, int, int | None]]) -> None:
    lines = [HEADER, '"""Kafka API keys: name, lowest and newest version, first flexible version."""',
             "", "from __future__ import annotations", "",
             "# api_key: (name, min_version, max_version, first_flexible_version or None)",
             "APIS: dict[int, tuple[str, int, int, int | None]] = {"]
    lines += [f"    {k}: {rows[k]!r}," for k in sorted(rows)]
    lines += ["}", ""]
    out.write_text("\n".join(lines), encoding="utf-8")


def message_source(msg: dict[str, Any]) -> tuple[list[str], str]:
    em = Emitter(msg)
    body = em.fields(msg["fields"], "")
    return em.defs, body


def write_messages(out: Path, requests: dict[int, Any], responses: dict[int, Any],
                   embedded: dict[str, Any]) -> None:
    defs: list[str] = []
    tables: dict[str, list[str]] = {"REQUESTS": [], "RESPONSES": [], "EMBEDDED": []}
    for table, msgs in (("REQUESTS", requests), ("RESPONSES", responses)):
        for key in sorted(msgs):
            d, body = message_source(msgs[key])
            defs += d
            tables[table].append(f"    {key}: {body},")
    for name in sorted(embedded):
        msg = embedded[name]
        d, body = message_source(msg)
        defs += d
        valid, flex = vrange(msg["validVersions"]), vrange(msg["flexibleVersions"])
        flex_lo = flex[0] if flex[1] >= 0 else None
        tables["EMBEDDED"].append(f"    {name!r}: ({valid[0]}, {valid[1]}, {flex_lo!r}, {body}),")
    lines = [HEADER, '"""Kafka message field tables.', "",
             "A field: (name, type, versions lo, hi, nullable lo, hi, tag, tagged lo, hi, flags,",
             "default, children). hi 32767 is open; lo > hi is empty. type is a primitive, '[]prim',",
             "'struct' or '[]struct' (children set). flags: E error code, T topic name, G group id,",
             'M timestamp in ms."""', "", "# ruff: noqa: E501", "from __future__ import annotations", "",
             "from typing import Any", ""]
    lines += defs
    lines.append("")
    lines.append("REQUESTS: dict[int, tuple[Any, ...]] = {")
    lines += tables["REQUESTS"] + ["}", "", "RESPONSES: dict[int, tuple[Any, ...]] = {"]
    lines += tables["RESPONSES"] + ["}", ""]
    lines.append("# name: (lowest version, newest version, first flexible version or None, fields)")
    lines.append("EMBEDDED: dict[str, tuple[Any, ...]] = {")
    lines += tables["EMBEDDED"] + ["}", ""]
    out.write_text("\n".join(lines), encoding="utf-8")


def main(argv: list[str]) -> int:
    spec_dir = Path(argv[1]) if len(argv) > 1 else DEFAULT_SPEC
    requests, responses, embedded = collect(spec_dir)
    if set(requests) != set(responses):
        raise SystemExit("request and response api keys differ")
    rows = {k: api_row(requests[k], responses[k]) for k in requests}
    pkg = ROOT / "kdissect" / "kafka"
    write_apis(pkg / "apis.py", rows)
    write_messages(pkg / "schema_messages.py", requests, responses, embedded)
    print(f"{len(rows)} api keys, {len(embedded)} embedded messages -> {pkg}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
