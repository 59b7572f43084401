"""ZooKeeper's field keys for `kdissect fields`: the header keys, then a walk over the jute
record layouts. A message's record fields sit at the root after the header, nested records are
structs, vectors arrays. Records used only inside others (Stat, ACL, Id) are not roots. Multi
operations (ops, results: each element the fields of its operation's record) and four-letter
words are built outside the tables: EXTRA names them (`ops.*`: any key below), `--from` lists
what a capture holds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kdissect.dissect.keyinfo import KeyInfo
from kdissect.model import ENUM, FLAGS, Field
from kdissect.zookeeper.annotate import for_field
from kdissect.zookeeper.records_table import RECORDS

HEADER = (
    ("length", "int32", "message size after the length prefix"),
    ("xid", "int", "request/reply id"),
    ("opcode", "int", "operation (request)"),
    ("opcode_name", "string", "operation name (request)"),
    ("zxid", "long", "transaction id (reply)"),
    ("err", "int", "error code (reply)"),
    ("err_name", "string", "error name (reply)"),
)
EXTRA = (
    ("ops", "[]struct", "operations of a multi request"),
    ("ops.*", "any", "an operation's type, type_name, then its request record's fields"),
    ("results", "[]struct", "results of a multi response"),
    ("results.*", "any", "a result's type, err, then its response record's fields"),
    ("result_err", "int", "error of a multi result"), ("result_err_name", "string", "its name"),
    ("event", "string", "watch event"),
    ("four_letter_word", "string", "four-letter word command"), ("lines", "[]string", "its reply lines"),
    ("text", "string", "its reply text"), ("trace_mask", "int64", "stmk/gtmk trace mask"),
    ("body", "bytes", "body not decoded"), ("trailing", "bytes", "bytes after the record"),
)
# Headers (the dissector renders them: HEADER) and StatPersisted (server-side only).
NOT_ROOTS = ("RequestHeader", "ReplyHeader", "MultiHeader", "StatPersisted")


def field_keys() -> list[KeyInfo]:
    nested = {t[7:-1] if t.startswith("vector<") else t for fields in RECORDS.values() for _, t in fields}
    keys: dict[str, KeyInfo] = {p: KeyInfo("zookeeper." + p, t, d) for p, t, d in HEADER}
    for record in RECORDS:
        if record in nested or record in NOT_ROOTS:
            continue
        for path, typ, named in _walk_jute(record, "", 0):
            keys.setdefault(path, KeyInfo("zookeeper." + path, typ)).use(record)
            if named:
                keys.setdefault(path + "_name", KeyInfo(f"zookeeper.{path}_name", "string", "name")).use(record)
    for path, typ, desc in EXTRA:
        keys.setdefault(path, KeyInfo("zookeeper." + path, typ, desc))
    return sorted(keys.values(), key=lambda k: k.key)


def _walk_jute(record: str, prefix: str, depth: int) -> Iterator[tuple[str, str, bool]]:
    for name, jtype in RECORDS[record]:
        path = prefix + name
        elem = jtype[7:-1] if jtype.startswith("vector<") else jtype
        yield path, jtype, _is_named(for_field(record, name))
        if elem in RECORDS and depth < 4:
            yield from _walk_jute(elem, path + ".", depth + 1)


def _is_named(annotator: Any) -> bool:
    """Whether an annotator makes the field an ENUM or FLAGS (it then has a _name key)."""
    if annotator is None:
        return False
    probe = Field("probe", 1)
    annotator(probe, False)
    return probe.hint in (ENUM, FLAGS)
