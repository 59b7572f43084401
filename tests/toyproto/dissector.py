"""TOY: a 4-byte big-endian length, then an op byte (1 = ping, 2 = echo), a 4-byte request id
and a UTF-8 text; the server answers with the same op and id."""

from __future__ import annotations

from kdissect.dissect.base import ConversationState, Options, Projection
from kdissect.dissect.keyinfo import KeyInfo
from kdissect.framing.length_prefixed import Framer, LengthPrefixedFramer
from kdissect.model import ENUM, Field, Message
from kdissect.wire.reader import WireReader
from toyproto.about import ABOUT
from toyproto.diagnostics import DIAGNOSTICS

OPS = {1: "ping", 2: "echo"}


class ToyDissector:
    name = ABOUT.name
    title = ABOUT.title
    ports = ABOUT.ports
    max_frame = 1024
    style = ABOUT.style
    diagnostics = DIAGNOSTICS
    learns_across_conversations = False
    columns: Projection = (
        ("op", "int", ("op",)),
        ("op_name", "string", ("op_name",)),
        ("id", "int", ("id",)),
        ("text", "string", ("text",)),
    )

    def holds_secrets(self, msg: Message) -> bool:
        return False  # TOY carries no credential

    def field_aliases(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        return {}

    def value_names(self, path: str) -> tuple[str, ...] | None:
        return None

    def specification(self) -> str | None:
        return None  # its generated tables record no specification version

    def field_keys(self) -> list[KeyInfo] | None:
        return [KeyInfo("toy.op", "int8", "operation"), KeyInfo("toy.op_name", "string", "operation name"),
                KeyInfo("toy.id", "int32", "request id"), KeyInfo("toy.text", "string", "payload")]

    def probe(self, head: bytes) -> float:
        return 0.0

    def probe_boundary(self, head: bytes, to_server: bool, state: ConversationState) -> bool:
        return len(head) > 4 and head[4] in OPS

    def new_framer(self, to_server: bool, state: ConversationState | None = None) -> Framer:
        return LengthPrefixedFramer(self.max_frame, to_server, min_frame=5)

    def new_state(self) -> ConversationState:
        return ConversationState()

    def dissect(self, msg: Message, state: ConversationState, opts: Options) -> None:
        r = WireReader(msg.data)
        r.int32()
        op = r.int8()
        ident = r.int32()
        text = r.rest().decode("utf-8", "replace")
        msg.kind = "request" if msg.to_server else "response"
        msg.fields = [Field("op", op, 4, 1, hint=ENUM, display=OPS.get(op, "?")), Field("id", ident, 5, 4),
                      Field("text", text, 9, len(msg.data) - 9)]
        msg.info.update(op=OPS.get(op), op_code=op, corr=ident)
        msg.summary = f"{OPS.get(op, '?')} {msg.kind} id={ident} {text!r}"
        if msg.to_server:
            state.pending.add(ident, msg)
        else:
            msg.peer = state.pending.pop(ident)


DISSECTOR = ToyDissector()
