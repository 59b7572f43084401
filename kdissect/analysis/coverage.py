"""What a capture held when little or nothing of it was decoded: link types kdissect does not
read, traffic that is not TCP, and the server ports of conversations no dissector took, with
what their first bytes look like and what is known about the port.

The rules are data: PORT_HINTS (well-known ports of neighbouring services that kdissect does
not decode) here, and the first-bytes signatures the pipeline classifies undecoded
conversations with (`pipeline/detect.py`). The pipeline counts (`pipeline.Counters`); `notes`
turns the counts into lines for standard error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kdissect.text import plural

if TYPE_CHECKING:
    from kdissect.pipeline.counters import Counters

ENCRYPTED = {"TLS", "SSH"}  # of the kinds pipeline/detect.py's signatures name

# Server port -> what usually listens there and is not decoded (only well-established defaults).
PORT_HINTS: dict[int, str] = {
    2888: "ZooKeeper quorum (ZAB) traffic on 2888/3888 is not decoded",
    3888: "ZooKeeper quorum (ZAB) traffic on 2888/3888 is not decoded",
    9093: "9093 is often Kafka over TLS (decrypted with --tls-keylog FILE) or a KRaft controller "
          "listener (plaintext Kafka: --decode-as 9093=kafka)",
}
BUSIEST = 3  # server ports named in the summary
LINK_LINES = 8  # unsupported link types named one a line; the rest in one line


# TLS diagnostic key -> (the line's severity, why those conversations were not decrypted, or not
# to the end); "{}" takes the text of the first such conversation's diagnostic.
TLS_REASONS: dict[str, tuple[str, str]] = {
    "tls.no_keylog": ("note", "not decrypted: no key log given (--tls-keylog FILE, -o tls.keylog_file:FILE "
                              "or SSLKEYLOGFILE)"),
    "tls.keylog_unreadable": ("warning", "not decrypted: the key log cannot be read ({})"),
    "tls.no_secret": ("warning", "not decrypted: the key log holds no secret for them (first: {})"),
    "tls.bad_key": ("warning", "stopped decrypting: records that do not authenticate with the key log's secrets (first: {})"),
    "tls.unsupported": ("warning", "not decrypted: a version or cipher suite kdissect does not decrypt (first: {})"),
    "tls.no_handshake": ("warning", "not decrypted: the capture starts after their handshake"),
    "tls.malformed": ("warning", "stopped decrypting: bytes that break the TLS format (first: {})"),
    "tls.gap": ("warning", "decrypted only up to encrypted bytes missing from the capture (first: {})"),
    "tls.unbuffered": ("warning", "stopped decrypting: the capture's conversations already kept all the bytes "
                                  "they may (first: {})"),
}


def notes(c: Counters, name: str) -> list[str]:
    """Lines for standard error ("warning: ..." or "note: ..."): each unsupported link type, the
    TLS conversations that were not decrypted and why, and, when no message was decoded, what the
    capture held instead."""
    links = sorted(c.unsupported_links.items())
    out = [f"warning: {name}: link type {lt} is not supported; {plural(n, 'frame')} skipped"
           for lt, n in links[:LINK_LINES]]
    if len(links) > LINK_LINES:
        rest = links[LINK_LINES:]
        out.append(f"warning: {name}: {len(rest)} more link types are not supported; "
                   f"{plural(sum(n for _, n in rest), 'frame')} skipped")
    out += tls_notes(c, name)
    if c.messages:
        return out
    unsupported = sum(c.unsupported_links.values())
    other = c.frames - c.tcp_segments - unsupported
    if c.frames == 0:
        return [*out, f"note: {name}: the capture holds no packets"]
    if c.tcp_segments == 0:
        if other:
            out.append(f"note: {name}: {plural(other, 'frame')}, none of them TCP; nothing to decode")
        return out
    text = f"{name}: {plural(c.tcp_segments, 'TCP segment')} in {plural(c.conversations, 'conversation')}"
    if other:
        text += f" (and {plural(other, 'frame')} that {'is' if other == 1 else 'are'} not TCP)"
    if c.recognised:
        text += f"; {c.recognised} recognised but no complete message decoded"
    elif not c.undecoded:
        text += ", none carrying data"
    else:
        text += ", none recognised"
    out.append("note: " + text + _ports(c))
    return out


def tls_notes(c: Counters, name: str) -> list[str]:
    """One line per reason some TLS conversations were not decrypted (to the end)."""
    out = []
    for key, (n, text) in sorted(c.tls_problems.items()):
        severity, reason = TLS_REASONS[key]
        out.append(f"{severity}: {name}: {plural(n, 'TLS conversation')} {reason.format(text)}")
    return out


def _ports(c: Counters) -> str:
    if not c.undecoded:
        return ""
    ranked = sorted(c.undecoded.items(), key=lambda kv: (-kv[1].segments, kv[0][0]))
    shown = ", ".join(f"{port}{' ' + kind if kind else ''} ({plural(t.conversations, 'conversation')}, "
                      f"{plural(t.segments, 'segment')})" for (port, kind), t in ranked[:BUSIEST])
    text = f"; busiest server ports: {shown}"
    hints: list[str] = []
    plain = False
    for i, ((port, kind), _t) in enumerate(ranked):
        if i >= BUSIEST and (kind or port not in PORT_HINTS):
            plain = plain or not kind
            continue
        if kind == "TLS":
            hint = f"port {port} carries TLS: decrypt it with --tls-keylog FILE (an NSS key log)"
        elif kind in ENCRYPTED:
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
