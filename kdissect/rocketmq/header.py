"""The RemotingCommand header in its two serializations: JSON (type 0) and the compact
ROCKETMQ binary layout (type 1). Both decode to one Header; fields carry byte offsets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kdissect.dissect.base import MAX_ELEMENTS
from kdissect.errors import BadLength, BadValue, DecodeError, Truncated
from kdissect.model import Diagnostic, Field
from kdissect.rocketmq.diagnostics import DIAGNOSTICS
from kdissect.rocketmq.jfields import named, to_field
from kdissect.rocketmq.ljson import JNode, parse
from kdissect.rocketmq.tables import LANGUAGE_CODES
from kdissect.text import plural
from kdissect.wire.reader import WireReader


@dataclass(slots=True)
class ExtEntry:
    """One ext-field as read: its wire key, value (str, or a JSON number/bool/null), where (key
    and value), and where its value alone is (inside the quotes of a JSON string)."""

    key: str
    value: Any
    offset: int
    length: int
    value_offset: int = -1
    value_length: int = 0


@dataclass(slots=True)
class Header:
    serialize_type: int
    code: int | None = None
    language: int | str | None = None  # the code byte, or the JSON name
    version: int | None = None
    opaque: int | None = None
    flag: int = 0
    remark: str | None = None
    ext: list[ExtEntry] = field(default_factory=list)
    # Scalar header fields (name -> Field) in wire order, and JSON keys kdissect does not know.
    fields: dict[str, Field] = field(default_factory=dict)
    extra: list[Field] = field(default_factory=list)
    ext_offset: int = -1
    ext_length: int = 0
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def language_code(self) -> int | None:
        if isinstance(self.language, int):
            return self.language
        return LANGUAGE_CODES.get(self.language) if isinstance(self.language, str) else None

    def ext_value(self, key: str) -> Any:
        """The last value of an ext-field by wire key, or None."""
        found = None
        for e in self.ext:
            if e.key == key:
                found = e.value
        return found


# -- JSON -----------------------------------------------------------------------------------

_JSON_INT_KEYS = {"code": "code", "version": "version", "opaque": "opaque", "flag": "flag"}


def _json_scalar(h: Header, key: str, node: JNode) -> bool:
    """Store a known scalar header key; False when the key is not one."""
    if key in _JSON_INT_KEYS:
        if node.kind != "number" or not isinstance(node.value, int):
            what = "an integer of 19 digits at most" if node.kind == "number" else "an integer"
            h.diagnostics.append(DIAGNOSTICS("header_type", f"header {key} is not {what}", node.start))
            return False
        setattr(h, _JSON_INT_KEYS[key], node.value)
    elif key == "language":
        v = node.value
        h.language = v if isinstance(v, (int, str)) and not isinstance(v, bool) else None
    elif key == "remark":
        h.remark = None if node.value is None else str(node.value)
    else:
        return False
    h.fields[key] = Field(key, node.value, node.start, node.end - node.start)
    return True


def _json_ext(h: Header, node: JNode, buf: bytes, base: int) -> None:
    h.ext_offset, h.ext_length = node.start, node.end - node.start
    if node.kind == "null":
        return
    if node.kind != "object":
        h.diagnostics.append(DIAGNOSTICS("header_type", "extFields is not an object", node.start))
        return
    for i, (key, key_start, v) in enumerate(node.value):
        if i == MAX_ELEMENTS:
            _ext_limit(h, key_start)
            break
        # A nested value (not written by RocketMQ itself) is kept as its JSON text.
        value = v.value if v.kind not in ("object", "array") else buf[v.start - base : v.end - base].decode("utf-8", "replace")
        inner = 1 if v.kind == "string" else 0
        h.ext.append(ExtEntry(key, value, key_start, v.end - key_start, v.start + inner, v.end - v.start - 2 * inner))


def _ext_limit(h: Header, at: int) -> None:
    h.diagnostics.append(DIAGNOSTICS("ext_limit", f"more than {MAX_ELEMENTS} ext-fields: the rest are "
                                     "not decoded", at))


def decode_json(buf: bytes, base: int) -> Header:
    """A JSON header; buf is the header bytes, base their offset in the message. A header that
    breaks part-way (cut short) raises with the Header of the members read before the break as
    the error's `partial`, its offset where they end (the message says where the break is)."""
    h = Header(0)
    try:
        root, trailing = parse(buf, base)
    except BadValue as e:
        root = e.partial
        e.partial = None
        if isinstance(root, JNode) and root.kind == "object":
            _json_members(h, root, buf, base)
            e.partial, e.offset = h, root.end
        raise
    if root.kind != "object":
        raise BadValue("JSON header is not an object", base)
    if trailing:
        h.diagnostics.append(DIAGNOSTICS("header_trailing", f"{plural(trailing, 'byte')} after the JSON header",
                                         base + len(buf) - trailing))
    _json_members(h, root, buf, base)
    return h


