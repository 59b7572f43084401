"""What a capture held when little or nothing of it was decoded: link types kdissect does not
read, traffic that is not TCP, and the server ports of conversations no dissector took, with
what their first bytes look like and what is known about the port.

The rules are data: SIGNATURES (first bytes of a conversation) and PORT_HINTS (well-known
ports of neighbouring services that kdissect does not decode). The pipeline counts
(`pipeline.Counters`); `notes` turns the counts into lines for standard error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kdissect.pipeline import Counters

# First bytes of a conversation -> what it is. Checked on each side's first bytes.
SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x16\x03", "TLS"),  # a TLS handshake record (SSL 3.0 to TLS 1.3 record versions)
    (b"PRI * HTTP/2.0", "HTTP/2"),
    (b"GET ", "HTTP"), (b"POST ", "HTTP"), (b"PUT ", "HTTP"), (b"HEAD ", "HTTP"),
    (b"DELETE ", "HTTP"), (b"OPTIONS ", "HTTP"), (b"PATCH ", "HTTP"), (b"HTTP/1.", "HTTP"),
    (b"SSH-", "SSH"),
)
ENCRYPTED = {"TLS", "SSH"}

# Server port -> what usually listens there and is not decoded (only well-established defaults).
PORT_HINTS: dict[int, str] = {
    2888: "ZooKeeper quorum (ZAB) traffic on 2888/3888 is not decoded",
    3888: "ZooKeeper quorum (ZAB) traffic on 2888/3888 is not decoded",
    9093: "9093 is often Kafka over TLS (not decodable) or a KRaft controller listener "
          "(plaintext Kafka: --decode-as 9093=kafka)",
}
BUSIEST = 3  # server ports named in the summary


def looks_like(head: bytes) -> str:
    """The name of the protocol these first bytes of a conversation start, or ""."""
    for prefix, name in SIGNATURES:
        if head.startswith(prefix):
            return name
    return ""


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def notes(c: Counters, name: str) -> list[str]:
    """Lines for standard error ("warning: ..." or "note: ..."): each unsupported link type, and,
    when no message was decoded, what the capture held instead."""
    out = [f"warning: {name}: link type {lt} is not supported; {_plural(n, 'frame')} skipped"
           for lt, n in sorted(c.unsupported_links.items())]
    if c.messages:
        return out
    unsupported = sum(c.unsupported_links.values())
    other = c.frames - c.tcp_segments - unsupported
    if c.frames == 0:
        return [*out, f"note: {name}: the capture holds no packets"]
    if c.tcp_segments == 0:
        if other:
            out.append(f"note: {name}: {_plural(other, 'frame')}, none of them TCP; nothing to decode")
        return out
    text = f"{name}: {_plural(c.tcp_segments, 'TCP segment')} in {_plural(c.conversations, 'conversation')}"
    if other:
        text += f" (and {_plural(other, 'frame')} that {'is' if other == 1 else 'are'} not TCP)"
    if c.recognised:
        text += f"; {c.recognised} recognised but no complete message decoded"
    elif not c.undecoded:
        text += ", none carrying data"
    else:
        text += ", none recognised"
    out.append("note: " + text + _ports(c))
    return out


def _ports(c: Counters) -> str:
    if not c.undecoded:
        return ""
    ranked = sorted(c.undecoded.items(), key=lambda kv: (-kv[1].segments, kv[0][0]))
    shown = ", ".join(f"{port}{' ' + kind if kind else ''} ({_plural(t.conversations, 'conversation')}, "
                      f"{_plural(t.segments, 'segment')})" for (port, kind), t in ranked[:BUSIEST])
    text = f"; busiest server ports: {shown}"
    hints: list[str] = []
    plain = False
    for i, ((port, kind), _t) in enumerate(ranked):
        if i >= BUSIEST and (kind or port not in PORT_HINTS):
            plain = plain or not kind
            continue
        if kind in ENCRYPTED:
            hint = f"port {port} carries {kind}, which is encrypted and cannot be decoded"
        elif kind:
            hint = f"port {port} carries {kind}, which kdissect does not decode"
        else:
            hint = PORT_HINTS.get(port, "")
            plain = True
        if hint and hint not in hints:
            hints.append(hint)
    for hint in hints:
        text += f"; {hint}"
    if plain:
        text += "; try --decode-as PORT=PROTO"
    return text
