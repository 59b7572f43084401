"""What the detail panes show of one message: the field tree as rows (labels worded as
`read -V` words them, byte spans, "apply as filter" expressions, copyable values) and the hex
dump as lines (secrets masked as `read -x` masks them).

Rows are made for the visible part of the tree only (`expanded`), walking without recursion,
so a message of a hundred thousand records costs its top level until it is opened.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, overload

from kdissect.cliutil import TEXT_MAX_BYTES
from kdissect.filter import FilterError, compile_filter
from kdissect.filter.lexer import WORD_CHARS
from kdissect.filter.nodes import STRING_LIT, Literal
from kdissect.filter.printer import literal_text
from kdissect.model import ARRAY, SECRET, STRUCT, Field, Message, secret_ranges
from kdissect.render.jsonout import printable
from kdissect.render.text import diag_text, field_label

MAX_FILTER_BYTES = 1_024  # longer byte and text values get an existence filter instead
MAX_DEPTH = 256  # deeper nodes of a hostile tree are not shown


@dataclass(frozen=True, slots=True)
class TreeRow:
    id: str  # stable path id ("0.3.1"; "frames", "match", "tls", "diag.2" for the message's own rows)
    depth: int
    label: str  # "name: value (display)" as `read -V` prints it
    key: str  # the dotted field key ("kafka.topics.partitions.index")
    filter: str | None  # "Apply as Filter": an expression this message matches; None when there is none
    value_text: str  # the value as copied to the clipboard (whole, not cut)
    span: tuple[int, int] | None  # (offset, length) in Message.data, when known
    has_children: bool
    style: str | None  # diagnostic severity or None


@dataclass(frozen=True, slots=True)
class HexLine:
    offset: int
    cells: tuple[str, ...]  # two hex digits a byte, "**" for a masked one
    ascii: str  # one character a byte ("." unprintable, "*" masked)
    highlighted: tuple[int, ...]  # the cells (0-based within the line) of the highlighted span

    @property
    def text(self) -> str:
        """The line as `read -x` prints it (without its indent)."""
        width = max(len(self.cells), 16)
        return f"{self.offset:04x}  {' '.join(self.cells):<{width * 3}} {self.ascii}"


# -- the field tree ------------------------------------------------------------------------


@dataclass(slots=True)
class _Node:
    """A field to show: its row id, depth, key, label form."""

    field: Field
    id: str
    depth: int
    key: str
    element: int | None  # its index when it is an element of an array


def tree_rows(m: Message, expanded: set[str] | None, max_bytes: int = TEXT_MAX_BYTES) -> list[TreeRow]:
    """The visible rows: the message's own rows (frames, match, TLS), its fields, its
    diagnostics; children only of the ids in `expanded` (None: everything open). `max_bytes`
    cuts values in labels as `read -V --max-bytes` does."""
    out = _header_rows(m)
    stack = [_Node(f, str(n), 0, f"{m.protocol}.{f.name}", None) for n, f in enumerate(_kids(m.fields))]
    stack.reverse()
    while stack:
        node = stack.pop()
        row = _field_row(node, max_bytes)
        out.append(row)
        if row.has_children and node.depth < MAX_DEPTH and (expanded is None or node.id in expanded):
            stack.extend(reversed(list(_children(node))))
    out.extend(_diag_rows(m))
    return out


def find_in_tree(m: Message, text: str, max_bytes: int = TEXT_MAX_BYTES) -> list[str]:
    """The ids of the rows (of the whole tree) whose label contains `text`, case ignored; a
    row's ancestors are the prefixes of its id."""
    needle = text.casefold()
    if not needle:
        return []
    return [r.id for r in tree_rows(m, None, max_bytes) if needle in r.label.casefold()]


def ancestors(row_id: str) -> list[str]:
    """The ids to expand so that a row shows ("0.3.1": "0", "0.3")."""
    parts = row_id.split(".")
    if not parts[0].isdigit():
        return []
    return [".".join(parts[:k]) for k in range(1, len(parts))]


