"""The values that flow through the pipeline: Field, Diagnostic, Pdu, Message, Match.

Field and Message are slotted classes rather than frozen dataclasses: a dissector builds a
message in place and the pipeline links a request and its response after both exist, and a
capture holds millions of fields, so construction cost matters. Nothing mutates them once the
pipeline has emitted them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import Enum
from functools import lru_cache
from typing import Any

from kdissect.text import plural


class Severity(str, Enum):
    """Wireshark's expert-info severities, lowest first."""

    CHAT = "chat"
    NOTE = "note"
    WARNING = "warning"
    ERROR = "error"


class Group(str, Enum):
    """Wireshark's expert-info groups, as used by kdissect."""

    MALFORMED = "malformed"  # the bytes break the protocol's rules
    UNDECODED = "undecoded"  # bytes kdissect cannot (yet) decode
    CHECKSUM = "checksum"  # a CRC mismatch
    ASSUMPTION = "assumption"  # decoded under an assumption (newer version, guessed API)
    PROTOCOL = "protocol"  # legal but noteworthy protocol behaviour (an error code, a retry)
    SEQUENCE = "sequence"  # TCP: gaps, overlaps, retransmissions, resynchronisation
    REASSEMBLE = "reassemble"  # TCP: a message that could not be completed
    COMMENT = "comment"  # informational


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One expert-info item attached to a message. Built only by a catalogue
    (kdissect/diagnostics.py), where each key is declared once with its severity and group."""

    severity: Severity
    group: Group
    key: str  # stable, dotted: "kafka.truncated", "tcp.gap"
    message: str
    offset: int = -1

    def __init__(self, severity: Severity, group: Group, key: str, message: str, offset: int = -1) -> None:
        # What the generated __init__ of a frozen dataclass does (which runs as Python code, and
        # every malformed message builds a diagnostic), with the slots' own setters.
        _SET_SEVERITY(self, severity)
        _SET_GROUP(self, group)
        _SET_KEY(self, key)
        _SET_MESSAGE(self, message)
        _SET_OFFSET(self, offset)

    def to_json(self) -> dict[str, Any]:
        # _value_: the member's value without the `value` property's descriptor call.
        out: dict[str, Any] = {
            "severity": self.severity._value_,
            "group": self.group._value_,
            "key": self.key,
            "message": self.message,
        }
        if self.offset >= 0:
            out["offset"] = self.offset
        return out


_SET_SEVERITY, _SET_GROUP, _SET_KEY, _SET_MESSAGE, _SET_OFFSET = (
    getattr(Diagnostic, name).__set__ for name in ("severity", "group", "key", "message", "offset"))


# Display hints for Field.hint. Renderers choose a presentation from them; they never
# special-case a protocol.
STRUCT = "struct"
ARRAY = "array"
ENUM = "enum"  # an integer with a symbolic name in Field.display
FLAGS = "flags"  # an integer with the set flag names in Field.display
TIME_MS = "time_ms"  # milliseconds since the epoch; Field.display has the date
BYTES = "bytes"  # raw bytes: text when printable, else hex
RAW = "raw"  # undecoded bytes kept for the user
HEX = "hex"  # an integer shown in hexadecimal: a CRC, a magic number, a zxid, a session id, a mask
DURATION_MS = "duration_ms"  # a duration in milliseconds (a timeout, an interval, a TTL)
DURATION_S = "duration_s"  # a duration in seconds
# The unit text output writes after the number of a duration hint.
UNITS = {DURATION_MS: "ms", DURATION_S: "s"}
# A redacted value (password, proof, token; shown only with --show-secrets): its offset and
# length are exactly the hidden bytes of Message.data, which hex dumps mask (secret_ranges).
SECRET = "secret"


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MAX_MS = 253402300799999  # 9999-12-31T23:59:59.999Z


@lru_cache(maxsize=4096)
def format_ms(ms: int) -> str | None:
    """A TIME_MS value as ISO-8601 UTC with milliseconds; -1 (no timestamp) is "none"; None when
    out of range. Renderers call it: dissectors store the number only."""
    if ms == -1:
        return "none"
    if not 0 <= ms <= _MAX_MS:
        return None
    t = _EPOCH + timedelta(milliseconds=ms)
    return f"{t:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


# The endings of a snake_case field name that make an integer a duration, and its hint. Protocols
# apply the rule to fields they have not given another hint (a timestamp in ms is TIME_MS).
DURATION_SUFFIXES = (
    ("_ms", DURATION_MS), ("_millis", DURATION_MS), ("_mills", DURATION_MS),
    ("_sec", DURATION_S), ("_secs", DURATION_S), ("_seconds", DURATION_S),
)


@lru_cache(maxsize=4096)
def duration_hint(name: str) -> str | None:
    """The duration hint a field name implies ("timeout_ms": DURATION_MS), or None."""
    for suffix, hint in DURATION_SUFFIXES:
        if name.endswith(suffix):
            return hint
    return None


class Field:
    """A node of the decoded tree, like Wireshark's proto_item.

    name: a stable snake_case key segment; the full key is the dotted path from the protocol
    root ("kafka.topics.partitions.index"), shared by JSON, filters and Spark.
    value: the decoded scalar (int, str, bytes, bool, float, None); None for structs and arrays.
    children: sub-fields of a struct, or elements of an array (element names are ignored).
    display: a human form of the value (enum name, flags, date), or None.
    """

    __slots__ = ("name", "value", "offset", "length", "children", "hint", "display", "label")

    def __init__(
        self,
        name: str,
        value: Any = None,
        offset: int = -1,
        length: int = 0,
        children: list[Field] | None = None,
        hint: str | None = None,
        display: str | None = None,
        label: str | None = None,
    ) -> None:
        self.name = name
        self.value = value
        self.offset = offset
        self.length = length
        self.children = children
        self.hint = hint
        self.display = display
        self.label = label

    def __repr__(self) -> str:
        if self.children is not None:
            return f"Field({self.name!r}, {self.hint}, {len(self.children)} children)"
        return f"Field({self.name!r}, {self.value!r})"

    def child(self, name: str) -> Field | None:
        """The first direct child with this name."""
        for c in self.children or ():
            if c.name == name:
                return c
        return None

    def get(self, path: str) -> Any:
        """The value at a dotted path below this field (first array element wins), or None."""
        node: Field | None = self
        for part in path.split("."):
            if node is None:
                return None
            if node.hint == ARRAY:
                node = node.children[0] if node.children else None
                if node is None:
                    return None
            node = node.child(part)
        return None if node is None else node.value


Column = tuple[str, "str | None"]  # (field name, display hint)


class Row(Field):
    """A struct kept as a tuple of values over a shared column list, for bulk data (a capture
    holds millions of Kafka records). Its child Fields are built only when something walks the
    tree (-V, filters); renderers that know Row read `values` directly.

    columns: ((name, hint), ...) shared by every row of a kind; values: one per column, a
    scalar or a Field (nested arrays and structs); spans: (offset, length) per column, flat: a
    tuple of ints, or an array of them (Kafka's records keep theirs in one array("q")).
    """

    __slots__ = ("columns", "values", "spans", "_kids")

    def __init__(self, name: str, columns: tuple[Column, ...], values: tuple[Any, ...],
                 spans: Sequence[int] | None, offset: int = -1, length: int = 0,
                 label: str | None = None) -> None:
        Field.__init__(self, name, None, offset, length, None, STRUCT, None, label)
        self.columns = columns
        self.values = values
        self.spans = spans
        self._kids: list[Field] | None = None

    def _children(self) -> list[Field]:
        kids = self._kids
        if kids is None:
            kids = []
            spans = self.spans
            for i, ((name, hint), v) in enumerate(zip(self.columns, self.values, strict=True)):
                if isinstance(v, Field):
                    kids.append(v)
                elif spans is not None:
                    kids.append(Field(name, v, spans[2 * i], spans[2 * i + 1], None, hint))
                else:
                    kids.append(Field(name, v, -1, 0, None, hint))
            self._kids = kids
        return kids

    def _set_children(self, kids: list[Field] | None) -> None:
        self._kids = kids

    children = property(_children, _set_children)

    @property
    def materialized(self) -> bool:
        """Whether child Fields exist (and may have been changed): then they are the truth."""
        return self._kids is not None


def undecoded(name: str, rest: bytes, offset: int, secret: bool) -> Field:
    """Bytes a decoder could not read (`rest`, from `offset`), kept raw for the user; when they
    may hold a credential (`secret`: the message's operation carries one and secrets are not to
    be shown) they are redacted, a SECRET field over them, so hex dumps mask them too."""
    if secret:
        return Field(name, f"<redacted {plural(len(rest), 'byte')}>", offset, len(rest), None, SECRET)
    return Field(name, rest, offset, len(rest), None, RAW)


def secret_ranges(m: Message) -> list[tuple[int, int]]:
    """The (offset, length) in m.data of every redacted value (hint SECRET) of m's tree: the
    bytes no output may show. Rows are read from their columns without building child Fields."""
    return tree_secret_ranges(m.fields)


def tree_secret_ranges(fields: list[Field]) -> list[tuple[int, int]]:
    """secret_ranges of the trees under `fields`."""
    out: list[tuple[int, int]] = []
    stack: list[Field] = list(fields)
    while stack:
        f = stack.pop()
        if f.hint == SECRET:
            if f.offset >= 0 and f.length > 0:
                out.append((f.offset, f.length))
        elif type(f) is Row and not f.materialized:
            spans = f.spans
            for i, ((_, hint), v) in enumerate(zip(f.columns, f.values, strict=True)):
                if isinstance(v, Field):
                    stack.append(v)
                elif hint == SECRET and spans is not None and spans[2 * i] >= 0:
                    out.append((spans[2 * i], spans[2 * i + 1]))
        elif f.children:
            stack.extend(f.children)
    out.sort()
    return out


def struct(name: str, children: list[Field], offset: int = -1, length: int = 0, label: str | None = None) -> Field:
    return Field(name, None, offset, length, children, STRUCT, None, label)


def array(name: str, elements: list[Field], offset: int = -1, length: int = 0) -> Field:
    return Field(name, None, offset, length, elements, ARRAY)


class Pdu:
    """One protocol message cut out of a TCP stream by a framer. (A plain class: a dataclass's
    generated __init__ would run as Python code, not compiled, once a message; an extension
    type when compiled, model.pxd.)"""

    __slots__ = ("data", "frames", "ts", "ts_end", "to_server", "diagnostics")

    def __init__(self, data: bytes, frames: list[int], ts: float, ts_end: float, to_server: bool,
                 diagnostics: list[Diagnostic] | None = None) -> None:
        self.data = data
        self.frames = frames
        self.ts = ts  # timestamp of the first frame carrying it
        self.ts_end = ts_end  # timestamp of the frame that completed it
        self.to_server = to_server
        self.diagnostics: list[Diagnostic] = [] if diagnostics is None else diagnostics


@dataclass(slots=True)
class Match:
    """The link from a message to its partner: the other's frame and the response time."""

    frame: int
    kind: str
    rtt: float | None  # seconds, response completion minus request completion

    def to_json(self) -> dict[str, Any]:
        return {
            "frame": self.frame,
            "kind": self.kind,
            "rtt_ms": None if self.rtt is None else round(self.rtt * 1000.0, 3),
        }


class Message:
    """A decoded protocol message. The pipeline creates it from a Pdu; a dissector fills in
    protocol, kind, summary, fields, diagnostics and info; the pipeline links matches."""

    __slots__ = (
        "number", "frame", "frames", "ts", "ts_end", "stream", "src", "dst", "to_server",
        "protocol", "kind", "summary", "fields", "diagnostics", "info", "match", "peer",
        "expects_response", "data", "capture", "inflated", "tls", "__weakref__",
    )

    def __init__(self, pdu: Pdu, stream: int, src: str, dst: str, protocol: str) -> None:
        frames = pdu.frames
        to_server = pdu.to_server
        self.number = 0  # position in the output, set by the pipeline
        self.frame = frames[0] if frames else 0
        self.frames = frames
        self.ts = pdu.ts
        self.ts_end = pdu.ts_end
        self.stream = stream
        self.src = src
        self.dst = dst
        self.to_server = to_server
        self.protocol = protocol
        self.kind = "request" if to_server else "response"
        self.summary = ""
        self.fields: list[Field] = []
        self.diagnostics: list[Diagnostic] = list(pdu.diagnostics)
        # Flat facts for summaries, statistics and Spark columns: api, version, key, error...
        self.info: dict[str, Any] = {}
        self.match: Match | None = None
        # Set by a dissector on a response: the request Message it answers.
        self.peer: Message | None = None
        # False for requests that get no response by design (Kafka acks=0, RocketMQ oneway).
        self.expects_response = to_server
        self.data = pdu.data
        self.capture = ""
        # Decompressed bytes the decoded tree keeps (record values, payloads), set by a
        # dissector: what the pipeline counts against its budget for held messages.
        self.inflated = 0
        # Set by the pipeline on a message decrypted from TLS: its connection's TlsInfo.
        self.tls: Any = None

    def __repr__(self) -> str:
        return f"Message(#{self.frame} {self.protocol} {self.kind} {self.summary!r})"

    def add(self, diag: Diagnostic) -> None:
        self.diagnostics.append(diag)

    @property
    def worst(self) -> Severity | None:
        order = list(Severity)
        worst: Severity | None = None
        for d in self.diagnostics:
            if worst is None or order.index(d.severity) > order.index(worst):
                worst = d.severity
        return worst
