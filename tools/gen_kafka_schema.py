#!/usr/bin/env python3
"""Generate kdissect's Kafka schema tables from a Kafka message specification directory.

Usage:
    python3 tools/gen_kafka_schema.py [SPEC_DIR [OUT_DIR]]

SPEC_DIR defaults to ../shared/kafka-spec/message (any Kafka checkout's
clients/src/main/resources/common/message works); OUT_DIR to kdissect/kafka. Writes:
    apis.py            api key -> Api(name, lowest, newest, first flexible version), and the
                       upstream source and Kafka version of the specification (SPEC_SOURCE,
                       SPEC_VERSION: KAFKA_VERSIONS below; `kdissect --version` prints them)
    schema_messages.py per request/response/embedded message: its FieldRow tables

Only facts are carried over (names, types, version ranges, tags, defaults, entity kinds); the
upstream prose is dropped. The spec files are JSON with // comments, which are stripped here
without touching string literals. The generated header names the input: always a content hash
of the files read (the sha256 of their `sha256sum` listing, sorted by name), and their upstream
commits when a MANIFEST.tsv (columns file, source, ..., sha256) sits beside SPEC_DIR (each
file's sha256 is checked against it). The output depends on nothing else.

Kafka's error codes (kdissect/kafka/error_codes.py) are not generated: the specification
directory holds no error list (Kafka keeps it in Errors.java).
"""

from __future__ import annotations

import csv
import hashlib
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

# The Apache Kafka version of each upstream tree the specification files come from, by the
# source MANIFEST.tsv names: the `version` of that commit's build (gradle.properties; a trunk
# snapshot carries the next release with -SNAPSHOT). The specification directory records
# commits only. apache/kafka@678c0e07: kafka-clients-4.4.0-SNAPSHOT is what its `:clients:jar`
# builds (kafkars/kafka-wire, spec/oracle.lock, which pins the same commit).
KAFKA_VERSIONS: dict[str, str] = {
    "apache/kafka@678c0e07e4733c5a592e52046dc2c4e1625587f1": "4.4.0-SNAPSHOT",
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
        return "FieldRow(" + ", ".join(repr(x) for x in row) + ", " + children + ")"

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


def collect(spec_dir: Path) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]], dict[str, Any],
                                    list[Path]]:
    """Requests and responses by api key, the embedded messages by name, and the files read."""
    requests: dict[int, dict[str, Any]] = {}
    responses: dict[int, dict[str, Any]] = {}
    embedded: dict[str, Any] = {}
    used: list[Path] = []
    for path in sorted(spec_dir.glob("*.json")):
        msg = load(path)
        kind = msg.get("type")
        if kind == "request":
            requests[msg["apiKey"]] = msg
        elif kind == "response":
            responses[msg["apiKey"]] = msg
        elif msg["name"] in EMBEDDED:
            embedded[msg["name"]] = msg
        else:
            continue
        used.append(path)
    return requests, responses, embedded, used


def api_row(req: dict[str, Any], resp: dict[str, Any]) -> tuple[str, int, int, int | None]:
    valid, flex = vrange(req["validVersions"]), vrange(req["flexibleVersions"])
    if (valid, flex) != (vrange(resp["validVersions"]), vrange(resp["flexibleVersions"])):
        raise SystemExit(f"{req['name']}: request and response version ranges differ")
    name = req["name"][: -len("Request")]
    return name, valid[0], valid[1], flex[0] if flex[1] >= 0 else None


def upstream_sources(spec_dir: Path, used: list[Path]) -> dict[str, int] | None:
    """The upstream source of the files read and how many come from each, from MANIFEST.tsv
    (each file checked against the sha256 it lists); None without a MANIFEST.tsv."""
    manifest = spec_dir.parent / "MANIFEST.tsv"
    if not manifest.exists():
        return None
    with manifest.open(encoding="utf-8", newline="") as fh:
        listed = {row["file"]: row for row in csv.DictReader(fh, delimiter="\t")}
    sources: dict[str, int] = {}
    for path in sorted(used, key=lambda p: p.name):
        row = listed.get(path.name)
        if row is None or row.get("sha256") != hashlib.sha256(path.read_bytes()).hexdigest():
            raise SystemExit(f"{path.name}: not the file {manifest} lists (unlisted, or its sha256 differs)")
        sources[row["source"]] = sources.get(row["source"], 0) + 1
    return dict(sorted(sources.items(), key=lambda kv: (-kv[1], kv[0])))


