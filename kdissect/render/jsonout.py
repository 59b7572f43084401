"""Message -> JSON-ready dict: the export contract documented in docs/json.md."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from typing import Any

from kdissect.model import ARRAY, BYTES, ENUM, FLAGS, RAW, STRUCT, Column, Field, Message, Row

_WHITESPACE = {ord("\t"): None, ord("\r"): None, ord("\n"): None}


def printable(b: bytes) -> str | None:
    """The text of b when it is printable UTF-8, else None."""
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if s.isprintable() or s.translate(_WHITESPACE).isprintable():
        return s
    return None


def bytes_value(b: bytes, max_bytes: int) -> str:
    """Bytes for JSON: printable text as is, else lowercase hex; cut at max_bytes (0: no cut)."""
    cut = max_bytes > 0 and len(b) > max_bytes
    part = b[:max_bytes] if cut else b
    text = printable(part)
    out = text if text is not None else part.hex()
    return out + f"…(+{len(b) - max_bytes} bytes)" if cut else out


_PLAIN = frozenset({int, str, bool, type(None)})
_NAMED = frozenset({ENUM, FLAGS})


def _row_plan(columns: tuple[Column, ...]) -> tuple[tuple[str, Callable[[Any, int], Any] | None], ...]:
    """How each column of a Row kind becomes JSON: None where the value is already plain."""
    def conv(hint: str | None) -> Callable[[Any, int], Any] | None:
        if hint == BYTES:
            return _bytes_or_field
        if hint in (RAW, STRUCT, ARRAY):
            return _any_value
        return None

    plan = tuple((name, conv(hint)) for name, hint in columns)
    _ROW_PLANS[columns] = plan
    return plan


def _bytes_or_field(v: Any, max_bytes: int) -> Any:
    return bytes_value(v, max_bytes) if type(v) is bytes else _any_value(v, max_bytes)


def _any_value(v: Any, max_bytes: int) -> Any:
    if isinstance(v, Field):
        return field_value(v, max_bytes)
    return field_value(Field("", v), max_bytes) if type(v) not in _PLAIN else v


_ROW_PLANS: dict[tuple[Column, ...], tuple[tuple[str, Callable[[Any, int], Any] | None], ...]] = {}


def row_dict(row: Row, max_bytes: int) -> dict[str, Any]:
    """A Row straight from its values, without building its child Fields."""
    plan = _ROW_PLANS.get(row.columns) or _row_plan(row.columns)
    out: dict[str, Any] = {}
    for (name, conv), v in zip(plan, row.values, strict=True):
        out[name] = v if conv is None or v is None else conv(v, max_bytes)
    return out


def field_value(f: Field, max_bytes: int) -> Any:
    hint = f.hint
    if hint == STRUCT:
        if type(f) is Row and not f.materialized:
            return row_dict(f, max_bytes)
        return fields_dict(f.children or (), max_bytes)
    if hint == ARRAY:
        return [field_value(c, max_bytes) for c in f.children or ()]
    v = f.value
    tv = type(v)
    if tv in _PLAIN:
        pass
    elif tv is bytes or tv is bytearray or tv is memoryview:
        if hint == RAW:
            return bytes(v[:max_bytes] if max_bytes > 0 else v).hex()
        return bytes_value(bytes(v), max_bytes)
    elif tv is float and v != v:
        return None
    if f.children:  # a scalar with sub-fields (flags broken out, parsed payloads)
        d = fields_dict(f.children, max_bytes)
        d["value"] = v
        return d
    return v


def fields_dict(fields: Iterable[Field], max_bytes: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        name = f.name
        v = f.value
        plain = f.hint is None and f.children is None and type(v) in _PLAIN
        val = v if plain else field_value(f, max_bytes)
        if name in out:  # repeated names (e.g. unknown tags) become lists
            prev = out[name]
            if not (isinstance(prev, list) and f.hint != ARRAY):
                prev = out[name] = [prev]
            prev.append(val)
            continue
        out[name] = val
        if f.display is not None and f.hint in _NAMED:
            out[name + "_name"] = f.display
    return out


def message_dict(m: Message, max_bytes: int = 256) -> dict[str, Any]:
    return {
        "number": m.number,
        "frame": m.frame,
        "frames": m.frames,
        "ts": round(m.ts, 9),
        "stream": m.stream,
        "src": m.src,
        "dst": m.dst,
        "protocol": m.protocol,
        "kind": m.kind,
        "summary": m.summary,
        "length": len(m.data),
        "info": {k: v for k, v in m.info.items() if v is not None},
        "fields": fields_dict(m.fields, max_bytes),
        "diagnostics": [d.to_json() for d in m.diagnostics],
        "match": m.match.to_json() if m.match else None,
    }


def _default(o: Any) -> Any:
    if isinstance(o, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(o)).decode()
    return str(o)


def dumps(d: dict[str, Any]) -> str:
    return json.dumps(d, ensure_ascii=False, default=_default, separators=(",", ":"))