def _json_members(h: Header, root: JNode, buf: bytes, base: int) -> None:
    for key, _, node in root.value:
        if key == "extFields":
            _json_ext(h, node, buf, base)
        elif not _json_scalar(h, key, node):
            name, label = named(key, key)
            h.extra.append(to_field(name, node, label))


# -- ROCKETMQ binary --------------------------------------------------------------------------


def _binary_ext(h: Header, r: WireReader) -> None:
    start = r.pos
    n = r.int32()
    if n < 0:
        raise BadLength(f"ext-fields length {n}", start)
    h.ext_offset, h.ext_length = start, min(4 + n, r.end - start)
    if n > r.remaining:
        # Cut short (or a length that overruns): the entries that are there, then the error.
        er = WireReader(r.buf, r.pos, r.end)
        _binary_entries(h, er)
        raise Truncated(f"ext-fields: needs {n} bytes, {r.remaining} remain", er.pos)
    _binary_entries(h, r.sub(n))


def _binary_entries(h: Header, er: WireReader) -> None:
    while not er.at_end():
        at = er.pos
        if len(h.ext) == MAX_ELEMENTS:
            _ext_limit(h, at)
            break
        klen = er.int16()
        if klen < 0:
            raise BadLength(f"ext-field key length {klen}", at)
        key = er.text(klen)
        vlen = er.int32()
        if vlen < 0:
            raise BadLength(f"ext-field value length {vlen}", er.pos - 4)
        value = er.text(vlen) if vlen else None
        h.ext.append(ExtEntry(key, value, at, er.pos - at, er.pos - vlen, vlen))


def decode_binary(buf: bytes, base: int, end: int) -> Header:
    """A ROCKETMQ binary header at buf[base:end] (buf is the whole message). A header that
    breaks part-way (cut short) raises with the Header read so far as the error's `partial`."""
    h = Header(1)
    try:
        _binary(h, buf, base, end)
    except DecodeError as e:
        e.partial = h
        raise
    return h


def _binary(h: Header, buf: bytes, base: int, end: int) -> None:
    r = WireReader(buf, base, end)
    spec = (("code", 2, r.int16), ("language", 1, r.uint8), ("version", 2, r.int16),
            ("opaque", 4, r.int32), ("flag", 4, r.int32))
    for name, size, read in spec:
        at = r.pos
        value = read()
        setattr(h, name, value)
        h.fields[name] = Field(name, value, at, size)
    at = r.pos
    rlen = r.int32()
    if rlen < 0:
        raise BadLength(f"remark length {rlen}", at)
    h.remark = r.text(rlen) if rlen else None
    h.fields["remark"] = Field("remark", h.remark, at, 4 + rlen)
    _binary_ext(h, r)
    if not r.at_end():
        h.diagnostics.append(DIAGNOSTICS("header_trailing", f"{plural(r.remaining, 'byte')} after the binary header", r.pos))
