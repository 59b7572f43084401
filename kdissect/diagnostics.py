"""The diagnostic catalogue: every expert-info item kdissect attaches to a message is declared once,
with its key, severity, group and what it means, as Wireshark's expert items are registered
(`ei_register_info`); code builds a Diagnostic only through a catalogue, by the declared name.

Each protocol declares its Catalogue as data in `kdissect/<proto>/diagnostics.py` and exposes it
as its dissector's `diagnostics`; the per-PDU boundary (dissect/base.py) builds the MALFORMED
diagnostic of a DecodeError with `Catalogue.malformed`. The transport layer's items (TCP
reassembly, framing, the pipeline) are TRANSPORT below. `kdissect fields --diagnostics` lists
them all, and docs/diagnostics.md is generated from them.

This module is at the bottom of the import graph: it imports only kdissect.model and
kdissect.errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kdissect.errors import DecodeError
from kdissect.model import Diagnostic, Group, Severity


@dataclass(frozen=True, slots=True)
class Entry:
    """One declared diagnostic: its full key, severity, group, and what it means for a user."""

    key: str
    severity: Severity
    group: Group
    description: str

    def to_json(self) -> dict[str, str]:
        return {"key": self.key, "severity": self.severity.value, "group": self.group.value,
                "description": self.description}


# A declaration: (name in its catalogue, severity, group, one-line description).
Spec = tuple[str, Severity, Group, str]

# The MALFORMED diagnostics of the DecodeError classes, named after the class in lower case
# ("<proto>.truncated"): what the per-PDU boundary reports when a message breaks. Every protocol's
# catalogue declares them (decode_errors()).
DECODE_ERRORS: tuple[tuple[str, str], ...] = (
    ("truncated", "the message ends before a structure it announces (cut short by the capture, or a "
                  "count beyond the bytes present)"),
    ("badlength", "a length or count that is negative or larger than what remains"),
    ("badvalue", "a value the protocol does not allow (an unknown magic, type or tag)"),
    ("codecerror", "a compressed part that does not decompress"),
    ("codecunavailable", "a compressed part whose codec library is not installed"),
    ("decodeerror", "bytes that break the protocol's rules"),
)
_AFTER_BREAK = ": what was decoded before the break stays, the rest is kept raw"


def decode_errors() -> tuple[Spec, ...]:
    """The declarations of the DecodeError diagnostics, for a protocol's catalogue."""
    return tuple((name, Severity.ERROR, Group.MALFORMED, text + _AFTER_BREAK) for name, text in DECODE_ERRORS)


# Diagnostics a catalogue keeps to give again (Catalogue.__call__), and the longest text kept.
BUILT_KEPT = 1024
BUILT_TEXT = 256


class Catalogue:
    """The diagnostics of one protocol (or of the transport layer). `name` is the protocol's name
    and `title` what the listings call it; every key is `prefix.name` (prefix: the protocol's name
    by default; "" when the names are whole keys, as the transport layer's are). Building a
    diagnostic whose name is not declared raises KeyError: that is a bug."""

    __slots__ = ("name", "title", "prefix", "_entries", "_malformed", "_built")

    def __init__(self, name: str, title: str, specs: Iterable[Spec], prefix: str | None = None) -> None:
        self.name = name
        self.title = title
        self.prefix = name if prefix is None else prefix
        self._entries: dict[str, Entry] = {}
        self._malformed: dict[type[DecodeError], str] = {}  # error class -> its name, as malformed() found it
        self._built: dict[tuple[str, str, int], Diagnostic] = {}  # the last diagnostics built (see __call__)
        for item, severity, group, description in specs:
            if item in self._entries:
                raise ValueError(f"diagnostic {item!r} declared twice in the {name} catalogue")
            if not description:
                raise ValueError(f"diagnostic {item!r} of the {name} catalogue has no description")
            key = f"{self.prefix}.{item}" if self.prefix else item
            self._entries[item] = Entry(key, Severity(severity), Group(group), description)

    def __call__(self, name: str, message: str, offset: int = -1) -> Diagnostic:
        """The diagnostic `name` (declared in this catalogue) with its message text and offset.
        Diagnostics are immutable: one with a short text is built once and given again until
        BUILT_KEPT are kept, when all are forgotten (a run of malformed messages repeats the same
        few)."""
        key = (name, message, offset)
        d = self._built.get(key)
        if d is None:
            e = self._entries[name]
            d = Diagnostic(e.severity, e.group, e.key, message, offset)
            if len(message) <= BUILT_TEXT:
                if len(self._built) >= BUILT_KEPT:
                    self._built.clear()
                self._built[key] = d
        return d

    def malformed(self, error: DecodeError) -> Diagnostic:
        """The MALFORMED diagnostic of a DecodeError: `<prefix>.<class name in lower case>`
        ("kafka.truncated"), or that of its nearest declared base class; its text and offset."""
        name = self._malformed.get(type(error))
        if name is None:
            name = self._malformed[type(error)] = self._malformed_name(type(error))
        return self(name, str(error), error.offset)

    def _malformed_name(self, error: type[DecodeError]) -> str:
        for cls in error.__mro__:
            name = cls.__name__.lower()
            if name in self._entries:
                return name
            if cls is DecodeError:
                break
        raise KeyError(f"{self.name}: no diagnostic declared for {error.__name__}")

    def key(self, name: str) -> str:
        """The full key of a declared name (KeyError if it is not declared)."""
        return self._entries[name].key

    def entry(self, name: str) -> Entry:
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[Entry]:
        """The entries in declaration order."""
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Catalogue({self.name!r}, {len(self)} entries)"


# The transport layer: TCP reassembly (stream/), the framer (framing/) and the pipeline.
TRANSPORT = Catalogue("transport", "Transport: TCP reassembly, framing, the pipeline", (
    ("tcp.gap", Severity.WARNING, Group.SEQUENCE,
     "bytes of the TCP stream are missing from the capture (acknowledged by the peer but never seen, "
     "past the out-of-order backlog, or at its end): the message they fall in is incomplete"),
    ("tcp.overlap", Severity.WARNING, Group.SEQUENCE,
     "a retransmission carries bytes that differ from those first captured at the same stream offsets: "
     "the first-seen bytes are used"),
    ("tcp.incomplete", Severity.ERROR, Group.REASSEMBLE,
     "the stream ended inside a message: what was captured of it is decoded as far as it goes"),
    ("framing.unbuffered", Severity.WARNING, Group.REASSEMBLE,
     "a message cut short because the capture's conversations together keep as many bytes of unfinished "
     "messages and out-of-order segments as they may (128 MiB): what was captured of it is decoded as far "
     "as it goes, the rest of it skipped"),
    ("framing.bad_length", Severity.ERROR, Group.MALFORMED,
     "a message length prefix outside what the protocol allows: the framer looks for the next message boundary"),
    ("framing.resync", Severity.WARNING, Group.SEQUENCE,
     "bytes skipped to reach the next message boundary (after a gap, a bad length, or in a capture "
     "that starts mid-connection)"),
    ("pipeline.body_dropped", Severity.WARNING, Group.UNDECODED,
     "the decoded body was dropped to bound memory: the messages held waiting for their responses held "
     "too many bytes of data, decompressed data and decoded fields (the summary and facts stay, their "
     "texts cut past 1,024 characters and their lists past 64 items)"),
), prefix="")
