"""Message -> JSON-ready dict, and the JSON text of such dicts: the export contract documented
in docs/json.md.

The encoder is orjson, made to write what `json.dumps(d, ensure_ascii=False,
separators=(",", ":"), default=...)` writes, byte for byte, for every value kdissect produces:
compact separators, non-ASCII characters as UTF-8, bytes as base64, other unknown objects as
str(o). Where orjson cannot match, the message is encoded by the standard library instead:
integers beyond 64 bits (varints, JSON numbers in RocketMQ headers), dict keys that are not str,
strings with lone surrogates, nesting deeper than orjson's limit, texts of more than LONG_TEXT
characters (orjson crashes when the room it reserves for one cannot be had), and floats orjson writes in
another form (1e-05 and 1e-07 are `0.00001` and `1e-7` for orjson; an orjson that writes other
floats otherwise, as those before 3.11.7 wrote 1e+16 as `1e16`, is found at import and then the
standard library encodes everything). orjson is imported with the first text encoded so.

Two things differ from the standard library on purpose: non-finite floats (NaN, ±inf from a
float64 on the wire) are null, never the invalid `NaN`/`Infinity`; and a lone surrogate in a
string is written as a `\\udXXX` escape, never as a raw surrogate that no UTF-8 writer can
encode. One difference is left: a member of a plain Enum (neither str nor int) is its value for
orjson, str(member) for json; kdissect puts none in its output.
"""

from __future__ import annotations

import binascii
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

from kdissect import accel
from kdissect.model import ARRAY, BYTES, ENUM, FLAGS, RAW, STRUCT, Column, Field, Message, Row
from kdissect.text import plural

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


def _cut(b: bytes, max_bytes: int) -> tuple[bytes, str]:
    """b cut at max_bytes (0: no cut), and the marker a cut value ends with ("" if none)."""
    if max_bytes > 0 and len(b) > max_bytes:
        return b[:max_bytes], f"…(+{plural(len(b) - max_bytes, 'byte')})"
    return b, ""


def bytes_value(b: bytes, max_bytes: int) -> str:
    """Bytes for JSON: standard base64 (the exact bytes), cut at max_bytes (0: no cut)."""
    part, cut = _cut(b, max_bytes)
    return binascii.b2a_base64(part, newline=False).decode("ascii") + cut


def bytes_text(b: bytes, max_bytes: int) -> str | None:
    """The text form of bytes for JSON (`<name>_text`): when they are printable UTF-8."""
    part, cut = _cut(b, max_bytes)
    text = printable(part)
    return None if text is None else text + cut


def text_or_hex(b: bytes, max_bytes: int) -> str:
    """Bytes as one readable string (tab-separated field values, Spark's record keys): printable
    text as is, else lowercase hex; cut at max_bytes (0: no cut)."""
    part, cut = _cut(b, max_bytes)
    text = printable(part)
    return (text if text is not None else part.hex()) + cut


_PLAIN = frozenset({int, str, bool, type(None)})
_BYTES_LIKE = frozenset({bytes, bytearray, memoryview})
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
        if conv is None or v is None:
            out[name] = v
            continue
        out[name] = conv(v, max_bytes)
        if conv is _bytes_or_field and type(v) is bytes:
            _add_text(out, name, v, max_bytes)
    return out


def _add_text(out: dict[str, Any], name: str, b: bytes, max_bytes: int) -> None:
    text = bytes_text(b, max_bytes)
    if text is not None:
        out[name + "_text"] = text


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
    grown: set[str] | None = None  # names whose list is this dict's own (made or copied here)
    for f in fields:
        name = f.name
        v = f.value
        plain = f.hint is None and f.children is None and type(v) in _PLAIN
        val = v if plain else field_value(f, max_bytes)
        if name in out:  # repeated names (e.g. unknown tags) become lists
            prev = out[name]
            if not (isinstance(prev, list) and f.hint != ARRAY):
                prev = out[name] = [prev]
            elif grown is None or name not in grown:
                prev = out[name] = list(prev)  # a field's own list value is never changed
            if grown is None:
                grown = set()
            grown.add(name)
            prev.append(val)
            continue
        out[name] = val
        if f.display is not None and f.hint in _NAMED:
            out[name + "_name"] = f.display
        elif type(v) in _BYTES_LIKE and f.hint != RAW and not f.children:
            _add_text(out, name, bytes(v), max_bytes)
    return out