def _kids(fields: Any) -> list[Field]:
    if not isinstance(fields, (list, tuple)):
        return []
    return [f for f in fields if isinstance(f, Field)]


def _children(node: _Node) -> Iterator[_Node]:
    f = node.field
    is_array = f.hint == ARRAY
    for n, c in enumerate(_kids(f.children)):
        key = node.key if is_array else f"{node.key}.{c.name}"
        yield _Node(c, f"{node.id}.{n}", node.depth + 1, key, n if is_array else None)


def _field_row(node: _Node, max_bytes: int) -> TreeRow:
    f = node.field
    kids = bool(_kids(f.children))
    span = (f.offset, f.length) if isinstance(f.offset, int) and f.offset >= 0 and f.length >= 0 else None
    label = _label(node, max_bytes)
    return TreeRow(node.id, node.depth, label, node.key, _filter(node), _copy_text(f, label),
                   span, kids, None)


def _label(node: _Node, max_bytes: int) -> str:
    """The line `read -V` prints for the field (render/text.py field_label), without its indent."""
    f = node.field
    try:
        return field_label(f, max_bytes, node.element)
    except Exception:  # a value of a type no renderer expects
        return f"{f.label or f.name}: {f.value!r}"


def _copy_text(f: Field, label: str) -> str:
    v = f.value
    if f.hint in (STRUCT, ARRAY) or f.hint == SECRET:
        return label
    if isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v)
        text = printable(b)
        return text if text is not None else b.hex()
    if isinstance(v, bool) or v is None:
        return {True: "true", False: "false", None: "null"}[v]
    return str(v)


def _filter(node: _Node) -> str | None:
    """`key == value` in the filter language (key alone for a structure, an array, a
    redacted or long value), when the key is a name the filter compiler knows."""
    key = node.key
    if not _known_key(key):
        return None
    f = node.field
    if f.hint in (STRUCT, ARRAY, SECRET) or f.value is None:
        return key
    literal = filter_literal(f.value)
    if literal is None:
        return key
    expr = f"{key} == {literal}"
    return expr if isinstance(f.value, (int, float, bytes, bytearray, memoryview)) or _compiles(expr) else key


