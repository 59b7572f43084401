"""An independent oracle: kafka-python's hand-written protocol structs (kafka.protocol.old)
encode requests and responses with values derived from their own schemas; kdissect must decode
those bytes to the same values, leaf by leaf, in wire order."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import uuid
from typing import Any

import pytest

from kdissect.dissect.base import Options
from kdissect.kafka.apis import APIS
from kdissect.kafka.ops import Ctx
from kdissect.kafka.plan import plan_for
from kdissect.model import Field
from kdissect.wire.reader import WireReader

old = pytest.importorskip("kafka.protocol.old")
types = importlib.import_module("kafka.protocol.old.types")


def _classes() -> list[Any]:
    out = []
    for m in pkgutil.iter_modules(old.__path__):
        mod = importlib.import_module(f"kafka.protocol.old.{m.name}")
        for _, c in inspect.getmembers(mod, inspect.isclass):
            key, ver = getattr(c, "API_KEY", None), getattr(c, "API_VERSION", None)
            if c.__module__ == mod.__name__ and isinstance(key, int) and isinstance(ver, int):
                out.append(c)
    return sorted(out, key=lambda c: (c.API_KEY, c.API_VERSION, c.__name__))


class Gen:
    """Deterministic values for a kafka-python schema, and the leaves they should decode to."""

    def __init__(self) -> None:
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n

    def value(self, t: Any, name: str) -> tuple[Any, list[Any]]:
        if isinstance(t, types.Schema):
            vals, leaves = [], []
            for n, f in zip(t.names, t.fields, strict=True):
                v, lv = self.value(f, n)
                vals.append(v)
                leaves += lv
            return vals, leaves
        if isinstance(t, types.Array):
            items = [self.value(t.array_of, name) for _ in range(2)]
            return [i[0] for i in items], [x for i in items for x in i[1]]
        return self.scalar(t, name)

    def scalar(self, t: Any, name: str) -> tuple[Any, list[Any]]:
        n = self.next()
        if t is types.TaggedFields:
            return {}, []
        if t in (types.Int8, types.Int16, types.Int32, types.Int64, types.UnsignedVarInt32):
            return n % 100, [n % 100]
        if t is types.Boolean:
            return bool(n % 2), [bool(n % 2)]
        if t is types.Float64:
            return n / 4, [n / 4]
        if t is types.UUID:
            u = uuid.UUID(int=n)
            return u, [str(u)]
        if isinstance(t, (types.String, types.CompactString)):
            return f"s{n}", [f"s{n}"]
        if t in (types.Bytes, types.CompactBytes):
            return (None, [None]) if name == "records" else (b"b%d" % n, [b"b%d" % n])
        if t is types.BitField:
            return {1, 3}, [0b1010]
        raise TypeError(f"unexpected type {t}")


def leaves(f: Field, data: bytes) -> list[Any]:
    if f.children is None:
        return [] if f.name.startswith("tag_") else [f.value]
    if f.label is not None:  # an embedded protocol decoded from a (non-flexible) bytes field
        return [data[f.offset + 4 : f.offset + f.length]]
    return [x for c in f.children for x in leaves(c, data)]


# Defects of the oracle itself, checked by hand against the Kafka protocol:
ORACLE_DEFECTS = {
    "DescribeAclsRequest_v2": "reuses the non-flexible v1 schema although v2 is flexible",
    "DescribeAclsResponse_v2": "reuses the non-flexible v1 schema although v2 is flexible",
    "DescribeLogDirsRequest_v0": "partitions is an int32; the protocol has an int32 array",
}
CASES = [c for c in _classes() if c.API_KEY in APIS and c.__name__ not in ORACLE_DEFECTS]


@pytest.mark.parametrize("cls", CASES, ids=lambda c: c.__name__)
def test_oracle_round_trip(cls: Any) -> None:
    values, expected = Gen().value(cls.SCHEMA, "")
    data = cls.SCHEMA.encode(values)
    is_request = not cls.__name__.split("_v")[0].endswith("Response")
    r = WireReader(data)
    tree = plan_for(cls.API_KEY, cls.API_VERSION, is_request)(r, Ctx(Options()))
    assert r.remaining == 0
    assert leaves(tree, data) == expected


def test_oracle_covers_many_shapes() -> None:
    keys = {c.API_KEY for c in CASES}
    assert len(CASES) > 150 and {0, 1, 2, 3, 8, 9, 11, 14, 18, 19} <= keys
