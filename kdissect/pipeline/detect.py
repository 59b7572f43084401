"""Which dissector decodes a conversation: `--decode-as` and the port table first, then the
probes on the first bytes each side sent; past MAX_UNDECIDED_BYTES, or MAX_UNDECIDED_EVENTS
events held, without a match, detection gives up. For a conversation no dissector took, what
its first bytes look like (TLS, HTTP, SSH: SIGNATURES) goes into the counts of what was not
decoded.
"""

from __future__ import annotations

from typing import Any

from kdissect.dissect.base import Dissector
from kdissect.protocols import DissectorRegistry
from kdissect.stream.flow import PROBE_BYTES, Conversation

__all__ = ["MAX_UNDECIDED_BYTES", "MAX_UNDECIDED_EVENTS", "SIGNATURES", "DissectorRegistry", "choose", "first_bytes", "looks_like",
           "undecidable"]

MAX_UNDECIDED_BYTES = 16 * 1024  # give up detecting after this much data without a match
# ... or after this many events held (a gap is no data: acknowledgements of bytes never seen would
# otherwise be held, one event each, for as long as the conversation lasts)
MAX_UNDECIDED_EVENTS = 16 * 1024
# A side's head is probed again once it has grown by an eighth since it last was (by a byte while
# under 16 bytes), once it is whole (PROBE_BYTES), and at the conversation's end: a probe decodes
# the first message whole when the head holds it, so probing at every size a head grows through a
# byte at a time decoded that message some 2,000 times.
REPROBE_SHARE = 8

# First bytes of a conversation -> what it is. Checked on each side's first bytes.
SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x16\x03", "TLS"),  # a TLS handshake record (SSL 3.0 to TLS 1.3 record versions)
    (b"PRI * HTTP/2.0", "HTTP/2"),
    (b"GET ", "HTTP"), (b"POST ", "HTTP"), (b"PUT ", "HTTP"), (b"HEAD ", "HTTP"),
    (b"DELETE ", "HTTP"), (b"OPTIONS ", "HTTP"), (b"PATCH ", "HTTP"), (b"HTTP/1.", "HTTP"),
    (b"SSH-", "SSH"),
)


def choose(registry: DissectorRegistry, conv: Conversation[Any], final: bool = False) -> tuple[Dissector, int] | None:
    """(dissector, client side) for conv, or None while nothing matches; `final`: the conversation
    has ended, its heads are probed if they grew at all."""
    return _by_port(registry, conv) or _by_probe(registry, conv, final)


def undecidable(conv: Conversation[Any]) -> bool:
    """Whether detection gives up on conv: too much held without a match, or more kept by the
    capture than its pool allows (held events count in it) when conv held more."""
    held, pool = conv.held, conv.reasm[0].pool
    return (sum(conv.held_bytes) > MAX_UNDECIDED_BYTES or len(held[0]) + len(held[1]) > MAX_UNDECIDED_EVENTS
            or pool.used > pool.limit)


def _by_port(registry: DissectorRegistry, conv: Conversation[Any]) -> tuple[Dissector, int] | None:
    hit = registry.by_port(conv.a[1], conv.b[1])
    if hit is None:
        return None
    dissector, b_is_server = hit
    return dissector, (0 if b_is_server else 1)


def _by_probe(registry: DissectorRegistry, conv: Conversation[Any], final: bool) -> tuple[Dissector, int] | None:
    """The probes look at a side's head once it has grown enough since they last did
    (REPROBE_SHARE): they judge the bytes alone, and a head only grows, so what they found
    nothing in before stays so (each side is probed about 60 times at most, however many
    segments it is held in)."""
    sides = (conv.client,) if conv.client is not None else (0, 1)
    best: tuple[Dissector, int, float] | None = None
    for side in sides:
        size, last = conv.head_size(side), conv.probed[side]
        if size < 8 or size == last or (size - last < last // REPROBE_SHARE and size < PROBE_BYTES and not final):
            continue
        conv.probed[side] = size
        hit = registry.probe(conv.head(side))
        if hit and (best is None or hit[1] > best[2]):
            best = (hit[0], side, hit[1])
    return (best[0], best[1]) if best else None


def looks_like(head: bytes) -> str:
    """The name of the protocol these first bytes of a conversation start, or ""."""
    for prefix, name in SIGNATURES:
        if head.startswith(prefix):
            return name
    return ""


def first_bytes(conv: Conversation[Any]) -> str:
    """What the first bytes of a conversation look like (the client's first), or ""."""
    order = (conv.client, 1 - conv.client) if conv.client is not None else (0, 1)
    for side in order:
        kind = looks_like(conv.head(side))
        if kind:
            return kind
    return ""
