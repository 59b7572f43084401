"""Python values -> column values: type coercion that never raises, JSON text for the generic
maps, dates, and the path lookups of the protocol structs."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from kdissect.render.jsonout import dumps
from kdissect.spark.sqltypes import SqlType

INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)


json_text = dumps  # a value as compact JSON text, as `kdissect export` writes it


_quote = json.encoder.encode_basestring
_SCALAR_TEXT: dict[type, Callable[[Any], str]] = {
    str: _quote,
    int: int.__repr__,
    bool: lambda v: "true" if v else "false",
    type(None): lambda v: "null",
}


def json_map(d: dict[str, Any]) -> list[tuple[str, str]]:
    """A JSON object as map entries: every value as JSON text (`get_json_object(v, '$')`).
    Strings, integers, booleans and nulls take a fast path; the text is json.dumps's."""
    out = []
    for k, v in d.items():
        fast = _SCALAR_TEXT.get(type(v))
        out.append((k, fast(v) if fast is not None else json_text(v)))
    return out


def _int_in(lo: int, hi: int) -> Callable[[Any], int | None]:
    def conv(v: Any) -> int | None:
        if isinstance(v, bool):
            return None
        if isinstance(v, str):
            v = _decimal(v)
        return v if isinstance(v, int) and lo <= v <= hi else None
    return conv


def _decimal(text: str) -> int | None:
    """A decimal integer written as text (a RocketMQ ext-field is text on the wire), else None:
    "--5", a superscript digit or thousands of digits are text that int() refuses."""
    text = text.strip()
    if not text.lstrip("-").isdigit():
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _string(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, (dict, list)):
        return json_text(v)
    return str(v)


def _double(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _boolean(v: Any) -> bool | None:
    return v if isinstance(v, bool) else None


def _string_array(v: Any) -> list[str] | None:
    if not isinstance(v, list):
        return None
    return [s for s in (_string(x) for x in v) if s is not None]


COERCE: dict[str, Callable[[Any], Any]] = {
    "int": _int_in(*INT32),
    "bigint": _int_in(*INT64),
    "string": _string,
    "double": _double,
    "boolean": _boolean,
}


def converter(t: SqlType) -> Callable[[Any], Any]:
    """The function that makes a value of column type t, or None when it is not one."""
    if isinstance(t, str):
        return COERCE[t]
    if t == ("array", "string"):
        return _string_array
    return lambda v: None


as_int = COERCE["int"]
as_bigint = COERCE["bigint"]
as_text = _string


EPOCH = datetime.date(1970, 1, 1)


@lru_cache(maxsize=4096)
def _day(days: int) -> datetime.date:
    return EPOCH + datetime.timedelta(days=days)


# The instants a TIMESTAMP or DATE column holds: Spark's years 1 to 9999 (UTC), in seconds since
# the epoch. A capture time outside them (pcapng's 64-bit timestamps reach much further) is null
# in those columns, as a record's timestamp past them is.
FIRST_TIME_S = -62_135_596_800.0  # 0001-01-01T00:00:00Z
END_TIME_S = 253_402_300_800.0  # 10000-01-01T00:00:00Z


def utc_date(ts: float) -> datetime.date | None:
    """The UTC date of a capture timestamp (the `date` partition value); None outside the
    years 1 to 9999."""
    if not FIRST_TIME_S <= ts < END_TIME_S:
        return None
    return _day(int(ts // 86400))


def micros(ts: float) -> int | None:
    """A capture timestamp in microseconds, as the TIMESTAMP columns and `ts_us` hold it; None
    outside the years 1 to 9999."""
    return round(ts * 1_000_000) if FIRST_TIME_S <= ts < END_TIME_S else None


def nanos(ts: float) -> int | None:
    """A capture timestamp in nanoseconds (`ts_ns`); None where a BIGINT cannot hold it (before
    1677 or after 2262)."""
    ns = round(ts * 1_000_000_000) if FIRST_TIME_S <= ts < END_TIME_S else None
    return ns if ns is not None and INT64[0] <= ns <= INT64[1] else None


Path = tuple[bool, tuple[str, ...]]


def parse_path(path: str) -> Path:
    """A dotted path of the fields object as (reads info, its parts): "info.<key>" reads info's
    <key>, whatever it holds; otherwise each part is a member, and "*" any member (the first
    that has the rest of the path)."""
    if path.startswith("info."):
        return True, (path[5:],)
    return False, tuple(path.split("."))


def walk(node: Any, parts: tuple[str, ...]) -> Any:
    for i, part in enumerate(parts):
        if not isinstance(node, dict):
            return None
        if part == "*":
            for child in node.values():
                hit = walk(child, parts[i + 1:])
                if hit is not None:
                    return hit
            return None
        node = node.get(part)
    return node