def message_dict(m: Message, max_bytes: int = 256) -> dict[str, Any]:
    out = {
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
    if m.tls is not None:
        out["tls"] = m.tls.to_json()
    return out


def export_dict(m: Message, max_bytes: int = 256, positions: bool = False) -> dict[str, Any]:
    """message_dict (pure or compiled), and with `positions` each field's place in m.data
    (render/positions.py)."""
    out = message_dict(m, max_bytes)
    if positions:
        from kdissect.render.positions import message_positions

        out["positions"] = message_positions(m)
    return out


def export_json(m: Message, max_bytes: int = 256, positions: bool = False) -> bytes:
    """A message as `export` writes it: the JSON text of export_dict."""
    if positions:
        return dumps_bytes(export_dict(m, max_bytes, positions), may_hold_long_text(m))
    return message_json(m, max_bytes)


def export_line(m: Message, max_bytes: int = 256, positions: bool = False) -> bytes:
    """export_json and a newline: a line of `export --format jsonl`."""
    if positions:
        return export_json(m, max_bytes, positions) + b"\n"
    return message_line(m, max_bytes)


def _default(o: Any) -> Any:
    if isinstance(o, (bytes, bytearray, memoryview)):
        return binascii.b2a_base64(bytes(o), newline=False).decode()  # (base64.b64encode)
    # Subclasses that orjson leaves to default and json writes as their base type.
    if isinstance(o, float):
        return float(o)
    if isinstance(o, tuple):  # named tuples
        return list(o)
    return str(o)


# orjson's forms of the floats it writes unlike repr(): 1e-5 <= |x| < 1e-4 positionally
# ("0.00001"), 1e-9 <= |x| < 1e-6 with a one-digit exponent ("1e-7" for repr's "1e-07").
_SHORT_EXPONENT = re.compile(rb"e-[6-9](?:[,\]}]|\Z)")


def _odd_floats(out: bytes) -> bool:
    """Whether orjson's text `out` may hold a float written unlike repr() would: it contains
    "0.0000", or an exponent of one digit (e-6 to e-9) before `,`, `]`, `}` or the end. Strings
    that look so give a false alarm, which costs a second encoding, never a wrong one."""
    return b"0.0000" in out or (b"e-" in out and _SHORT_EXPONENT.search(out) is not None)


def _orjson_floats_known() -> bool:
    """Whether every float orjson writes unlike repr() is one _odd_floats flags, over the
    decades where notations switch and exponents of one to three digits."""
    import orjson

    values = [0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 0.1, 1 / 3]
    for e in (*range(-12, 22), -99, -100, -101, 99, 100, 101, -300, 300):
        values += [float(f"1e{e}"), float(f"-1.2345678901234567e{e}"), float(f"9.5e{e}")]
    return all(o == repr(v).encode() or _odd_floats(o)
               for v, o in zip(values, (orjson.dumps(v) for v in values), strict=True))


def _finite(v: Any) -> Any:
    """v with every NaN or infinite float replaced by None (dict keys as json writes them)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {_finite_key(k): _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def _finite_key(k: Any) -> Any:
    if isinstance(k, float) and not math.isfinite(k):
        return "NaN" if k != k else "Infinity" if k > 0 else "-Infinity"
    return k


def _stdlib_dumps(d: Any) -> str:
    """The standard library's text of d, non-finite floats as null."""
    import json

    try:
        return json.dumps(d, ensure_ascii=False, default=_default, separators=(",", ":"), allow_nan=False)
    except ValueError as e:
        if not str(e).startswith("Out of range float"):
            raise
    return json.dumps(_finite(d), ensure_ascii=False, default=_default, separators=(",", ":"),
                      allow_nan=False)


# orjson, and whether it writes floats as _odd_floats expects: found when the first text is
# encoded here (the compiled writer, message_json, writes nearly every message without them).
_ORJSON_FLOATS_KNOWN: bool | None = None
_orjson: Any = None
_ORJSON_OPTIONS = 0


def _load_orjson() -> None:
    global _ORJSON_FLOATS_KNOWN, _orjson, _ORJSON_OPTIONS
    import orjson

    # datetime, date, time and dataclasses go through _default (str(o)), as with json.dumps.
    _orjson, _ORJSON_OPTIONS = orjson, orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
    _ORJSON_FLOATS_KNOWN = _orjson_floats_known()


# orjson reserves room for about eight bytes a character of a string before writing it, and
# when that reservation fails it ends the process with a segmentation fault, not a MemoryError
# (orjson 3.13: a text of 126 million characters reserves 1 GB). A document holding a text
# longer than LONG_TEXT characters is written by the standard library, which sizes its output
# from the text and raises MemoryError when it cannot have it.
LONG_TEXT = 1 << 22


def _long_text(v: Any) -> bool:
    """Whether v holds a string (a dict key included) longer than LONG_TEXT characters. A walk
    without recursion: a document nested deeper than the stack is the encoder's to refuse."""
    todo = [v]
    while todo:
        x = todo.pop()
        if isinstance(x, str):
            if len(x) > LONG_TEXT:
                return True
        elif isinstance(x, dict):
            todo += x
            todo += x.values()
        elif isinstance(x, list | tuple):
            todo += x
    return False


def may_hold_long_text(m: Message) -> bool:
    """Whether the JSON of m may hold a text longer than LONG_TEXT characters: its texts come
    from its bytes and from what it decompressed (as hex, two characters a byte at most)."""
    return 2 * (len(m.data) + m.inflated) > LONG_TEXT


def dumps_bytes(d: Any, long: bool = True) -> bytes:
    """The compact JSON text of d as UTF-8 (see the module docstring). `long`: whether d may hold
    a text longer than LONG_TEXT characters (it is then searched for one)."""
    if _ORJSON_FLOATS_KNOWN is None:
        _load_orjson()
    if _ORJSON_FLOATS_KNOWN and not (long and _long_text(d)):
        try:
            out = _orjson.dumps(d, default=_default, option=_ORJSON_OPTIONS)
        except _orjson.JSONEncodeError:
            pass
        else:
            if not _odd_floats(out):
                return out
    return _stdlib_dumps(d).encode("utf-8", "backslashreplace")


def message_json(m: Message, max_bytes: int = 256) -> bytes:
    """The JSON text of message_dict(m, max_bytes), as dumps_bytes writes it (the compiled twin
    writes it straight from the tree)."""
    return dumps_bytes(message_dict(m, max_bytes), may_hold_long_text(m))


def message_line(m: Message, max_bytes: int = 256) -> bytes:
    """message_json(m, max_bytes) and a newline (the compiled twin writes it in the same buffer
    as the text, which is then not copied to add it)."""
    return message_json(m, max_bytes) + b"\n"


def dumps(d: Any) -> str:
    """The compact JSON text of d (see the module docstring)."""
    return dumps_bytes(d).decode("utf-8")


accel.bind(globals(), "kdissect.render._jsonout",
           ("printable", "bytes_value", "bytes_text", "text_or_hex", "row_dict", "field_value", "fields_dict",
            "message_dict", "message_json", "message_line", "_odd_floats"))
