#!/usr/bin/env python3
"""Generate kdissect/pulsar/schema_table.py from a PulsarApi.proto.

    python3 tools/gen_pulsar_schema.py [PROTO] [OUT]

Defaults: ../shared/pulsar-spec/PulsarApi.proto and kdissect/pulsar/schema_table.py relative to
the repository root. The proto2 subset Pulsar uses is parsed: messages (nested), enums (nested and
top-level), fields with label (required / optional / repeated; oneof members are optional), scalar
or named types, and field options such as [packed = true]. The output holds facts only: message
and enum names, field numbers, snake_case field names, types, labels and enum values.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PROTO = ROOT / ".." / "shared" / "pulsar-spec" / "PulsarApi.proto"
DEFAULT_OUT = ROOT / "kdissect" / "pulsar" / "schema_table.py"

SCALARS = frozenset({
    "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
    "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes",
})
LABELS = frozenset({"required", "optional", "repeated"})
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+|[A-Za-z_][\w.]*|[{}\[\]=;<>,()]')
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


@dataclass
class ProtoField:
    number: int
    name: str
    type: str
    label: str
    packed: bool = False


@dataclass
class ProtoMessage:
    name: str  # qualified: Outer.Inner
    fields: list[ProtoField] = field(default_factory=list)


@dataclass
class Schema:
    messages: dict[str, ProtoMessage] = field(default_factory=dict)
    enums: dict[str, dict[int, str]] = field(default_factory=dict)


def snake(name: str) -> str:
    """ledgerId -> ledger_id, brokerServiceUrlTls -> broker_service_url_tls."""
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    return s.lower()


class Parser:
    def __init__(self, text: str) -> None:
        self.toks = _TOKEN.findall(_COMMENTS.sub(" ", text))
        self.i = 0
        self.schema = Schema()

    def peek(self) -> str:
        return self.toks[self.i] if self.i < len(self.toks) else ""

    def next(self) -> str:
        tok = self.peek()
        if not tok:
            raise SyntaxError("unexpected end of the proto file")
        self.i += 1
        return tok

    def expect(self, tok: str) -> None:
        got = self.next()
        if got != tok:
            raise SyntaxError(f"expected {tok!r}, got {got!r} at token {self.i}")

    def skip_statement(self) -> None:
        while self.next() != ";":
            pass

    def parse(self) -> Schema:
        while self.peek():
            tok = self.next()
            if tok == "message":
                self.message("")
            elif tok == "enum":
                self.enum("")
            elif tok in ("syntax", "package", "option", "import"):
                self.skip_statement()
            elif tok != ";":
                raise SyntaxError(f"unexpected {tok!r} at top level")
        return self.schema

    def enum(self, scope: str) -> None:
        name = scope + self.next()
        values: dict[int, str] = {}
        self.expect("{")
        while (tok := self.next()) != "}":
            if tok in ("option", "reserved"):
                self.skip_statement()
                continue
            if tok == ";":
                continue
            self.expect("=")
            values.setdefault(int(self.next()), tok)
            self.options()
            self.expect(";")
        self.schema.enums[name] = values

    def options(self) -> dict[str, str]:
        opts: dict[str, str] = {}
        if self.peek() != "[":
            return opts
        self.next()
        while (key := self.next()) != "]":
            if key == ",":
                continue
            self.expect("=")
            opts[key] = self.next()
        return opts

    def message(self, scope: str) -> None:
        msg = ProtoMessage(scope + self.next())
        self.schema.messages[msg.name] = msg
        self.expect("{")
        self.body(msg, None)

    def body(self, msg: ProtoMessage, oneof: str | None) -> None:
        while (tok := self.next()) != "}":
            if tok == "message":
                self.message(msg.name + ".")
            elif tok == "enum":
                self.enum(msg.name + ".")
            elif tok == "oneof":
                self.next()
                self.expect("{")
                self.body(msg, "oneof")
            elif tok in ("option", "reserved", "extensions"):
                self.skip_statement()
            elif tok != ";":
                self.field(msg, tok, oneof)

    def field(self, msg: ProtoMessage, tok: str, oneof: str | None) -> None:
        label = "optional"
        if tok in LABELS:
            label, tok = tok, self.next()
        if oneof is not None:
            label = "optional"
        name = self.next()
        self.expect("=")
        number = int(self.next())
        opts = self.options()
        self.expect(";")
        msg.fields.append(ProtoField(number, name, tok, label, opts.get("packed") == "true"))


def resolve(schema: Schema, scope: str, type_name: str) -> tuple[str, str]:
    """(kind, qualified name) of a field type seen inside message `scope`."""
    if type_name in SCALARS:
        return "scalar", type_name
    parts = scope.split(".")
    for n in range(len(parts), -1, -1):
        cand = ".".join(parts[:n] + [type_name]) if n else type_name
        if cand in schema.messages:
            return "message", cand
        if cand in schema.enums:
            return "enum", cand
    raise SyntaxError(f"{scope}: unknown type {type_name!r}")


def protocol_version(schema: Schema) -> int:
    versions = schema.enums.get("ProtocolVersion", {})
    return max(versions) if versions else 0


def render(schema: Schema, source: str) -> str:
    out = [
        '"""Pulsar wire schema as data: generated by tools/gen_pulsar_schema.py. Do not edit."""',
        "",
        f"# Facts (names, numbers, types) derived from {source} (Apache-2.0).",
        "",
        "from __future__ import annotations",
        "",
        f"PROTOCOL_VERSION = {protocol_version(schema)}",
        "",
        "# enum name -> {value: symbol}",
        "ENUMS: dict[str, dict[int, str]] = {",
    ]
    for name, values in schema.enums.items():
        items = ", ".join(f"{v}: {s!r}" for v, s in sorted(values.items()))
        out.append(f"    {name!r}: {{{items}}},")
    out += [
        "}",
        "",
        "# message name -> {field number: (snake_case name, kind, type, label, packed)}",
        "# kind: 'scalar' (type is the protobuf scalar), 'enum' or 'message' (type is a key of",
        "# ENUMS / MESSAGES); label: 'required' | 'optional' | 'repeated'.",
        "MESSAGES: dict[str, dict[int, tuple[str, str, str, str, bool]]] = {",
    ]
    for name, msg in schema.messages.items():
        out.append(f"    {name!r}: {{")
        for f in sorted(msg.fields, key=lambda f: f.number):
            kind, typ = resolve(schema, name, f.type)
            out.append(f"        {f.number}: ({snake(f.name)!r}, {kind!r}, {typ!r}, {f.label!r}, {f.packed}),")
        out.append("    },")
    out += ["}", ""]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    proto = Path(argv[1]) if len(argv) > 1 else DEFAULT_PROTO
    dest = Path(argv[2]) if len(argv) > 2 else DEFAULT_OUT
    schema = Parser(proto.read_text(encoding="utf-8")).parse()
    dest.write_text(render(schema, proto.name), encoding="utf-8")
    print(f"{dest}: {len(schema.messages)} messages, {len(schema.enums)} enums, "
          f"protocol version {protocol_version(schema)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
