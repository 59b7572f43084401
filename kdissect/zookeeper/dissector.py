"""The ZooKeeper client-protocol dissector: session handshake, requests and replies matched by
xid, watch notifications, multi/multiRead, and four-letter admin words on the client port."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kdissect.dissect.base import Budget, ConversationState, Options
from kdissect.model import Field, Message
from kdissect.text import plural
from kdissect.wire.reader import WireReader
from kdissect.zookeeper import fourlw, packets, probe, session
from kdissect.zookeeper.about import ABOUT
from kdissect.zookeeper.columns import COLUMNS
from kdissect.zookeeper.diagnostics import DIAGNOSTICS
from kdissect.zookeeper.framer import TextLink, ZkFramer
from kdissect.zookeeper.jute import Ctx

if TYPE_CHECKING:
    from kdissect.dissect.keyinfo import KeyInfo

# jute.maxbuffer is 0xfffff by default; servers raise it, rarely beyond a few megabytes.
MAX_FRAME = 4 * 1024 * 1024


class ZkConversation(ConversationState):
    """Per-conversation facts besides the pending requests: which direction sent its first
    packet, a pending handshake, and the admin word shared with the framers."""

    __slots__ = ("link", "client_started", "server_started", "connect_pending")

    def __init__(self, max_pending: int = 1024) -> None:
        super().__init__(max_pending)
        self.link = TextLink()
        self.client_started = False
        self.server_started = False
        self.connect_pending = False


def conversation(state: ConversationState) -> ZkConversation:
    if not isinstance(state, ZkConversation):
        raise TypeError("the ZooKeeper dissector needs the state its new_state() returns")
    return state


def _is_binary(data: bytes) -> bool:
    return len(data) >= 4 and int.from_bytes(data[:4], "big") + 4 == len(data)


class ZooKeeperDissector:
    name = ABOUT.name  # what the registry knows before importing this module (about.py)
    title = ABOUT.title
    ports = ABOUT.ports
    style = ABOUT.style
    max_frame = MAX_FRAME
    columns = COLUMNS
    diagnostics = DIAGNOSTICS
    learns_across_conversations = False

    def holds_secrets(self, msg: Message) -> bool:
        return msg.info.get("op") in ("connect", "auth")

    def field_aliases(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        return {}

    def value_names(self, path: str) -> tuple[str, ...] | None:
        return None

    def specification(self) -> str | None:
        return None  # its generated tables record no specification version

    def field_keys(self) -> list[KeyInfo] | None:
        from kdissect.zookeeper import fieldkeys  # (only what lists or filters keys needs the table)

        return fieldkeys.field_keys()

    # -- detection ---------------------------------------------------------------------

    def probe(self, head: bytes) -> float:
        return probe.stream_score(head, self.max_frame)

    def probe_boundary(self, head: bytes, to_server: bool, state: ConversationState) -> bool:
        return probe.boundary(head, to_server, state, self.max_frame)

    def new_framer(self, to_server: bool, state: ConversationState | None = None) -> ZkFramer:
        link = conversation(state).link if state is not None else None
        return ZkFramer(self.max_frame, to_server, link)

    def new_state(self) -> ConversationState:
        return ZkConversation()

    # -- dissection --------------------------------------------------------------------

    def dissect(self, msg: Message, state: ConversationState, opts: Options) -> None:
        conv = conversation(state)
        data = msg.data
        if msg.to_server:
            first, conv.client_started = not conv.client_started, True
            if fourlw.is_word(data) and (first or not _is_binary(data)):
                self._word(msg, state, conv)
                return
            if conv.link.word is not None and not _is_binary(data):
                self._after_word(msg)
                return
        else:
            first, conv.server_started = not conv.server_started, True
            if not _is_binary(data) and (conv.link.word is not None or (first and fourlw.looks_like_text(data))):
                fourlw.dissect_reply(msg, data, state.pending.pop(fourlw.PENDING_KEY))
                return
        ctx = Ctx(opts.show_secrets, Budget(opts, state.capture))
        try:
            self._packet(msg, state, conv, first, ctx)
        finally:
            msg.diagnostics.extend(ctx.diags)

    def _packet(self, msg: Message, state: ConversationState, conv: ZkConversation, first: bool, ctx: Ctx) -> None:
        r = WireReader(msg.data)
        n = r.int32()
        msg.fields = [Field("length", n, 0, 4)]
        if n >= 0:
            r.end = min(r.end, 4 + n)
        if msg.to_server:
            if first and session.is_connect_request(msg.data):
                msg.fields += session.dissect_connect_request(msg, r, ctx)
                state.pending.add(session.CONNECT_KEY, msg)
                conv.connect_pending = True
            else:
                msg.fields += packets.request(msg, r, ctx, state)
        elif first and (conv.connect_pending or session.is_connect_response(msg.data)):
            conv.connect_pending = False
            req = state.pending.pop(session.CONNECT_KEY)
            if req is not None:
                msg.peer = req
            msg.fields += session.dissect_connect_response(msg, r, ctx)
        else:
            msg.fields += packets.reply(msg, r, ctx, state)

    def _word(self, msg: Message, state: ConversationState, conv: ZkConversation) -> None:
        fourlw.dissect_request(msg, msg.data)
        conv.link.word = fourlw.word_of(msg.data)
        state.pending.add(fourlw.PENDING_KEY, msg)

    def _after_word(self, msg: Message) -> None:
        msg.kind = "data"
        msg.expects_response = False
        msg.summary = f"{plural(len(msg.data), 'more byte')} after the four-letter word"
        msg.fields = [Field("trailing", msg.data, 0, len(msg.data), hint="bytes")]


DISSECTOR = ZooKeeperDissector()
