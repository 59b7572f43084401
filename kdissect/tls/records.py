"""TLS record content types, and whether a conversation's first bytes are a TLS record: what the
pipeline asks before it needs the TLS layer (connection.py, imported with the first TLS
conversation)."""

from __future__ import annotations

CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE, APPLICATION_DATA, HEARTBEAT = 20, 21, 22, 23, 24


def starts_tls(head: bytes) -> bool:
    """Whether a conversation's first bytes from one side are a TLS record: a handshake record
    (a hello) or, for a capture that starts mid-connection, application data. No broker
    protocol's first four bytes read as such a length (0x16030x.. and 0x17030x.. are hundreds of MB)."""
    return len(head) >= 5 and head[0] in (HANDSHAKE, APPLICATION_DATA) and head[1] == 3 and head[2] <= 4
