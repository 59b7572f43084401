"""The Pulsar binary-protocol dissector (protocol version 21).

    simple command:   [totalSize][commandSize][BaseCommand]
    payload command:  [totalSize][commandSize][BaseCommand] + payload.py's section

Sizes are 4-byte big-endian; totalSize excludes itself. BaseCommand and every message inside
it are decoded by the table-driven wire walker (protowire.py) from schema_table.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kdissect.dissect.base import MALFORMED_MARK, Budget, ConversationState, Options
from kdissect.dissect.partial import take_partial
from kdissect.errors import BadLength, DecodeError, Truncated
from kdissect.framing.length_prefixed import Framer, LengthPrefixedFramer
from kdissect.model import RAW, Field, Message
from kdissect.pulsar import match
from kdissect.pulsar.about import ABOUT
from kdissect.pulsar.columns import COLUMNS
from kdissect.pulsar.commands import BODY, CREDENTIAL_COMMANDS, SECRETS, TYPE_NAMES
from kdissect.pulsar.conversation import PulsarConversation, remember
from kdissect.pulsar.diagnostics import DIAGNOSTICS
from kdissect.pulsar.payload import PayloadFacts, decode_payload
from kdissect.pulsar.protowire import WalkContext, walk
from kdissect.pulsar.summary import error_of, short, summarize
from kdissect.text import plural
from kdissect.wire.reader import WireReader
from kdissect.wire.varint import uvarint_at

if TYPE_CHECKING:
    from kdissect.dissect.keyinfo import KeyInfo

# Pulsar's default maxMessageSize is 5 MB; a frame may exceed it by the broker's 10 KB padding
# for the command and metadata around the payload.
MAX_FRAME = 5 * 1024 * 1024 + 10 * 1024
MIN_FRAME = 6  # commandSize + the smallest BaseCommand (type tag and value)
PAYLOAD_TYPES = frozenset({"SEND", "MESSAGE"})


def _probe_type(head: bytes) -> tuple[int, int] | None:
    """(type, offset after it) when head has a plausible frame start, else None."""
    if len(head) < 10:
        return None
    total = int.from_bytes(head[0:4], "big")
    csize = int.from_bytes(head[4:8], "big")
    if not MIN_FRAME <= total <= MAX_FRAME or not 2 <= csize <= total - 4 or head[8] != 0x08:
        return None
    try:
        value, after = uvarint_at(head, 9, min(len(head), 12))  # the type: at most 3 bytes
    except DecodeError:
        return None
    return (value, after) if value in TYPE_NAMES else None


class PulsarDissector:
    name = ABOUT.name  # what the registry knows before importing this module (about.py)
    title = ABOUT.title
    ports = ABOUT.ports
    style = ABOUT.style
    max_frame = MAX_FRAME
    columns = COLUMNS
    diagnostics = DIAGNOSTICS
    learns_across_conversations = False

    def holds_secrets(self, msg: Message) -> bool:
        return msg.info.get("op") in CREDENTIAL_COMMANDS

    def field_aliases(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        return {}

    def value_names(self, path: str) -> tuple[str, ...] | None:
        return None

    def specification(self) -> str | None:
        from kdissect.pulsar.schema_table import PROTOCOL_VERSION

        return f"PulsarApi.proto, protocol version v{PROTOCOL_VERSION}"

    def field_keys(self) -> list[KeyInfo] | None:
        return None  # no key table: `kdissect fields pulsar --from CAPTURE` lists what a capture holds

    def probe(self, head: bytes) -> float:
        found = _probe_type(head)
        if found is None:
            return 0.0
        ctype, after = found
        # The body follows as field <type>, length-delimited: tag (type << 3) | 2.
        tag = (ctype << 3) | 2
        tag_bytes = bytes([tag]) if tag < 0x80 else bytes([(tag & 0x7F) | 0x80, tag >> 7])
        if head[after : after + len(tag_bytes)] == tag_bytes:
            return 0.95
        return 0.6

    def probe_boundary(self, head: bytes, to_server: bool, state: ConversationState) -> bool:
        return self.probe(head) >= 0.9

    def new_framer(self, to_server: bool, state: ConversationState | None = None) -> Framer:
        return LengthPrefixedFramer(self.max_frame, to_server, MIN_FRAME, empty=False)

    def new_state(self) -> PulsarConversation:
        return PulsarConversation()

    def dissect(self, msg: Message, state: ConversationState, opts: Options) -> None:
        if not isinstance(state, PulsarConversation):
            raise TypeError("the Pulsar dissector needs the state its new_state() returns")
        ctx = WalkContext(redact=frozenset() if opts.show_secrets else SECRETS, budget=Budget(opts, state.capture))
        try:
            _dissect(msg, state, opts, ctx)
        finally:
            ctx.settle()
            msg.diagnostics.extend(ctx.diags)
            msg.inflated = ctx.budget.inflated


def _dissect(msg: Message, state: PulsarConversation, opts: Options, ctx: WalkContext) -> None:
    data = msg.data
    r = WireReader(data)
    total = r.uint32()
    msg.fields.append(Field("total_size", total, 0, 4))
    csize = r.uint32()
    msg.fields.append(Field("command_size", csize, 4, 4))
    if csize > total - 4:
        raise BadLength(f"commandSize {csize} exceeds totalSize {total} - 4", 4)
    if total + 4 > len(data):
        ctx.cut = len(data)  # a frame cut short: what was captured still decodes, up to the cut
    broke: DecodeError | None = None
    start, end = r.pos, min(r.pos + csize, r.end)
    try:
        base = walk(data, start, end, "BaseCommand", ctx, 0)
    except DecodeError as e:
        base, broke = take_partial(e), e
    if broke is None and end < start + csize:
        broke = Truncated(f"BaseCommand: {csize} bytes, {end - start} captured", end)
    r.pos = end
    msg.fields.extend(base)
    type_field = next((f for f in base if f.name == "type"), None)
    if broke is not None and type_field is None:
        raise broke
    code = type_field.value if type_field is not None and isinstance(type_field.value, int) else -1
    type_name = TYPE_NAMES.get(code, f"UNKNOWN({code})")
    body = _body(base, code, type_name, ctx, start, broke is None)
    msg.info.update(op=type_name, op_code=code)
    facts, broken = _rest(msg, r, type_name, ctx, opts) if broke is None else (None, False)
    match.apply(msg, state, type_name, body)
    _facts(msg, state, type_name, body)
    msg.summary = summarize(type_name, body, msg, facts)
    if broke is not None:
        raise broke
    if broken or (facts is not None and facts.broken):
        msg.summary += " " + MALFORMED_MARK


def _body(base: list[Field], code: int, type_name: str, ctx: WalkContext, at: int, whole: bool) -> Field | None:
    """The command's body field. whole: the command was not cut short (else a missing body may
    simply lie past the cut)."""
    if code not in TYPE_NAMES:
        ctx.note("unknown_command", f"command type {code} unknown to protocol version 21", at)
        return None
    name, _ = BODY[code]
    body = next((f for f in base if f.name == name), None)
    if body is None and whole and type_name not in ("PING", "PONG"):
        ctx.note("missing_body", f"{type_name} without its {name} field", at)
    return body


def _rest(msg: Message, r: WireReader, type_name: str, ctx: WalkContext,
          opts: Options) -> tuple[PayloadFacts | None, bool]:
    """The payload section of SEND/MESSAGE (and whether it broke part-way); anything after
    another command is kept raw."""
    if r.at_end():
        return None, False
    at = r.pos
    if type_name not in PAYLOAD_TYPES:
        ctx.note("trailing", f"{plural(r.remaining, 'byte')} after a {type_name} command", at)
        n = r.remaining
        msg.fields.append(Field("trailing", r.rest(), at, n, hint=RAW))
        return None, False
    try:
        fields, facts = decode_payload(msg.data, at, ctx, opts)
    except DecodeError as e:
        where = e.offset if e.offset >= 0 else at
        ctx.note("payload", f"payload: {e}", where)
        msg.fields += take_partial(e)  # the payload section up to the break
        if where < len(msg.data):
            msg.fields.append(Field("undecoded", msg.data[where:], where, len(msg.data) - where, hint=RAW))
        return None, True
    msg.fields.extend(fields)
    return facts, False


def _facts(msg: Message, state: PulsarConversation, type_name: str, body: Field | None) -> None:
    """msg.info (topic, ids, version, error) and the producer/consumer -> topic memory."""
    info = msg.info
    if body is None:
        return
    topic = body.get("topic")
    pid, cid = body.get("producer_id"), body.get("consumer_id")
    if type_name == "PRODUCER" and topic is not None:
        remember(state.producers, pid, topic)
    elif type_name == "SUBSCRIBE" and topic is not None:
        remember(state.consumers, cid, topic)
    if topic is None and pid is not None:
        topic = state.producers.get(pid)
    if topic is None and cid is not None:
        topic = state.consumers.get(cid)
    if topic is None and msg.peer is not None:
        topic = msg.peer.info.get("topic")
    for key, value in (("topic", topic), ("producer_id", pid), ("consumer_id", cid),
                       ("version", body.get("protocol_version"))):
        if value is not None:
            info[key] = value
    code, name, text = error_of(body)
    info.update(error_code=code, error=name)
    if text:
        info["error_message"] = text
    if name is not None:  # the text as the summary cuts it: the field and the facts keep it whole
        msg.add(DIAGNOSTICS("error", f"{type_name}: {name}" + (f": {short(text)}" if text else "")))


DISSECTOR = PulsarDissector()
