"""A lenient JSON reader for RocketMQ headers and bodies, with byte offsets.

RocketMQ's Java side writes JSON with fastjson, which is not always strict JSON: map keys that
are numbers or whole objects are written bare (`{0:"host:10911"}`,
`{{"brokerName":"b","queueId":0,"topic":"t"}:17}`). This reader accepts those, plus single-quoted
strings, bare identifiers, trailing commas and missing commas, and records where every value
starts and ends so fields can point into the message bytes. It raises only BadValue (with the
offset) for input it cannot make sense of, and limits nesting depth.
"""

from __future__ import annotations

import re
from typing import Any

from kdissect.errors import BadValue

MAX_DEPTH = 64
# Values one document may hold: a bigger one is refused (BadValue) before it fills memory.
MAX_VALUES = 500_000
# Digits an integer is read exactly with, as many as a Java long has (as ext-field strings are read
# as integers): a longer one is a float, as numbers past 4,300 digits (int()'s limit) were, since
# int() of a string and str() of the int take time growing with the square of the digits.
MAX_INT_DIGITS = 19

_WS = re.compile(rb"[ \t\r\n\x00]*")
_SPACE = frozenset(b" \t\r\n\x00")
_NUM = re.compile(rb"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INT = re.compile(rb"-?\d+")
_BARE = re.compile(rb"[A-Za-z_$%@][\w$%@.\-]*")
_ESC = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.S)
_SIMPLE_ESC = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\", '"': '"', "'": "'"}
_WORDS: dict[bytes, Any] = {b"true": True, b"false": False, b"null": None}


class JNode:
    """One JSON value. kind: object (value: list of (key, key_start, JNode)), array (value:
    list of JNode), string, number, bool, null, word (a bare identifier kept as text)."""

    __slots__ = ("kind", "value", "start", "end")

    def __init__(self, kind: str, value: Any, start: int, end: int) -> None:
        self.kind = kind
        self.value = value
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"JNode({self.kind}, {self.value!r})"

    def get(self, key: str) -> JNode | None:
        """The last member named `key` of an object (the last one read wins)."""
        if self.kind != "object":
            return None
        found = None
        for k, _, node in self.value:
            if k == key:
                found = node
        return found

    def plain(self) -> Any:
        """The value as plain Python data (dicts keep the last duplicate key)."""
        if self.kind == "object":
            return {k: n.plain() for k, _, n in self.value}
        if self.kind == "array":
            return [n.plain() for n in self.value]
        return self.value


