"""The Dissector interface and the per-PDU decode boundary.

A dissector is a stateless object, listed in kdissect/protocols.py by its package's about.py
(imported the first time a conversation needs it). Per-conversation
state (pending requests, negotiated versions) lives in the object its `new_state()` returns.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from kdissect.diagnostics import Catalogue
from kdissect.dissect.matcher import Matcher, Pool
from kdissect.dissect.partial import take_partial
from kdissect.errors import DecodeError
from kdissect.framing.length_prefixed import Framer
from kdissect.model import Message, undecoded

if TYPE_CHECKING:
    from kdissect.dissect.keyinfo import KeyInfo


@dataclass(frozen=True, slots=True)
class Options:
    """What the user asked for that changes decoding."""

    max_bytes: int = 256  # bytes/str values longer than this are cut in renderers
    max_decompressed: int = 64 * 1024 * 1024  # decompressed bytes per message, all payloads together
    show_secrets: bool = False  # reveal SASL passwords, auth tokens
    decode_records: bool = True  # decode record batches / message payloads
    # False: count records from batch headers without decoding each one (summary-only views:
    # `read` without -V, -x or -Y); summaries stay the same, the field tree is shallower.
    record_detail: bool = True
    tls_keylog: str | None = None  # an NSS key log file: TLS conversations are decrypted with it
    # True: nothing of the conversation is shown; it is decoded only for its own state and for
    # what it teaches the capture's other conversations (Teaches), so a dissector may leave the
    # other bodies undecoded.
    teach_only: bool = False


DEFAULT_OPTIONS = Options()


# Options.max_decompressed at most: the codecs take the cap as a C size (a larger one
# overflowed), and an lz4 frame reserves the cap's bytes up front (4 GiB failed under a 3 GB
# address space).
MAX_DECOMPRESSED = 1 << 30
# Decoded elements per message (array and list elements, repeated fields, vector items) and
# decoded entries per message (records, batches, batch entries, stored messages): beyond these
# a message's tree stops growing, with a diagnostic, which bounds the memory one message takes.
MAX_ELEMENTS = 100_000
MAX_ENTRIES = 100_000
# What the messages of a capture may decompress and show in all: CAPTURE_MESSAGES messages'
# worth of Options.max_decompressed and of MAX_ENTRIES, plus DECOMPRESSION_RATIO bytes and one
# entry for every ENTRY_BYTES bytes of the messages the capture has carried so far. Real traffic
# compresses a few times, rarely a hundred, and its records take tens of bytes or more (an entry
# costs a few µs to decode and write); a capture of compression bombs (kilobytes that each
# inflate to a message's whole budget, or to its 100,000 tiny records) then costs work in
# proportion to its size.
CAPTURE_MESSAGES = 4
DECOMPRESSION_RATIO = 100
ENTRY_BYTES = 4


class Inflation:
    """What the messages of a capture decompressed (`spent`) and showed (`entries`), and the
    bytes they carried (CaptureState.inflation)."""

    __slots__ = ("carried", "spent", "entries")

    def __init__(self) -> None:
        self.carried = 0
        self.spent = 0
        self.entries = 0


class Budget:
    """What decoding one message may still spend, shared by all of its parts (every partition,
    batch, entry or stored message): Options.max_decompressed bytes of decompressed output for
    the whole message, MAX_ELEMENTS elements and MAX_ENTRIES entries (records, batches, batch
    entries, stored messages: each is spent with `entry()`), the bytes and entries within what is
    left of the capture's (Inflation, when the message belongs to one). `inflated` counts the
    decompressed bytes the message keeps (Message.inflated)."""

    __slots__ = ("inflate_left", "inflate_limit", "inflated", "elements_left", "elements_limit",
                 "entries_left", "entries_limit", "_said", "_own_left", "_capture", "_capture_limit",
                 "_entries_cap")

    def __init__(self, opts: Options | None = None, capture: CaptureState | None = None) -> None:
        limit = (opts or DEFAULT_OPTIONS).max_decompressed
        self.inflate_limit = self._own_left = self.inflate_left = limit
        c = self._capture = capture.inflation if capture is not None else None
        self._capture_limit = CAPTURE_MESSAGES * limit
        self.inflated = 0
        self.elements_limit = self.elements_left = MAX_ELEMENTS
        self.entries_limit = self.entries_left = MAX_ENTRIES
        self._entries_cap = 0  # the entries the capture may show in all, as of this message
        if c is not None:
            self.inflate_left = self._left()
            self._entries_cap = CAPTURE_MESSAGES * MAX_ENTRIES + c.carried // ENTRY_BYTES
            self.entries_left = max(0, min(MAX_ENTRIES, self._entries_cap - c.entries))
        self._said: set[str] = set()

    def entry(self) -> bool:
        """Whether one more entry may be shown; if so, it is spent."""
        if self.entries_left <= 0:
            return False
        self.entries_left -= 1
        c = self._capture
        if c is not None:
            c.entries += 1
            if c.entries >= self._entries_cap:
                self.entries_left = 0
        return True

    def decompressed_elements(self, n: int) -> None:
        """n elements shown out of decompressed bytes (the headers of a compressed batch's
        records): no bytes of the capture bound them, so they count against its entries, and
        once those are spent the message shows no more entries."""
        c = self._capture
        if c is not None and n:
            c.entries += n
            if c.entries >= self._entries_cap:
                self.entries_left = 0

    def entries_spent(self, kind: str) -> str:
        """Why no more entries (`kind`: "records and batches") may be shown: the message's limit, or
        the capture's."""
        c = self._capture
        if c is not None and c.entries >= self._entries_cap:
            return (f"the capture has shown as many {kind} as its budget allows ({CAPTURE_MESSAGES} "
                    f"messages' {self.entries_limit}, plus one for every {ENTRY_BYTES} bytes of its messages)")
        return f"more than {self.entries_limit} {kind} in the message"

    def _left(self) -> int:
        c = self._capture
        if c is None:
            return self._own_left
        return max(0, min(self._own_left, self._capture_limit + DECOMPRESSION_RATIO * c.carried - c.spent))

    def spend(self, produced: int, kept: bool) -> None:
        """Decompressed output of `produced` bytes, kept by the message or thrown away."""
        self._own_left = max(0, self._own_left - produced)
        if self._capture is not None:
            self._capture.spent += produced
        self.inflate_left = self._left()
        if kept:
            self.inflated += produced

    def which(self) -> str:
        """The budget that bounds what is left: the message's, or the capture's."""
        if self.inflate_left < self._own_left:
            return (f"the capture's decompression budget ({CAPTURE_MESSAGES} messages' "
                    f"{self.inflate_limit} bytes, plus {DECOMPRESSION_RATIO} bytes a byte of its messages)")
        return f"the message's {self.inflate_limit}-byte decompression budget"

    def elements(self, n: int) -> int:
        """How many of n elements may still be decoded; they are spent."""
        keep = n if n <= self.elements_left else max(self.elements_left, 0)
        self.elements_left -= keep
        return keep

    def first(self, key: str) -> bool:
        """True the first time `key` is asked: for diagnostics said once per message."""
        if key in self._said:
            return False
        self._said.add(key)
        return True


