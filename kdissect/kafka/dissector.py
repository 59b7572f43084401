"""The Kafka dissector: framing, headers, request/response matching by CorrelationId, and the
body decoder."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kdissect.dissect.base import Budget, ConversationState, Options
from kdissect.errors import DecodeError
from kdissect.framing.length_prefixed import Framer, LengthPrefixedFramer
from kdissect.kafka import body as kbody
from kdissect.kafka import hooks, topicids
from kdissect.kafka.about import ABOUT
from kdissect.kafka.apis import APIS
from kdissect.kafka.body import decode_body
from kdissect.kafka.columns import COLUMNS
from kdissect.kafka.conversation import KafkaConversation
from kdissect.kafka.diagnostics import DIAGNOSTICS
from kdissect.kafka.headers import (
    api_name,
    read_length,
    read_request_header,
    read_response_header,
    response_header_version,
)
from kdissect.kafka.infer import infer_response
from kdissect.kafka.sasl import MAX_MECHANISM, decode_sasl_auth_bytes
from kdissect.kafka.summary import short
from kdissect.model import Field, Group, Message, Severity
from kdissect.text import cut, plural
from kdissect.wire.reader import WireReader

if TYPE_CHECKING:
    from kdissect.dissect.keyinfo import KeyInfo

PRODUCE = 0
SASL_HANDSHAKE = 17
MAX_FRAME = 100 * 1024 * 1024  # the broker's socket.request.max.bytes is 100 MB by default
PROBE_OPTIONS = Options(decode_records=False)
TRAILING = DIAGNOSTICS.key("trailing_bytes")


def _produce_acks(r: WireReader, version: int, flexible: bool) -> int | None:
    """Produce's acks, read ahead of the body: acks=0 requests get no response."""
    try:
        if version >= 3:
            if flexible:
                r.compact_string()
            else:
                r.string16()
        return r.int16()
    except DecodeError:
        return None


def _sasl_mechanism(data: bytes, pos: int, flexible: bool) -> str | None:
    """SaslHandshake's mechanism, read ahead of the body for the SaslAuthenticate decoder, cut
    after MAX_MECHANISM characters: every token of the exchange carries it."""
    try:
        r = WireReader(data, pos)
        name = r.compact_string() if flexible else r.string16()
    except DecodeError:
        return None
    return None if name is None else cut(name, MAX_MECHANISM)


def _request_fit(request: bytes, trailing: float) -> float:
    """How well a whole request decodes by its schema: what tells a Kafka request from other
    bytes whose first words happen to look like a Kafka header. 0.95 with nothing left over;
    `trailing` when only bytes after a complete body are left (Kafka's parsers ignore them, and
    the dissector keeps them with a warning); 0.1 when it does not decode."""
    r = WireReader(request, 4)
    try:
        hdr, _ = read_request_header(r)
    except DecodeError:
        return 0.1
    body = kbody.decode_body(hdr.api_key, hdr.api_version, True, r, PROBE_OPTIONS)
    bad = (Severity.WARNING, Severity.ERROR)
    if any(d.severity in bad and d.key != TRAILING for d in body.diagnostics):
        return 0.1
    return trailing if any(d.key == TRAILING for d in body.diagnostics) else 0.95