def _unescape(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    if "\\" not in text:
        return text

    def one(m: re.Match[str]) -> str:
        esc = m.group(1)
        if len(esc) == 5:
            return chr(int(esc[1:], 16))
        return _SIMPLE_ESC.get(esc, esc)

    out = _ESC.sub(one, text)
    # Join UTF-16 surrogate pairs written as two \u escapes; lone halves become U+FFFD.
    return out.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _string_end(buf: bytes, pos: int) -> int:
    """Where the string that opens at buf[pos] (a quote) closes: the next same quote not escaped
    by an odd run of backslashes, or -1. (A regular expression of escapes repeated keeps a
    backtracking point for each one, tens of bytes an escape.)"""
    quote = buf[pos : pos + 1]
    at = pos + 1
    while True:
        close = buf.find(quote, at)
        if close < 0:
            return -1
        run = close - at - len(buf[at:close].rstrip(b"\\"))
        if run % 2 == 0:
            return close
        at = close + 1


def _number(raw: bytes) -> int | float:
    if len(raw) - (raw[0] == 0x2D) <= MAX_INT_DIGITS and _INT.fullmatch(raw):
        return int(raw)
    try:
        return float(raw)
    except ValueError:
        return 0.0


class _Parser:
    __slots__ = ("buf", "end", "base", "left")

    def __init__(self, buf: bytes, base: int) -> None:
        self.buf = buf
        self.end = len(buf)
        self.base = base
        self.left = MAX_VALUES

    def fail(self, what: str, pos: int) -> BadValue:
        return BadValue(f"JSON: {what} at byte {pos}", self.base + pos)

    def ws(self, pos: int) -> int:
        if pos < self.end and self.buf[pos] in _SPACE:
            return _WS.match(self.buf, pos).end()  # type: ignore[union-attr]  # (* always matches)
        return pos

    def value(self, pos: int, depth: int) -> tuple[JNode, int]:
        pos = self.ws(pos)
        if pos >= self.end:
            raise self.fail("value expected, input ended", pos)
        self.left -= 1
        if self.left < 0:
            raise self.fail(f"more than {MAX_VALUES} values", pos)
        c = self.buf[pos]
        if c in b"{[":
            if depth >= MAX_DEPTH:
                raise self.fail(f"nesting deeper than {MAX_DEPTH}", pos)
            return self.object(pos, depth + 1) if c == 0x7B else self.array(pos, depth + 1)
        return self.scalar(pos)

    def scalar(self, pos: int) -> tuple[JNode, int]:
        buf = self.buf
        c = buf[pos]
        if c in b"\"'":
            close = _string_end(buf, pos)
            if close < 0:
                raise self.fail("unterminated string", pos)
            return JNode("string", _unescape(buf[pos + 1 : close]), self.base + pos, self.base + close + 1), close + 1
        m = _NUM.match(buf, pos)
        if m is not None:
            return JNode("number", _number(m.group()), self.base + pos, self.base + m.end()), m.end()
        m = _BARE.match(buf, pos)
        if m is not None:
            word = m.group()
            if word in _WORDS:
                v = _WORDS[word]
                kind = "null" if v is None else "bool"
                return JNode(kind, v, self.base + pos, self.base + m.end()), m.end()
            return JNode("word", word.decode("ascii", "replace"), self.base + pos, self.base + m.end()), m.end()
        raise self.fail(f"unexpected byte 0x{c:02x}", pos)

    def key(self, pos: int, depth: int) -> tuple[str, int]:
        node, nxt = self.value(pos, depth)
        if node.kind in ("object", "array"):
            # fastjson writes a map whose keys are objects with the key object inline.
            return self.buf[node.start - self.base : node.end - self.base].decode("utf-8", "replace"), nxt
        if node.kind == "number":  # as written (a long one is a float: 1e+25 is not its key)
            return self.buf[node.start - self.base : node.end - self.base].decode("ascii"), nxt
        v = node.value
        if isinstance(v, bool):
            return ("true" if v else "false"), nxt
        return ("null" if v is None else str(v)), nxt

    def object(self, pos: int, depth: int) -> tuple[JNode, int]:
        start = pos
        pos += 1
        members: list[tuple[str, int, JNode]] = []
        done = pos  # where the last complete member ends
        key: str | None = None
        key_pos = pos
        try:
            while True:
                pos = self.ws(pos)
                if pos >= self.end:
                    raise self.fail("unterminated object", start)
                c = self.buf[pos]
                if c == 0x7D:  # }
                    return JNode("object", members, self.base + start, self.base + pos + 1), pos + 1
                if c == 0x2C:  # , (also tolerates trailing and doubled commas)
                    pos += 1
                    continue
                key_pos = pos
                key, pos = self.key(key_pos, depth)
                pos = self.ws(pos)
                if pos >= self.end or self.buf[pos] not in b":=":
                    raise self.fail("':' expected after an object key", pos)
                node, pos = self.value(pos + 1, depth)
                members.append((key, self.base + key_pos, node))
                key, done = None, pos
        except BadValue as e:
            inner = e.partial
            if key is not None and isinstance(inner, JNode):
                members.append((key, self.base + key_pos, inner))
                done = inner.end - self.base
            e.partial = JNode("object", members, self.base + start, self.base + done)
            raise

    def array(self, pos: int, depth: int) -> tuple[JNode, int]:
        start = pos
        pos += 1
        items: list[JNode] = []
        done = pos
        try:
            while True:
                pos = self.ws(pos)
                if pos >= self.end:
                    raise self.fail("unterminated array", start)
                c = self.buf[pos]
                if c == 0x5D:  # ]
                    return JNode("array", items, self.base + start, self.base + pos + 1), pos + 1
                if c == 0x2C:
                    pos += 1
                    continue
                node, pos = self.value(pos, depth)
                items.append(node)
                done = pos
        except BadValue as e:
            inner = e.partial
            if isinstance(inner, JNode):
                items.append(inner)
                done = inner.end - self.base
            e.partial = JNode("array", items, self.base + start, self.base + done)
            raise


def parse(buf: bytes, base: int = 0) -> tuple[JNode, int]:
    """Parse one JSON value from buf; returns it and the number of bytes after it that are not
    whitespace (trailing garbage, for the caller to report). Offsets are buf offsets + base. An
    object or array that breaks part-way (cut short) raises with its members read before the
    break as the BadValue's `partial` (a JNode whose `end` is where the last whole one ends)."""
    p = _Parser(buf, base)
    node, pos = p.value(0, 0)
    pos = p.ws(pos)
    return node, len(buf) - pos


def looks_like_json(buf: bytes) -> bool:
    """Whether buf starts (after whitespace) with an object or array."""
    m = _WS.match(buf)
    pos = m.end() if m else 0
    return pos < len(buf) and buf[pos] in b"{["