def filter_literal(v: Any) -> str | None:
    """A value as a filter literal that `==` matches it with: true/false, a number, a quoted
    string, bytes as quoted text when they are printable UTF-8 else as hex pairs (01:02:03);
    None for what cannot be written (NaN, infinity, a value too long)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if v == v and v not in (float("inf"), float("-inf")) else None
    if isinstance(v, str):
        return None if len(v) > MAX_FILTER_BYTES else literal_text(Literal(STRING_LIT, v, 0))
    if isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v)
        if len(b) > MAX_FILTER_BYTES:
            return None
        text = printable(b)
        if text is not None and text.encode("utf-8", "surrogatepass") == b:
            return literal_text(Literal(STRING_LIT, text, 0))
        return b.hex(":") if b else "\"\""
    return None


@lru_cache(maxsize=4096)
def _known_key(key: str) -> bool:
    """Whether a key is written in filter words and the filter compiler accepts it."""
    if not key or any(c not in WORD_CHARS for c in key):
        return False
    return _compiles(key)


@lru_cache(maxsize=4096)
def _compiles(expr: str) -> bool:
    try:
        compile_filter(expr)
    except (FilterError, ValueError, RecursionError):
        return False
    return True


def _header_rows(m: Message) -> list[TreeRow]:
    """The lines `read -V` prints above the tree: frames, stream and length; TLS; the match."""
    frames = ", ".join(str(f) for f in m.frames[:20]) + (" …" if len(m.frames) > 20 else "")
    label = f"frames: {frames}  stream: {m.stream}  length: {len(m.data)}"
    rows = [TreeRow("frames", 0, label, "kdissect.stream", f"kdissect.stream == {m.stream}", label,
                    (0, len(m.data)) if m.data else None, False, None)]
    if m.tls is not None:
        text = f"decrypted from {m.tls.text()}"
        rows.append(TreeRow("tls", 0, text, "kdissect.stream", f"kdissect.stream == {m.stream}", text,
                            None, False, None))
    if m.match is not None:
        rtt = "" if m.match.rtt is None else f" after {m.match.rtt * 1000:.3f} ms"
        text = f"{m.match.kind} in frame {m.match.frame}{rtt}"
        rows.append(TreeRow("match", 0, text, "kdissect.match_frame",
                            f"kdissect.match_frame == {m.match.frame}", str(m.match.frame), None, False, None))
    return rows


def _diag_rows(m: Message) -> list[TreeRow]:
    out = []
    for n, d in enumerate(m.diagnostics):
        text = diag_text(d).strip()
        span = (d.offset, 0) if d.offset >= 0 else None
        out.append(TreeRow(f"diag.{n}", 0, text, "kdissect.diag.key",
                           f"kdissect.diag.key == {literal_text(Literal(STRING_LIT, d.key, 0))}", d.message,
                           span, False, d.severity.value))
    return out


# -- the hex dump ----------------------------------------------------------------------------


def hex_lines(data: bytes | Message, highlight: tuple[int, int] | None, width: int = 16,
              hidden: list[tuple[int, int]] | None = None) -> HexLines:
    """The dump of `data` in lines of `width` bytes, the cells of `highlight` (offset, length)
    marked. Given a Message, its bytes with its secrets masked (model.secret_ranges, as
    `read -x`); given bytes, those of the `hidden` ranges masked. The lines are made as they
    are read: a message of 16 MB is a million lines (85 s and 1.1 GB made at once)."""
    if isinstance(data, Message):
        hidden = _secrets(data)
        data = data.data
    return HexLines(data, highlight, max(1, width), _mask(len(data), hidden or []))


_HEX = tuple(f"{b:02x}" for b in range(256))
_ASCII = "".join(chr(b) if 32 <= b < 127 else "." for b in range(256))


class HexLines(Sequence[HexLine]):
    """The lines of a hex dump, each made when it is read."""

    def __init__(self, data: bytes, highlight: tuple[int, int] | None, width: int, mask: bytearray | None) -> None:
        self.data = data
        self.width = width
        self.mask = mask
        self.lo, self.hi = _clip(highlight, len(data))

    def __len__(self) -> int:
        return -(-len(self.data) // self.width)

    @overload
    def __getitem__(self, i: int) -> HexLine: ...

    @overload
    def __getitem__(self, i: slice) -> list[HexLine]: ...

    def __getitem__(self, i: int | slice) -> HexLine | list[HexLine]:
        if isinstance(i, slice):
            return [self.line(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("hex line out of range")
        return self.line(i)

    def line(self, i: int) -> HexLine:
        off = i * self.width
        chunk = self.data[off : off + self.width]
        mask = self.mask
        if mask is not None and any(mask[off : off + len(chunk)]):
            cmask = mask[off : off + len(chunk)]
            cells = tuple("**" if h else _HEX[b] for b, h in zip(chunk, cmask, strict=True))
            chars = "".join("*" if h else _ASCII[b] for b, h in zip(chunk, cmask, strict=True))
        else:
            cells = tuple(_HEX[b] for b in chunk)
            chars = "".join(_ASCII[b] for b in chunk)
        lo, hi = self.lo, self.hi
        lit = tuple(range(max(lo, off) - off, min(hi, off + len(chunk)) - off)) if lo < hi else ()
        return HexLine(off, cells, chars, lit)


def _secrets(m: Message) -> list[tuple[int, int]]:
    """m's secret ranges; all of its bytes when its tree is too broken to tell."""
    try:
        return secret_ranges(m)
    except Exception:
        return [(0, len(m.data))]


def _mask(size: int, hidden: list[tuple[int, int]]) -> bytearray | None:
    if not hidden:
        return None
    mask = bytearray(size)
    for start, n in hidden:
        a, b = max(start, 0), min(start + n, size)
        if a < b:
            mask[a:b] = b"\x01" * (b - a)
    return mask


def _clip(span: tuple[int, int] | None, size: int) -> tuple[int, int]:
    if span is None:
        return 0, 0
    start, n = span
    return max(start, 0), min(start + max(n, 0), size)
