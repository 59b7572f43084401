"""The Kafka dissector: framing, headers, request/response matching by CorrelationId, and the
body decoder."""

from __future__ import annotations

from kdissect.dissect.base import ConversationState, Options
from kdissect.errors import DecodeError
from kdissect.framing.length_prefixed import Framer, LengthPrefixedFramer
from kdissect.kafka import body as kbody
from kdissect.kafka.apis import APIS
from kdissect.kafka.headers import (
    api_name,
    read_request_header,
    read_response_header,
    response_header_version,
)
from kdissect.model import Field, Group, Message, Severity, Diagnostic
from kdissect.wire.reader import WireReader

PRODUCE = 0
MAX_FRAME = 100 * 1024 * 1024  # the broker's socket.request.max.bytes is 100 MB by default


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


class KafkaDissector:
    name = "kafka"
    title = "Kafka"
    ports = (9092,)
    max_frame = MAX_FRAME

    # -- detection ---------------------------------------------------------------------

    def probe(self, head: bytes) -> float:
        """A plausible request header: size, known API key and version, client_id length."""
        if len(head) < 14:
            return 0.0
        size = int.from_bytes(head[0:4], "big")
        api_key = int.from_bytes(head[4:6], "big", signed=True)
        version = int.from_bytes(head[6:8], "big", signed=True)
        api = APIS.get(api_key)
        if api is None or not 0 <= version <= api[2] or not 10 <= size <= MAX_FRAME:
            return 0.0
        client_len = int.from_bytes(head[12:14], "big", signed=True)
        if client_len < -1 or 10 + max(client_len, 0) > size:
            return 0.0
        text = head[14 : 14 + max(client_len, 0)]
        if client_len > 0 and not all(32 <= b < 127 for b in text):
            return 0.2
        return 0.8 if api_key in (18, 3, 0, 1) else 0.7

    def probe_boundary(self, head: bytes, to_server: bool, state: ConversationState) -> bool:
        if to_server:
            return self.probe(head) >= 0.5
        if len(head) < 8:
            return False
        corr = int.from_bytes(head[4:8], "big", signed=True)
        return state.pending.peek(corr) is not None

    def new_framer(self, to_server: bool, state: ConversationState | None = None) -> Framer:
        return LengthPrefixedFramer(self.max_frame, to_server, min_frame=4)

    def new_state(self) -> ConversationState:
        return ConversationState()

    # -- dissection --------------------------------------------------------------------

    def dissect(self, msg: Message, state: ConversationState, opts: Options) -> None:
        r = WireReader(msg.data)
        size = r.int32()
        msg.fields.append(Field("length", size, 0, 4))
        if msg.to_server:
            self._request(msg, r, state, opts)
        else:
            self._response(msg, r, state, opts)

    def _request(self, msg: Message, r: WireReader, state: ConversationState, opts: Options) -> None:
        msg.kind = "request"
        hdr, hfield = read_request_header(r)
        msg.fields.append(hfield)
        name = api_name(hdr.api_key)
        msg.info.update(op=name, op_code=hdr.api_key, version=hdr.api_version,
                        corr=hdr.correlation_id, client_id=hdr.client_id)
        msg.summary = f"{name} v{hdr.api_version} request corr={hdr.correlation_id}"
        if hdr.client_id:
            msg.summary += f" client={hdr.client_id}"
        if hdr.api_key == PRODUCE:
            acks = _produce_acks(WireReader(msg.data, r.pos), hdr.api_version, hdr.header_version >= 2)
            msg.info["acks"] = acks
            if acks == 0:
                msg.expects_response = False
        # acks=0 requests stay matchable: some brokers (librdkafka's mock cluster) answer anyway.
        state.pending.add(hdr.correlation_id, msg)
        self._body(msg, r, hdr.api_key, hdr.api_version, True, opts)

    def _response(self, msg: Message, r: WireReader, state: ConversationState, opts: Options) -> None:
        msg.kind = "response"
        if r.remaining < 4:
            r.int32()  # raises Truncated
        corr = int.from_bytes(msg.data[4:8], "big", signed=True)
        req = state.pending.pop(corr)
        msg.info["corr"] = corr
        if req is None:
            _, hfield = read_response_header(r, 0)
            msg.fields.append(hfield)
            msg.summary = f"response corr={corr}"
            msg.add(Diagnostic(Severity.WARNING, Group.UNDECODED, "kafka.request_not_captured",
                               f"no request with correlation id {corr} was captured: body not decoded", r.pos))
            if r.remaining:
                msg.fields.append(Field("body", r.rest(), r.pos, r.remaining, hint="raw"))
            return
        msg.peer = req
        api_key, version = req.info["op_code"], req.info["version"]
        _, hfield = read_response_header(r, response_header_version(api_key, version))
        msg.fields.append(hfield)
        name = api_name(api_key)
        msg.info.update(op=name, op_code=api_key, version=version)
        msg.summary = f"{name} v{version} response corr={corr}"
        self._body(msg, r, api_key, version, False, opts)

    def _body(self, msg: Message, r: WireReader, api_key: int, version: int, is_request: bool,
              opts: Options) -> None:
        body = kbody.decode_body(api_key, version, is_request, r, opts)
        if body is None:
            return
        msg.fields.extend(body.fields)
        msg.info.update(body.info)
        msg.diagnostics.extend(body.diagnostics)
        if body.summary:
            msg.summary += " " + body.summary


DISSECTOR = KafkaDissector()