# Ends the summary of a message whose bytes break part-way.
MALFORMED_MARK = "(malformed)"


T = TypeVar("T")


Lessons = dict[Hashable, tuple[int, Any]]  # what was learned -> (the frame it was learned at, its value)


@runtime_checkable
class Teaches(Protocol):
    """A CaptureState object whose learning can be carried between processes that each decode
    some of a capture's conversations (Spark's byte-range splits): what it learned, with the
    frame at which it learned each thing, and what the other conversations learned, each thing
    usable only by messages completed after its frame."""

    def lessons(self) -> Lessons: ...

    def seed(self, lessons: Lessons) -> None: ...


class CaptureState:
    """What dissectors learn over a whole capture and share between its conversations (Kafka's
    topic ids and names: a client learns them on one broker connection and uses them on
    another). One object per class, made on first use by calling the class without arguments;
    each keeps its own bound on what it holds. The pipeline gives one to every conversation of
    a capture (`ConversationState.capture`) and sets `frame`, the number of the frame being
    decoded (the one that completed the messages dissected now)."""

    __slots__ = ("_objects", "frame", "inflation")

    def __init__(self) -> None:
        self._objects: dict[type, object] = {}
        self.frame = 0
        self.inflation = Inflation()  # what its messages carried, decompressed and showed

    def get(self, cls: type[T]) -> T:
        obj = self._objects.get(cls)
        if not isinstance(obj, cls):
            obj = self._objects[cls] = cls()
        return obj

    def lessons(self) -> dict[type, Lessons]:
        """What each object that Teaches learned."""
        return {cls: obj.lessons() for cls, obj in self._objects.items() if isinstance(obj, Teaches)}

    def seed(self, taught: dict[type, Lessons]) -> None:
        """What the capture's other conversations learned (see Teaches)."""
        for cls, lessons in taught.items():
            obj: object = self.get(cls)
            if isinstance(obj, Teaches):
                obj.seed(lessons)


class ConversationState:
    """What a dissector keeps per TCP conversation: its pending requests, and `capture`, what is
    shared with the other conversations of the capture (a conversation's own until the pipeline
    sets the capture's). A protocol that keeps more subclasses it with typed attributes
    (KafkaConversation, PulsarConversation, ZkConversation) and returns that from new_state()."""

    __slots__ = ("pending", "capture")

    def __init__(self, max_pending: int = 1024) -> None:
        self.pending: Matcher[Any] = Matcher(max_pending)
        self.capture = CaptureState()

    def share(self, capture: CaptureState) -> None:
        """Join the capture's conversations: what they learn, and the pool of their pending
        requests."""
        self.capture = capture
        self.pending.pool = capture.get(Pool)

    def end(self) -> None:
        """The conversation ended: its pending requests (and what a subclass keeps of them) are
        given back to the capture's pool."""
        self.pending.clear()


