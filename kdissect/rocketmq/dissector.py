"""The RocketMQ remoting dissector: frame, header (JSON or ROCKETMQ binary, per frame), matching
by (initiating side, opaque), bodies by request code, summaries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kdissect.dissect.base import MALFORMED_MARK, Budget, ConversationState, Options
from kdissect.errors import BadLength, BadValue, DecodeError, Truncated
from kdissect.framing.length_prefixed import Framer, LengthPrefixedFramer
from kdissect.model import ENUM, FLAGS, Field, Message
from kdissect.rocketmq.about import ABOUT
from kdissect.rocketmq.bodies import Body, BodyContext, decode_body
from kdissect.rocketmq.codes import LANGUAGES, REQUEST_CODES
from kdissect.rocketmq.columns import COLUMNS
from kdissect.rocketmq.diagnostics import DIAGNOSTICS
from kdissect.rocketmq.extfields import CREDENTIAL_EXT_FIELDS, ext_fields
from kdissect.rocketmq.header import Header, decode_binary, decode_json
from kdissect.rocketmq.probe import frame_score
from kdissect.rocketmq.summary import MAX_REMARK, request_summary, response_summary
from kdissect.rocketmq.tables import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    HEADER_FLAGS,
    MAX_FRAME,
    PARTIAL_SUCCESS_CODES,
    PULL_STATUS_CODES,
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    SERIALIZE_TYPES,
    SUCCESS,
    flag_names,
    request_name,
    response_name,
)
from kdissect.wire.reader import WireReader

if TYPE_CHECKING:
    from kdissect.dissect.keyinfo import KeyInfo

MIN_FRAME = 5  # the serialize type and header length, and a header byte (the probe's bound)

# Ext-field keys copied into msg.info (full camelCase key -> info key).
INFO_KEYS = (("topic", "topic"), ("queueId", "queue_id"), ("consumerGroup", "group"), ("producerGroup", "group"))


def _read_header(data: bytes, serialize_type: int, hlen: int) -> Header:
    if serialize_type == SERIALIZE_JSON:
        return decode_json(data[8 : 8 + hlen], 8)
    if serialize_type == SERIALIZE_ROCKETMQ:
        return decode_binary(data, 8, 8 + hlen)
    raise BadValue(f"unknown serialize type {serialize_type}", 4)


def _header(data: bytes, serialize_type: int, hlen: int) -> tuple[Header, DecodeError | None]:
    """The header, and the error it breaks with part-way (cut short): then the Header holds
    what was read before the break."""
    captured = len(data) - 8
    try:
        h = _read_header(data, serialize_type, hlen)
    except DecodeError as e:
        found = e.partial
        e.partial = None
        if not isinstance(found, Header):
            raise
        if hlen > captured and not isinstance(e, Truncated):
            cut = Truncated(f"header: needs {hlen} bytes, {captured} captured ({e})", e.offset)
            return found, cut
        return found, e
    if hlen > captured:
        return h, Truncated(f"header: needs {hlen} bytes, {captured} captured", len(data))
    return h, None


def _header_fields(h: Header, is_request: bool) -> list[Field]:
    out: list[Field] = []
    for name, f in h.fields.items():
        if name == "code" and isinstance(f.value, int):
            f.hint, f.display = ENUM, (request_name if is_request else response_name)(f.value)
        elif name == "language":
            code = h.language_code
            if code is not None:
                f.value, f.hint, f.display = code, ENUM, LANGUAGES.get(code, f"UNKNOWN_{code}")
        elif name == "flag" and isinstance(f.value, int):
            f.hint, f.display = FLAGS, flag_names(f.value, HEADER_FLAGS)
        out.append(f)
    return out + h.extra


class RocketMQDissector:
    name = ABOUT.name  # what the registry knows before importing this module (about.py)
    title = ABOUT.title
    ports = ABOUT.ports
    style = ABOUT.style
    max_frame = MAX_FRAME
    columns = COLUMNS
    diagnostics = DIAGNOSTICS
    learns_across_conversations = False

    def holds_secrets(self, msg: Message) -> bool:
        return any(name in msg.data for name in CREDENTIAL_EXT_FIELDS)

    def field_aliases(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        return {}

    def value_names(self, path: str) -> tuple[str, ...] | None:
        return None

    def specification(self) -> str | None:
        return None  # its generated tables record no specification version

    def field_keys(self) -> list[KeyInfo] | None:
        return None  # no key table: `kdissect fields rocketmq --from CAPTURE` lists what a capture holds

    def probe(self, head: bytes) -> float:
        return frame_score(head, requests_only=True)

    def probe_boundary(self, head: bytes, to_server: bool, state: ConversationState) -> bool:
        return frame_score(head, requests_only=False) >= 0.5

    def new_framer(self, to_server: bool, state: ConversationState | None = None) -> Framer:
        return LengthPrefixedFramer(self.max_frame, to_server, MIN_FRAME, empty=False)

    def new_state(self) -> ConversationState:
        return ConversationState()

    def dissect(self, msg: Message, state: ConversationState, opts: Options) -> None:
        data = msg.data
        r = WireReader(data)
        total = r.uint32()
        msg.fields.append(Field("length", total, 0, 4))
        st = r.uint8()
        msg.fields.append(Field("serialize_type", st, 4, 1, hint=ENUM, display=SERIALIZE_TYPES.get(st, f"UNKNOWN_{st}")))
        hlen = int.from_bytes(r.raw(3), "big")
        msg.fields.append(Field("header_length", hlen, 5, 3))
        if total != len(data) - 4:
            msg.add(DIAGNOSTICS("length", f"length says {total} bytes, {len(data) - 4} present", 0))
        if hlen > total - 4:
            raise BadLength(f"header length {hlen} exceeds the frame length {total}", 5)
        h, broke = _header(data, st, hlen)
        for d in h.diagnostics:
            msg.add(d)
        if broke is None and (h.code is None or h.opaque is None):
            raise BadValue("header without code or opaque", 8)
        # A header cut short before its flag: the direction tells requests from responses.
        is_request = not h.flag & FLAG_RESPONSE if broke is None or "flag" in h.fields else msg.to_server
        msg.kind = "request" if is_request else "response"
        msg.fields += _header_fields(h, is_request)
        req = self._match(msg, state, h, is_request) if h.opaque is not None else None
        req_code = h.code if is_request else (req.info.get("op_code") if req is not None else None)
        ext_field, ext = ext_fields(h, req_code, is_request, opts.show_secrets)
        if ext_field is not None:
            msg.fields.append(ext_field)
        if broke is not None:
            if h.code is not None:
                self._describe(msg, h, req, ext, Body())
            raise broke
        ctx = BodyContext(data, 8 + hlen, req_code, ext, opts, req is not None, Budget(opts, state.capture))
        body = decode_body(ctx, is_request)
        msg.inflated = ctx.budget.inflated
        msg.fields += body.fields
        for d in body.diagnostics:
            msg.add(d)
        self._describe(msg, h, req, ext, body)

    @staticmethod
    def _match(msg: Message, state: ConversationState, h: Header, is_request: bool) -> Message | None:
        if is_request:
            msg.expects_response = not h.flag & FLAG_ONEWAY
            if msg.expects_response:
                state.pending.add((msg.to_server, h.opaque), msg)
            return None
        req: Message | None = state.pending.pop((not msg.to_server, h.opaque))
        if req is not None:
            msg.peer = req
        return req

    @staticmethod
    def _describe(msg: Message, h: Header, req: Message | None, ext: dict[str, Any], body: Body) -> None:
        code = h.code
        assert code is not None
        info: dict[str, Any] = {"corr": h.opaque, "version": h.version, "serialize_type": SERIALIZE_TYPES.get(h.serialize_type)}
        lang = h.language_code
        info["language"] = LANGUAGES.get(lang) if lang is not None else h.language
        for key, name in INFO_KEYS:
            if ext.get(key) not in (None, "") and name not in info:
                info[name] = ext[key]
        if msg.kind == "request":
            name = request_name(code)
            info.update(op=name, op_code=code, error_code=None, error=None)
            msg.summary = request_summary(name, code, ext, body)
            if code not in REQUEST_CODES:
                msg.add(DIAGNOSTICS("unknown_code", f"unknown request code {code}", 8))
        else:
            name = response_name(code)
            req_code = req.info.get("op_code") if req is not None else None
            op = req.info.get("op") if req is not None else "RESPONSE"
            for k in ("topic", "queue_id", "group"):
                if req is not None and k not in info and k in req.info:
                    info[k] = req.info[k]
            info.update(op=op, op_code=req_code, response_code=code, error_code=code, error=None if code == SUCCESS else name)
            msg.summary = response_summary(name, code, req_code, h.remark, ext, body,
                                           req.info if req is not None else None)
            _response_diagnostic(msg, code, name, h.remark)
        if body.messages is not None:
            info["messages"] = len(body.messages)
        if body.broken:
            msg.summary += " " + MALFORMED_MARK
        msg.info.update(info)


def _response_diagnostic(msg: Message, code: int, name: str, remark: str | None) -> None:
    if code == SUCCESS or code in PULL_STATUS_CODES:
        return
    if remark and len(remark) > MAX_REMARK:
        remark = remark[: MAX_REMARK - 3] + "..."
    text = f"response {name} ({code})" + (f": {remark}" if remark else "")
    if code in PARTIAL_SUCCESS_CODES:
        msg.add(DIAGNOSTICS("partial_success", text, 8))
    else:
        msg.add(DIAGNOSTICS("error_response", text, 8))


DISSECTOR = RocketMQDissector()
