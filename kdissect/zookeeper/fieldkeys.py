"""ZooKeeper's field keys for `kdissect fields`: the header keys, then a walk over the jute
record layouts. A message's record fields sit at the root after the header, nested records are
structs, vectors arrays. Records used only inside others (Stat, ACL, Id) are not roots. Multi
operations (ops, results) and four-letter words are built outside the tables: `--from` lists
them."""

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