# A protocol's typed Spark column, as data: (column, SQL type, JSON paths) per member, the SQL
# type in the column-type language of spark/sqltypes.py ("int", ("array", "string"), ...); a
# path is dotted through the JSON export's `fields` ("info." reads `info`, "*" any member), and
# the first path that holds a value of the right type wins.
Projection = tuple[tuple[str, Any, tuple[str, ...]], ...]


class Dissector(Protocol):
    """One protocol. `name` is the JSON `protocol` value and the field-key prefix."""

    name: str
    title: str
    ports: tuple[int, ...]
    max_frame: int
    style: str  # the protocol column's colour in the packet list (a rich style)
    columns: Projection  # the protocol's struct column in the Spark messages table
    diagnostics: Catalogue  # every diagnostic the protocol attaches (its <proto>/diagnostics.py)
    # Whether one conversation teaches what others use (CaptureState): a worker that decodes a
    # share of a capture (Pipeline's flow_filter) then decodes the other shares' conversations of
    # this protocol too, quietly, so that its output equals the single-process run.
    learns_across_conversations: bool

    def holds_secrets(self, msg: Message) -> bool:
        """Whether bytes of msg that were not decoded may hold a credential (its operation
        carries one): the undecoded rest of a message that broke part-way is then redacted
        unless --show-secrets."""
        ...

    def specification(self) -> str | None:
        """What the protocol's tables were generated from, as recorded by their generator (for
        `kdissect --version`); None when nothing is recorded."""
        ...

    def field_keys(self) -> list[KeyInfo] | None:
        """Every field key this protocol's messages can carry, from its tables (for `kdissect
        fields`); None when it has no key table (then `fields --from CAPTURE` lists them)."""
        ...

    def field_aliases(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Other tools' names of its fields (Wireshark's), for filters and `fields`: name ->
        (the message kind it applies to, or "", the field keys it stands for); {} if none."""
        ...

    def value_names(self, path: str) -> tuple[str, ...] | None:
        """The symbolic names a field key's values compare with in filters (an enum's), or None
        (any value is accepted)."""
        ...

    def probe(self, head: bytes) -> float:
        """How likely `head` (the first bytes a client sent) starts this protocol: 0.0-1.0.
        Never raises."""
        ...

    def probe_boundary(self, head: bytes, to_server: bool, state: ConversationState) -> bool:
        """Whether a message of this protocol plausibly starts at head[0] (head includes the
        4-byte length prefix) in that direction; used to resynchronise after a gap or a capture
        that starts mid-connection. `state` allows checks such as "this correlation id is
        pending". Never raises."""
        ...

    def new_framer(self, to_server: bool, state: ConversationState | None = None) -> Framer:
        """A framer for one direction of a conversation (usually
        LengthPrefixedFramer(self.max_frame, to_server))."""
        ...

    def new_state(self) -> ConversationState:
        ...

    def dissect(self, msg: Message, state: ConversationState, opts: Options) -> None:
        """Decode msg.data into msg (fields, summary, kind, info, diagnostics). May raise
        DecodeError: the boundary in `run_dissector` turns it into a diagnostic."""
        ...


def run_dissector(d: Dissector, msg: Message, state: ConversationState, opts: Options) -> None:
    """The one boundary per PDU: a DecodeError becomes a MALFORMED diagnostic (from the protocol's
    catalogue, named after the error's class: "kafka.truncated") plus a raw field for the bytes
    that were not decoded. What was decoded before the break stays: the fields the error's
    `partial` still carries are appended, and a summary the dissector already set gets
    " (malformed)". Any other exception is a bug and propagates."""
    state.capture.inflation.carried += len(msg.data)
    try:
        d.dissect(msg, state, opts)
    except DecodeError as e:
        msg.add(d.diagnostics.malformed(e))
        if e.partial is not None:
            kept = {id(f) for f in msg.fields}
            msg.fields += [f for f in take_partial(e) if id(f) not in kept]
        if not msg.summary:
            msg.summary = f"malformed {d.title} {msg.kind}"
        elif not msg.summary.endswith(MALFORMED_MARK):
            msg.summary += " " + MALFORMED_MARK
        if e.offset >= 0 and e.offset < len(msg.data):
            secret = not opts.show_secrets and d.holds_secrets(msg)
            msg.fields.append(undecoded("undecoded", msg.data[e.offset :], e.offset, secret))
