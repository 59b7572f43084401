"""Heuristics: does a RocketMQ remoting frame start here? Pure byte checks; never raises."""

from __future__ import annotations

from kdissect.rocketmq.codes import LANGUAGES, REQUEST_CODES, RESPONSE_CODES
from kdissect.rocketmq.tables import MAX_FRAME, SERIALIZE_JSON, SERIALIZE_ROCKETMQ

# Offsets in a frame with a binary header: code, language, version, opaque, flag.
_CODE, _LANG, _FLAG = 8, 10, 17


def _json_score(head: bytes) -> float:
    if len(head) < 9 or head[8] != 0x7B:  # {
        return 0.0
    text = head[9:]
    if b'"code"' in text or b'"extFields"' in text or b'"flag"' in text:
        return 0.95
    return 0.6


def _binary_score(head: bytes, requests_only: bool) -> float:
    if len(head) < _LANG:
        return 0.0
    code = int.from_bytes(head[_CODE:_LANG], "big", signed=True)
    if len(head) >= _FLAG + 4:
        flag = int.from_bytes(head[_FLAG : _FLAG + 4], "big")
        if flag & ~0x3:
            return 0.0
        if requests_only and flag & 0x1:
            return 0.0
        known = RESPONSE_CODES if flag & 0x1 else REQUEST_CODES
    else:
        known = REQUEST_CODES if requests_only else {**REQUEST_CODES, **RESPONSE_CODES}
    if code not in known:
        return 0.0
    if len(head) > _LANG and head[_LANG] not in LANGUAGES:
        return 0.3
    return 0.9


def frame_score(head: bytes, requests_only: bool) -> float:
    """0..1: head[0:4] is the total length, head[4:8] the serialize type and header length,
    and what follows looks like a JSON header, or a binary header with a known code."""
    if len(head) < 9:
        return 0.0
    total = int.from_bytes(head[0:4], "big")
    word = int.from_bytes(head[4:8], "big")
    st, hlen = word >> 24, word & 0xFFFFFF
    if total > MAX_FRAME or hlen == 0 or total < 4 + hlen:
        return 0.0
    if st == SERIALIZE_JSON:
        return _json_score(head)
    if st == SERIALIZE_ROCKETMQ:
        return _binary_score(head, requests_only)
    return 0.0