def spec_release(sources: dict[str, int] | None) -> tuple[str | None, str | None]:
    """The source most files come from and its Kafka version (KAFKA_VERSIONS); (None, None)
    when the sources are not recorded."""
    if not sources:
        return None, None
    main = next(iter(sources))
    if main not in KAFKA_VERSIONS:
        raise SystemExit(f"{main}: its Kafka version is not in KAFKA_VERSIONS (tools/gen_kafka_schema.py)")
    return main, KAFKA_VERSIONS[main]


def provenance(spec_dir: Path, used: list[Path]) -> list[str]:
    """Header lines naming the input: a content hash of the files read, and their upstream
    commits from MANIFEST.tsv (each file checked against the sha256 it lists)."""
    digests = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in used}
    listing = "".join(f"{digests[name]}  {name}\n" for name in sorted(digests))
    lines = [f"# Input: {len(digests)} specification files; sha256 of their sha256sum listing:",
             f"#   {hashlib.sha256(listing.encode()).hexdigest()}"]
    sources = upstream_sources(spec_dir, used)
    if sources is None:
        return lines + ["# Upstream commit: not recorded (no MANIFEST.tsv beside the specification directory)."]
    lines.append("# Upstream commits (from MANIFEST.tsv):")
    lines += [f"#   {src} ({n} files)" for src, n in sources.items()]
    return lines


HEADER = ("# Generated by tools/gen_kafka_schema.py from Apache Kafka's protocol message "
          "specifications\n# (Apache-2.0, Copyright The Apache Software Foundation). "
          "Do not edit: regenerate.\n")

def apis_source(header: str, rows: dict[int, tuple[str, int, int, int | None]],
                release: tuple[str | None, str | None]) -> str:
    source, version = release
    lines = [header, '"""Kafka API keys: name, lowest and newest version, first flexible version."""',
             "", "from __future__ import annotations", "", "from kdissect.kafka.schema_types import Api", "",
             "# The upstream tree most specification files come from, and its Apache Kafka version",
             "# (None: not recorded).",
             f"SPEC_SOURCE: str | None = {source!r}",
             f"SPEC_VERSION: str | None = {version!r}", "",
             "APIS: dict[int, Api] = {"]
    lines += [f"    {k}: Api{rows[k]!r}," for k in sorted(rows)]
    lines += ["}", ""]
    return "\n".join(lines)


def message_source(msg: dict[str, Any]) -> tuple[list[str], str]:
    em = Emitter(msg)
    body = em.fields(msg["fields"], "")
    return em.defs, body


def messages_source(header: str, requests: dict[int, Any], responses: dict[int, Any],
                    embedded: dict[str, Any]) -> str:
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
        tables["EMBEDDED"].append(f"    {name!r}: EmbeddedMessage({valid[0]}, {valid[1]}, {flex_lo!r}, {body}),")
    lines = [header, '"""Kafka message field tables: the fields of every request and response by API key,',
             'and of the messages embedded in `bytes` fields by name."""', "", "# ruff: noqa: E501",
             "from __future__ import annotations", "", "from kdissect.kafka.schema_types import EmbeddedMessage, FieldRow",
             ""]
    lines += defs
    lines.append("")
    lines.append("REQUESTS: dict[int, tuple[FieldRow, ...]] = {")
    lines += tables["REQUESTS"] + ["}", "", "RESPONSES: dict[int, tuple[FieldRow, ...]] = {"]
    lines += tables["RESPONSES"] + ["}", ""]
    lines.append("EMBEDDED: dict[str, EmbeddedMessage] = {")
    lines += tables["EMBEDDED"] + ["}", ""]
    return "\n".join(lines)


def generate(spec_dir: Path) -> dict[str, str]:
    """The generated modules' text by file name."""
    requests, responses, embedded, used = collect(spec_dir)
    if set(requests) != set(responses):
        raise SystemExit("request and response api keys differ")
    rows = {k: api_row(requests[k], responses[k]) for k in requests}
    header = HEADER + "\n".join(provenance(spec_dir, used)) + "\n"
    release = spec_release(upstream_sources(spec_dir, used))
    return {"apis.py": apis_source(header, rows, release),
            "schema_messages.py": messages_source(header, requests, responses, embedded)}


def main(argv: list[str]) -> int:
    spec_dir = Path(argv[1]) if len(argv) > 1 else DEFAULT_SPEC
    out = Path(argv[2]) if len(argv) > 2 else ROOT / "kdissect" / "kafka"
    files = generate(spec_dir)
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
    print(f"{', '.join(files)} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
