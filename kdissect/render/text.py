"""Terminal rendering with rich: the packet-list line, the field tree (-V) and the hex dump (-x).

Renderers never special-case a protocol: they read Message, Field hints and diagnostics only.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import IO, TYPE_CHECKING

from kdissect import accel
from kdissect.model import (
    ARRAY,
    ENUM,
    FLAGS,
    HEX,
    RAW,
    STRUCT,
    TIME_MS,
    UNITS,
    Diagnostic,
    Field,
    Message,
    Severity,
    format_ms,
    secret_ranges,
)
from kdissect.render.jsonout import printable
from kdissect.render.timecol import TimeColumn
from kdissect.text import plural, shown, value_word

if TYPE_CHECKING:  # rich is loaded only for a colour terminal
    from rich.console import Console
    from rich.text import Text

SEVERITY_STYLE = {
    Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.NOTE: "blue", Severity.CHAT: "dim",
}


def rtt_text(m: Message) -> str:
    if m.match is None or m.match.rtt is None or m.kind != "response":
        return ""
    ms = m.match.rtt * 1000.0
    return f" ({ms:.1f} ms)" if ms >= 0.1 else f" ({ms * 1000:.0f} µs)"


LOCK = "🔒 "  # before the summary of a message decrypted from TLS


def summary_plain(m: Message, when: str, width_addr: int = 21) -> str:
    """The packet-list line as plain text (the same columns as summary_line); `when` is the
    time column (TimeColumn.text)."""
    return (f"{m.frame:>6} {when} {m.src:>{width_addr}} → {m.dst:<{width_addr}} "
            f"{m.protocol.upper():<9} {LOCK if m.tls is not None else ''}{shown(m.summary)}{rtt_text(m)}")


def summary_line(m: Message, when: str, width_addr: int = 21, proto_style: str = "bold") -> Text:
    """Like Wireshark's packet list: number, time (`when`: TimeColumn.text), src → dst,
    protocol, summary."""
    from rich.text import Text

    t = Text()
    t.append(f"{m.frame:>6} ", style="dim")
    t.append(f"{when} ")
    t.append(f"{m.src:>{width_addr}} → {m.dst:<{width_addr}} ")
    t.append(f"{m.protocol.upper():<9} ", style=proto_style)
    if m.tls is not None:
        t.append(LOCK)
    worst = m.worst
    style = SEVERITY_STYLE[worst] if worst in (Severity.ERROR, Severity.WARNING) else ""
    t.append(shown(m.summary) + rtt_text(m), style=style)
    return t


def value_text(f: Field, max_bytes: int) -> str:
    """A scalar field's value as the tree (-V) shows it: bytes as text or hex with their count,
    integers by their hint (names, hex, a date, a unit), true/false/null as JSON writes them."""
    v = f.value
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes_text(bytes(v), max_bytes, f.hint == RAW)
    if type(v) is int:
        return int_text(f, v)
    if f.hint in (ENUM, FLAGS) and f.display is not None:
        return f"{f.display} ({value_word(v)})"
    if isinstance(v, str):
        return str_text(v, max_bytes)
    return value_word(v)


def str_text(s: str, max_bytes: int) -> str:
    """A string quoted, cut at max_bytes characters (0: never) as bytes are:
    `'abc' …(+1 character)`."""
    if max_bytes <= 0 or len(s) <= max_bytes:
        return repr(s)
    return f"{s[:max_bytes]!r} …(+{plural(len(s) - max_bytes, 'character')})"


def bytes_text(b: bytes, max_bytes: int, raw: bool) -> str:
    """Printable text quoted, else hex (always hex when `raw`), cut at max_bytes (0: never),
    then the count: `'abc' [3 bytes]`, `01 02 …(+1 byte) [3 bytes]`."""
    cut = max_bytes > 0 and len(b) > max_bytes
    part = b[:max_bytes] if cut else b
    text = None if raw else printable(part)
    shown = repr(text) if text is not None else part.hex(" ")
    suffix = f" …(+{plural(len(b) - max_bytes, 'byte')})" if cut else ""
    return f"{shown}{suffix} [{plural(len(b), 'byte')}]"


def int_text(f: Field, v: int) -> str:
    """An integer by its hint: `transactional (16)` for an enum, `0x0010 (transactional)` for
    flags (Wireshark's forms), `0x1a2b3c4d`, a date, `30000 ms`."""
    hint = f.hint
    if hint == ENUM:
        return str(v) if f.display is None else f"{f.display} ({v})"
    if hint == FLAGS:
        shown = hex_text(v, f.length)
        return f"{shown} ({f.display})" if f.display and v else shown
    if hint == HEX:
        return hex_text(v, f.length)
    if hint == TIME_MS:
        when = f.display or format_ms(v)
        return f"{when} ({v})" if when else str(v)
    unit = UNITS.get(hint) if hint is not None else None
    return f"{v} {unit}" if unit else str(v)


_WIDTHS = (1, 2, 4, 8)  # the byte sizes of fixed-width integers


def hex_text(v: int, size: int) -> str:
    """`0x` and the hex digits of v. A value of 1, 2 or 4 bytes is padded to its width, as
    Wireshark's BASE_HEX does (`0x0010`, `0x1a2b3c4d`); a 64-bit or variable-length one has no
    leading zeros, as ZooKeeper writes zxids and session ids (`0x100000003`). A negative value
    is its two's complement in its width (64 bits when the size is not a fixed width)."""
    fixed = size in _WIDTHS
    if v < 0:
        bits = max(8 * size if fixed else 64, v.bit_length() + 1)
        v &= (1 << bits) - 1
    digits = 2 * size if fixed and size < 8 else 1
    return f"0x{v:0{digits}x}"


def field_label(f: Field, max_bytes: int, element: int | None = None) -> str:
    """The line the tree (-V) prints for a field, without its indent: a structure's name, an
    array's name and size (`tags [2]`), else `name: value`; an element of an array (`element`:
    its index) as `[0] value`, or `[0]` and its label for a structure."""
    label = f.label or f.name
    if 0 < max_bytes < len(label):  # (a name can be data: a JSON key, a message property)
        label = label[:max_bytes] + "…"
    if element is not None:
        if f.hint == STRUCT:
            return f"[{element}] {label}" if f.label else f"[{element}]"
        return f"[{element}] {value_text(f, max_bytes)}"
    if f.hint == STRUCT:
        return f"{label}"
    if f.hint == ARRAY:
        return f"{label} [{len(f.children or [])}]"
    return f"{label}: {value_text(f, max_bytes)}"


def tree_lines(fields: list[Field], max_bytes: int, indent: int = 1) -> list[str]:
    out: list[str] = []
    pad = "    " * indent
    for f in fields:
        out.append(pad + shown(field_label(f, max_bytes)))
        if f.hint == STRUCT:
            out.extend(tree_lines(f.children or [], max_bytes, indent + 1))
        elif f.hint == ARRAY:
            for i, c in enumerate(f.children or []):
                out.append(f"{pad}    {shown(field_label(c, max_bytes, i))}")
                if c.hint == STRUCT:
                    out.extend(tree_lines(c.children or [], max_bytes, indent + 2))
        elif f.children:
            out.extend(tree_lines(f.children, max_bytes, indent + 1))
    return out


def hexdump(data: bytes, width: int = 16, hidden: list[tuple[int, int]] | None = None) -> Iterator[str]:
    """Offset, hex and ASCII columns, a line at a time; the bytes of the `hidden` (offset,
    length) ranges (a message's secret_ranges) show as `**` and `*`."""
    mask = bytearray(len(data)) if hidden else None
    if mask is not None:
        for start, size in hidden or ():
            lo, hi = max(start, 0), min(start + size, len(data))
            if lo < hi:
                mask[lo:hi] = b"\x01" * (hi - lo)
    for off in range(0, len(data), width):
        chunk = data[off : off + width]
        if mask is not None and any(mask[off : off + width]):
            cmask = mask[off : off + width]
            hx = " ".join("**" if h else f"{b:02x}" for b, h in zip(chunk, cmask, strict=True))
            asc = "".join("*" if h else chr(b) if 32 <= b < 127 else "." for b, h in zip(chunk, cmask, strict=True))
        else:
            hx = " ".join(f"{b:02x}" for b in chunk)
            asc = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        yield f"    {off:04x}  {hx:<{width * 3}} {asc}"


DUMP_BLOCK = 4096  # hex dump lines written at a time: a message of 100 MB is not dumped in memory


def _blocks(lines: Iterator[str]) -> Iterator[str]:
    """The lines joined DUMP_BLOCK at a time."""
    while block := list(itertools.islice(lines, DUMP_BLOCK)):
        yield "\n".join(block)


class TextRenderer:
    """Prints messages one line each, with the optional tree (-V) and hex dump (-x). On a colour
    terminal through rich; otherwise (no console, or one without colours) plain text is written
    straight to the file, which is many times faster for the millions of lines a verbose dump of
    a large capture has."""

    def __init__(self, console: Console | None, verbose: bool = False, hexdump: bool = False,
                 max_bytes: int = 256, styles: Mapping[str, str] | None = None,
                 out: IO[str] | None = None, clock: TimeColumn | None = None) -> None:
        self.console = console
        self.styles = styles or {}  # protocol name -> the colour of its protocol column
        self.verbose = verbose
        self.hex = hexdump
        self.max_bytes = max_bytes
        self.clock = clock or TimeColumn()  # the time column (tshark's -t)
        self.plain = console is None or console.no_color or console.color_system is None
        self.out = out if out is not None or console is None else console.file

    def render(self, m: Message) -> None:
        when = self.clock.text(m)
        details = self._details(m) if self.verbose else []
        dump = _blocks(hexdump(m.data, hidden=secret_ranges(m))) if self.hex and m.data else None
        if self.plain:
            out = self.out
            assert out is not None
            if not details and dump is None:  # the packet list alone
                out.write(summary_plain(m, when) + "\n")
                return
            out.write("\n".join([summary_plain(m, when), *details]) + "\n")
            for block in dump or ():
                out.write(block + "\n")
            if details or dump:
                out.write("\n")
            return
        from rich.text import Text

        c = self.console
        assert c is not None
        line = summary_line(m, when, proto_style=self.styles.get(m.protocol, "bold"))
        c.print(line, soft_wrap=True, highlight=False)
        if details:
            c.print(Text("\n".join(details)), soft_wrap=True, highlight=False)
            for d in m.diagnostics:
                c.print(Text(diag_text(d), style=SEVERITY_STYLE.get(d.severity, "")), soft_wrap=True)
        for block in dump or ():
            c.print(Text(block, style="dim"), soft_wrap=True, highlight=False)
        if details or dump:
            c.print()

    def _details(self, m: Message) -> list[str]:
        frames = ", ".join(str(f) for f in m.frames[:20]) + (" …" if len(m.frames) > 20 else "")
        out = [f"    frames: {frames}  stream: {m.stream}  length: {len(m.data)}"]
        if m.tls is not None:
            out.append(f"    decrypted from {shown(m.tls.text())}")
        if m.match is not None:
            rtt = "" if m.match.rtt is None else f" after {m.match.rtt * 1000:.3f} ms"
            out.append(f"    {m.match.kind} in frame {m.match.frame}{rtt}")
        out.extend(tree_lines(m.fields, self.max_bytes))
        if self.plain:
            out.extend(diag_text(d) for d in m.diagnostics)
        return out


def diag_text(d: Diagnostic) -> str:
    """A diagnostic's line under the tree (-V), indented: `[severity/group] key @offset: text`."""
    at = f" @{d.offset}" if d.offset >= 0 else ""
    return f"    [{d.severity.value}/{d.group.value}] {d.key}{at}: {shown(d.message)}"



accel.bind(globals(), "kdissect.render._text", ("rtt_text", "summary_plain"))
