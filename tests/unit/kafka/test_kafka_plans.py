"""Every (api_key, version, request|response) plan compiles and decodes bytes of default values,
tagged fields included (decoded by name, never left as raw tag_N)."""

from __future__ import annotations

import pytest
from kafka_schema_encoder import encode

from kdissect.dissect.base import Options
from kdissect.kafka.apis import APIS
from kdissect.kafka.headers import is_flexible
from kdissect.kafka.ops import Ctx
from kdissect.kafka.plan import message_fields, message_name, plan_for
from kdissect.model import Field
from kdissect.wire.reader import WireReader

SHAPES = [(k, v, req) for k, api in sorted(APIS.items()) for v in range(api.newest + 1)
          for req in (True, False)]


def names(f: Field) -> list[str]:
    return [f.name] + [n for c in f.children or () for n in names(c)]


def test_api_keys_are_contiguous() -> None:
    assert sorted(APIS) == list(range(len(APIS)))
    assert len([s for s in SHAPES if s[2]]) >= 334


@pytest.mark.parametrize(("api_key", "version", "is_request"), SHAPES,
                         ids=lambda x: str(x))
def test_plan_decodes_default_values(api_key: int, version: int, is_request: bool) -> None:
    fields = message_fields(message_name(api_key, is_request))
    assert fields is not None
    data = encode(fields, version, is_flexible(api_key, version))
    r = WireReader(data)
    tree = plan_for(api_key, version, is_request)(r, Ctx(Options(decode_records=False)))
    assert r.remaining == 0
    assert not [n for n in names(tree) if n.startswith("tag_")]


def test_plans_are_cached() -> None:
    assert plan_for(1, 12, False) is plan_for(1, 12, False)


def test_unknown_tag_kept_raw_with_its_number() -> None:
    # Heartbeat v4 request (flexible): group_id, generation_id, member_id, group_instance_id, tags
    data = b"\x02g" + b"\x00\x00\x00\x01" + b"\x02m" + b"\x00" + b"\x01" + b"\x07\x02hi"
    tree = plan_for(12, 4, True)(WireReader(data), Ctx(Options()))
    tag = tree.children[-1] if tree.children else None
    assert tag is not None and (tag.name, tag.value) == ("tag_7", b"hi")
