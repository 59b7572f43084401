"""Every BaseCommand type of protocol version 21: a minimal command with its required fields
decodes cleanly, gets a kind and a summary that names it."""

from __future__ import annotations

from typing import Any

import pytest
from pulsar_testlib import pb, run, simple

from kdissect.model import Severity
from kdissect.pulsar.commands import ROLES, TYPE_NAMES
from kdissect.pulsar.match import SPECIAL
from kdissect.pulsar.schema_table import MESSAGES

SPECIAL_SUMMARY = {"LOOKUP_RESPONSE": "LOOKUP ", "PARTITIONED_METADATA_RESPONSE": "PARTITIONED_METADATA "}


def _minimal(message: str, depth: int = 0) -> bytes:
    """Required fields only, each with a small value of its type."""
    pairs: list[tuple[int, Any]] = []
    for number, (_, kind, typ, label, _) in sorted(MESSAGES[message].items()):
        if label != "required":
            continue
        if kind == "message":
            pairs.append((number, _minimal(typ, depth + 1)))
        elif typ in ("string", "bytes"):
            pairs.append((number, "x"))
        elif typ in ("double", "fixed64", "sfixed64"):
            pairs.append((number, ("f64", 1.0)))
        else:
            pairs.append((number, 1))
    return pb(*pairs)


@pytest.mark.parametrize("code", sorted(TYPE_NAMES), ids=lambda c: TYPE_NAMES[c])
def test_every_type_decodes(code: int) -> None:
    name = TYPE_NAMES[code]
    body_message = MESSAGES["BaseCommand"][code][2]
    msg = run(simple(code, _minimal(body_message)))
    problems = [d for d in msg.diagnostics if d.severity in (Severity.ERROR, Severity.WARNING)]
    if name in ("ERROR", "SEND_ERROR"):  # their required error field is set: MetadataError (1)
        assert [d.key for d in problems] == ["pulsar.error"] and msg.info["error"] == "MetadataError"
    else:
        assert problems == []
    assert msg.info["op"] == name and msg.info["op_code"] == code
    assert msg.summary.startswith(SPECIAL_SUMMARY.get(name, name))
    assert msg.kind in ("request", "response", "event")


def test_every_type_has_a_matching_rule() -> None:
    assert {n for n in TYPE_NAMES.values() if n not in ROLES and n not in SPECIAL} == set()