class KafkaDissector:
    name = ABOUT.name  # what the registry knows before importing this module (about.py)
    title = ABOUT.title
    ports = ABOUT.ports
    style = ABOUT.style
    max_frame = MAX_FRAME
    columns = COLUMNS
    diagnostics = DIAGNOSTICS
    # Topic ids learned on one connection name topics on another (kafka/topicids.py).
    learns_across_conversations = True

    def holds_secrets(self, msg: Message) -> bool:
        return msg.info.get("op_code") in hooks.CREDENTIAL_APIS or msg.info.get("op") == "SaslToken"

    def specification(self) -> str | None:
        from kdissect.kafka import apis
        from kdissect.text import short_source

        keys = f"API keys {min(apis.APIS)}-{max(apis.APIS)}"
        if apis.SPEC_VERSION is None:
            return f"Apache Kafka message specifications (version not recorded), {keys}"
        where = f" ({short_source(apis.SPEC_SOURCE)})" if apis.SPEC_SOURCE else ""
        return f"Apache Kafka {apis.SPEC_VERSION} message specifications{where}, {keys}"

    # The key tables (kafka/fieldkeys.py) are imported by what lists or filters keys only.

    def field_keys(self) -> list[KeyInfo] | None:
        from kdissect.kafka import fieldkeys

        return fieldkeys.field_keys()

    def field_aliases(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Wireshark's Kafka field names: name -> (message kind or "", target keys)."""
        from kdissect.kafka import fieldkeys

        return fieldkeys.aliases()

    def value_names(self, path: str) -> tuple[str, ...] | None:
        """The symbolic names an enum key's values compare with, or None."""
        from kdissect.kafka import fieldkeys

        return fieldkeys.value_names(path)

    # -- detection ---------------------------------------------------------------------

    def probe(self, head: bytes) -> float:
        """A plausible request header: size, known API key and version, client_id length. A
        request with bytes after its body does not choose Kafka for a conversation."""
        return self._request_score(head, trailing=0.1)

    def _request_score(self, head: bytes, trailing: float) -> float:
        if len(head) < 14:
            return 0.0
        size = int.from_bytes(head[0:4], "big")
        api_key = int.from_bytes(head[4:6], "big", signed=True)
        version = int.from_bytes(head[6:8], "big", signed=True)
        api = APIS.get(api_key)
        if api is None or not 0 <= version <= api.newest or not 10 <= size <= MAX_FRAME:
            return 0.0
        client_len = int.from_bytes(head[12:14], "big", signed=True)
        if client_len < -1 or 10 + max(client_len, 0) > size:
            return 0.0
        text = head[14 : 14 + max(client_len, 0)]
        if client_len > 0 and not all(32 <= b < 127 for b in text):
            return 0.2
        if len(head) >= 4 + size:
            return _request_fit(head[: 4 + size], trailing)
        return 0.8 if api_key in (18, 3, 0, 1) else 0.7

    def probe_boundary(self, head: bytes, to_server: bool, state: ConversationState) -> bool:
        if to_server:
            # In a Kafka conversation, a request whose body is followed by extra bytes is still
            # a request (tshark frames it too): the extra bytes are a warning on it.
            return self._request_score(head, trailing=0.85) >= 0.5
        if len(head) < 8:
            return False
        corr = int.from_bytes(head[4:8], "big", signed=True)
        return state.pending.peek(corr) is not None

    def new_framer(self, to_server: bool, state: ConversationState | None = None) -> Framer:
        # A raw SASL token may be shorter than any Kafka message (OAUTHBEARER's error
        # acknowledgement is one byte): framed, where its boundary is known, while they run.
        short_ok = state.in_raw_sasl_tokens if isinstance(state, KafkaConversation) else None
        return LengthPrefixedFramer(self.max_frame, to_server, min_frame=4, short_ok=short_ok)

    def new_state(self) -> KafkaConversation:
        return KafkaConversation()

    # -- dissection --------------------------------------------------------------------

    def dissect(self, msg: Message, state: ConversationState, opts: Options) -> None:
        if not isinstance(state, KafkaConversation):
            raise TypeError("the Kafka dissector needs the state its new_state() returns")
        data = msg.data
        r = WireReader(data)
        size, length = read_length(r)
        msg.fields.append(length)
        if size != len(data) - 4:
            msg.add(DIAGNOSTICS("length_mismatch",
                                f"the length prefix says {size} bytes, {len(data) - 4} are present", 0))
            r.end = min(r.end, 4 + max(size, 0))
        if state.sasl_raw_tokens and self._sasl_token(msg, state, opts):
            return
        if msg.to_server:
            self._request(msg, r, state, opts)
        else:
            self._response(msg, r, state, opts)

    def _sasl_token(self, msg: Message, state: KafkaConversation, opts: Options) -> bool:
        """SASL_V0_RAW_TOKENS: after a successful SaslHandshake v0 the SASL exchange runs as
        bare length-prefixed tokens, without Kafka headers, until the first real request."""
        if msg.to_server and self.probe(msg.data[:64]) >= 0.5:
            state.sasl_raw_tokens = False
            return False
        if not msg.to_server and len(msg.data) >= 8 and state.pending.peek(
                int.from_bytes(msg.data[4:8], "big", signed=True)) is not None:
            return False
        msg.kind = "request" if msg.to_server else "response"
        msg.expects_response = False
        msg.summary = f"SASL token {msg.kind} ({plural(len(msg.data) - 4, 'byte')})"
        mechanism = state.sasl_mechanism
        msg.info.update(op="SaslToken", sasl_mechanism=mechanism)
        token = msg.data[4:]
        kids = decode_sasl_auth_bytes(mechanism, token, 4, msg.to_server, opts)
        msg.fields.append(Field("sasl_token", None, 4, len(token), kids, hint="struct"))
        return True

    def _request(self, msg: Message, r: WireReader, state: KafkaConversation, opts: Options) -> None:
        msg.kind = "request"
        hdr, hfield = read_request_header(r)
        msg.fields.append(hfield)
        api_key, version, corr, client_id = hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id
        flexible = hdr.header_version >= 2
        name = api_name(api_key)
        info = msg.info
        info["op"] = name
        info["op_code"] = api_key
        info["version"] = version
        info["corr"] = corr
        info["client_id"] = client_id
        summary = f"{name} v{version} request corr={corr}"
        msg.summary = f"{summary} client={short(client_id)}" if client_id else summary
        if api_key == SASL_HANDSHAKE:
            state.sasl_mechanism = _sasl_mechanism(msg.data, r.pos, flexible)
        if api_key == PRODUCE:
            acks = _produce_acks(WireReader(msg.data, r.pos), version, flexible)
            info["acks"] = acks
            if acks == 0:
                msg.expects_response = False
        # acks=0 requests stay matchable: some brokers (librdkafka's mock cluster) answer anyway.
        old = state.pending.add(corr, msg)
        if old is not None and old.info.get("corr") != corr and old.info.get("op_code") in APIS:
            state.drop(old.info["corr"], old.info["op_code"], old.info["version"])
        self._body(msg, r, api_key, version, True, opts, state)

    def _response(self, msg: Message, r: WireReader, state: KafkaConversation, opts: Options) -> None:
        msg.kind = "response"
        if r.remaining < 4:
            r.int32()  # raises Truncated
        corr = int.from_bytes(msg.data[4:8], "big", signed=True)
        req = state.pending.pop(corr)
        msg.info["corr"] = corr
        if req is None:
            known = state.forget(corr)
            if known is not None:
                self._answer(msg, r, corr, *known, opts, state)
                msg.add(DIAGNOSTICS("request_dropped",
                                    f"its request (correlation id {corr}) was dropped from the "
                                    f"{state.pending.limit} waiting for an answer: decoded as its "
                                    f"{msg.info['op']} v{known[1]} response, not linked to it", 4))
                return
            req = self._in_order(msg, state, opts)
        if req is None:
            self._unmatched(msg, r, corr, opts, state)
            return
        msg.peer = req
        self._answer(msg, r, corr, req.info["op_code"], req.info["version"], opts, state)

    def _answer(self, msg: Message, r: WireReader, corr: int, api_key: int, version: int, opts: Options,
                state: KafkaConversation) -> None:
        """A response decoded as the answer to its request, of `api_key` and `version`."""
        state.stop_inferring()
        _, hfield = read_response_header(r, response_header_version(api_key, version))
        msg.fields.append(hfield)
        name = api_name(api_key)
        info = msg.info
        info["op"] = name
        info["op_code"] = api_key
        info["version"] = version
        msg.summary = f"{name} v{version} response corr={corr}"
        self._body(msg, r, api_key, version, False, opts, state)

    def _unmatched(self, msg: Message, r: WireReader, corr: int, opts: Options,
                   state: KafkaConversation) -> None:
        guess = None
        if state.may_infer():
            guess = infer_response(msg.data, opts)
        if guess is not None:
            api_key, versions = guess
            version = versions[0]
            name = api_name(api_key)
            msg.info.update(op=name, op_code=api_key, version=version)
            _, hfield = read_response_header(r, response_header_version(api_key, version))
            msg.fields.append(hfield)
            msg.summary = f"{name} v{version} response corr={corr} (inferred)"
            span = f"v{versions[-1]}-v{version}" if len(versions) > 1 else f"v{version}"
            msg.add(DIAGNOSTICS("api_inferred",
                                f"no request with correlation id {corr} was captured: the body fits only "
                                f"{name} responses ({span}), decoded as v{version}", r.pos))
            self._body(msg, r, api_key, version, False, opts, state)
            return
        _, hfield = read_response_header(r, 0)
        msg.fields.append(hfield)
        msg.summary = f"response corr={corr}"
        msg.add(DIAGNOSTICS("request_not_captured",
                            f"no request with correlation id {corr} was captured: body not decoded", r.pos))
        if r.remaining:
            msg.fields.append(Field("body", r.rest(), r.pos, r.remaining, hint="raw"))

    def _in_order(self, msg: Message, state: KafkaConversation, opts: Options) -> Message | None:
        """IN_ORDER_RESPONSES: a broker answers the requests of a connection in order. A response
        whose correlation id matches nothing is paired with the oldest pending request when its
        body decodes cleanly as that request's response (an ASSUMPTION diagnostic says so)."""
        req = state.pending.oldest()
        if req is None or req.info.get("op_code") not in APIS:
            return None
        api_key, version = req.info["op_code"], req.info["version"]
        r = WireReader(msg.data, 4)
        try:
            read_response_header(r, response_header_version(api_key, version))
        except DecodeError:
            return None
        body = kbody.decode_body(api_key, version, False, r, opts, state)
        if r.remaining or any(d.group in (Group.MALFORMED, Group.UNDECODED) for d in body.diagnostics):
            return None
        state.pending.pop(req.info["corr"])
        msg.add(DIAGNOSTICS("correlation_mismatch",
                            f"correlation id {msg.info['corr']} matches no request: paired with the oldest "
                            f"pending one (correlation id {req.info['corr']}), which its body fits", 4))
        return req

    def _body(self, msg: Message, r: WireReader, api_key: int, version: int, is_request: bool,
              opts: Options, state: KafkaConversation) -> None:
        if opts.teach_only and api_key != SASL_HANDSHAKE and not topicids.teaches(api_key, is_request, version):
            return  # teaches nothing; a SaslHandshake answer changes how the conversation goes on
        budget = Budget(opts, state.capture)
        body = decode_body(api_key, version, is_request, r, opts, state, budget)
        inflated = budget.inflated
        if inflated:
            msg.inflated += inflated
        info = body.info
        if api_key == SASL_HANDSHAKE and version == 0 and not is_request and info.get("error_code") == 0:
            state.sasl_raw_tokens = True
        # (each merged only when there is something to merge: most bodies add no diagnostics)
        fields = body.fields
        if fields:
            msg.fields.extend(fields)
        if info:
            msg.info.update(info)
        diagnostics = body.diagnostics
        if diagnostics:
            msg.diagnostics.extend(diagnostics)
        summary = body.summary
        if summary:
            msg.summary = f"{msg.summary} {summary}"


DISSECTOR = KafkaDissector()
