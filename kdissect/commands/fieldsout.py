"""`export --format fields -e KEY ...`: one tab-separated line per message, like `tshark -T fields`.

Several values of one key (array elements, repeated fields) are joined by the aggregator (a
comma). `-E` options as in tshark: header=y|n, separator=/t|/s|<char>, aggregator=,|/s|<char>,
quote=d|s|n, occurrence=f|l|a (first, last, all values).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import IO, Any

from kdissect.errors import UsageError
from kdissect.filter.errors import FilterError, UnknownNameError
from kdissect.filter.evaluator import compile_field
from kdissect.filter.keys import PRESENT
from kdissect.model import ARRAY, RAW, STRUCT, Field, Message
from kdissect.render.jsonout import dumps, field_value, text_or_hex
from kdissect.text import shown

_CHARS = {"/t": "\t", "/s": " ", "/n": "\n"}
_QUOTES = {"d": '"', "s": "'", "n": ""}


@dataclass(frozen=True, slots=True)
class FieldsFormat:
    header: bool = False
    separator: str = "\t"
    aggregator: str = ","
    quote: str = ""
    occurrence: str = "a"


def parse_format(options: Iterable[str]) -> FieldsFormat:
    """-E name=value options -> FieldsFormat; UsageError on anything unknown."""
    kw: dict[str, Any] = {}
    for opt in options:
        name, sep, value = opt.partition("=")
        if not sep:
            raise UsageError(f"-E takes NAME=VALUE, not {opt!r}")
        if name == "header" and value in ("y", "n"):
            kw["header"] = value == "y"
        elif name in ("separator", "aggregator") and value:
            kw[name] = _CHARS.get(value, value)
        elif name == "quote" and value in _QUOTES:
            kw["quote"] = _QUOTES[value]
        elif name == "occurrence" and value in ("f", "l", "a"):
            kw["occurrence"] = value
        else:
            raise UsageError(f"-E: unknown option or value {opt!r} (header=y|n, separator=/t|/s|C, "
                             "aggregator=,|/s|C, quote=d|s|n, occurrence=f|l|a)")
    return FieldsFormat(**kw)


def scalar_text(v: Any) -> str:
    if v is None or v is PRESENT:
        return ""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (dict, list)):
        return dumps(v)
    return str(v)


def node_texts(f: Field, max_bytes: int) -> list[str]:
    """The text of one found field: array elements separately, structs as compact JSON."""
    if f.hint == ARRAY:
        return [t for c in f.children or () for t in node_texts(c, max_bytes)]
    if f.hint == STRUCT and f.value is PRESENT:
        return []
    if isinstance(f.value, (bytes, bytearray, memoryview)) and f.hint != RAW and not f.children:
        return [text_or_hex(bytes(f.value), max_bytes)]  # one readable cell: text, else hex
    return [scalar_text(field_value(f, max_bytes))]


class FieldsWriter:
    def __init__(self, keys: tuple[str, ...], fmt: FieldsFormat, max_bytes: int, out: IO[str]) -> None:
        if not keys:
            raise UsageError("--format fields needs at least one -e FIELD")
        self.keys = keys
        self.finders: list[Callable[[Message], list[Field]]] = []
        for k in keys:
            try:
                self.finders.append(compile_field(k))
            except FilterError as e:
                close = e.close if isinstance(e, UnknownNameError) else []
                hint = f"; did you mean {close[0]}?" if close else ""
                raise UsageError(f"-e {k}: {e.reason.rstrip('.')}{hint}") from None
        self.fmt = fmt
        self.max_bytes = max_bytes
        self.out = out
        if fmt.header:
            out.write(fmt.separator.join(keys) + "\n")

    def write(self, m: Message) -> None:
        fmt = self.fmt
        cells = []
        for find in self.finders:
            texts = [shown(t) for f in find(m) for t in node_texts(f, self.max_bytes)]
            if texts and fmt.occurrence != "a":
                texts = texts[:1] if fmt.occurrence == "f" else texts[-1:]
            cell = fmt.aggregator.join(texts)
            cells.append(f"{fmt.quote}{cell}{fmt.quote}" if fmt.quote and texts else cell)
        self.out.write(fmt.separator.join(cells) + "\n")
