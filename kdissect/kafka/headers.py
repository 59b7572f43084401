"""Kafka request and response headers, and the header-version quirks.

Quirks, each named after what the broker and clients actually do:
- CLIENT_ID_INT16: the request header's client_id is an int16-length string even in flexible
  (header v2) versions (Kafka's RequestHeader.json: flexibleVersions "none" for ClientId).
- API_VERSIONS_RESPONSE_HEADER_V0: the ApiVersions response always uses response header v0,
  so that a client can read it whatever version it asked for (KIP-511).
- CONTROLLED_SHUTDOWN_V0_HEADER: ControlledShutdown v0 requests use request header v0, which
  has no client_id. Some encoders (Wireshark's test captures) send a client_id anyway: when
  the v0 body (a 4-byte broker id) fits only after an int16 string, header v1 is used.
- PRODUCE_ACKS_0: a Produce request with acks=0 gets no response (dissector.py).
"""

from __future__ import annotations

from typing import NamedTuple

from kdissect import accel
from kdissect.dissect.base import MAX_ELEMENTS
from kdissect.errors import BadLength
from kdissect.kafka.apis import APIS
from kdissect.model import ENUM, Field, struct
from kdissect.wire.reader import WireReader

API_VERSIONS = 18  # the API keys whose headers have quirks
CONTROLLED_SHUTDOWN = 7


_NAMES = {key: api.name for key, api in APIS.items()}


def api_name(api_key: int) -> str:
    # (`in` and a subscript: a dict's get method is looked up and called, which costs more)
    if api_key in _NAMES:
        return _NAMES[api_key]
    return f"Unknown({api_key})"


# The first flexible version of each API key the tables know (None: none is).
_FIRST_FLEXIBLE = {key: api.first_flexible for key, api in APIS.items()}


def is_flexible(api_key: int, version: int) -> bool:
    """Whether (api key, version) uses the flexible encoding (compact lengths, tagged fields):
    header and body alike. False for an unknown API key."""
    if api_key not in _FIRST_FLEXIBLE:
        return False
    first = _FIRST_FLEXIBLE[api_key]
    return first is not None and version >= first


def request_header_version(api_key: int, version: int) -> int:
    if api_key == CONTROLLED_SHUTDOWN and version == 0:
        return 0
    return 2 if is_flexible(api_key, version) else 1


def response_header_version(api_key: int, version: int) -> int:
    if api_key == API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, version) else 0


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int
    tagged: dict[int, bytes]


def skip_tagged_fields(r: WireReader) -> dict[int, bytes]:
    """Read a tagged-field section; returns {tag: raw bytes}. More than MAX_ELEMENTS tagged
    fields in a header is taken for garbage (BadLength)."""
    at = r.pos
    n = r.count(r.uvarint32(), 2)
    if n > MAX_ELEMENTS:
        raise BadLength(f"{n} tagged fields in a header", at)
    out: dict[int, bytes] = {}
    for _ in range(n):
        tag = r.uvarint32()
        size = r.uvarint32()
        out[tag] = r.raw(size)
    return out


CONTROLLED_SHUTDOWN_V0_BODY = 4  # broker_id int32


def _client_id_then_body(r: WireReader) -> bool:
    """Whether an int16 string followed by exactly a ControlledShutdown v0 body remains."""
    if r.remaining < 2:
        return False
    n = int.from_bytes(r.buf[r.pos:r.pos + 2], "big", signed=True)
    return n >= -1 and r.remaining - 2 - max(n, 0) == CONTROLLED_SHUTDOWN_V0_BODY


def read_length(r: WireReader) -> tuple[int, Field]:
    """A message's length prefix (an int32) and its field."""
    start = r.pos
    size = r.int32()
    return size, Field("length", size, start, 4)


def read_request_header(r: WireReader) -> tuple[RequestHeader, Field]:
    start = r.pos
    api_key = r.int16()
    api_version = r.int16()
    corr = r.int32()
    hv = request_header_version(api_key, api_version)
    if hv == 0 and r.remaining != CONTROLLED_SHUTDOWN_V0_BODY and _client_id_then_body(r):
        hv = 1
    client_id = r.string16() if hv >= 1 else None
    client_end = r.pos
    tagged = skip_tagged_fields(r) if hv >= 2 else {}
    children = [
        Field("api_key", api_key, start, 2, hint=ENUM, display=api_name(api_key)),
        Field("api_version", api_version, start + 2, 2),
        Field("correlation_id", corr, start + 4, 4),
    ]
    if hv >= 1:
        children.append(Field("client_id", client_id, start + 8, client_end - start - 8))
    for tag, raw in tagged.items():
        children.append(Field(f"tag_{tag}", raw, hint="raw"))
    hdr = RequestHeader(api_key, api_version, corr, client_id, hv, tagged)
    return hdr, struct("header", children, start, r.pos - start)


def read_response_header(r: WireReader, header_version: int) -> tuple[int, Field]:
    start = r.pos
    corr = r.int32()
    children = [Field("correlation_id", corr, start, 4)]
    if header_version >= 1:
        for tag, raw in skip_tagged_fields(r).items():
            children.append(Field(f"tag_{tag}", raw, hint="raw"))
    return corr, struct("header", children, start, r.pos - start)


accel.bind(globals(), "kdissect.kafka._headers", ("read_length", "read_request_header", "read_response_header"))
