"""The handshake messages kdissect reads: the two hellos (randoms, session id, cipher suite,
version, SNI, ALPN, encrypt-then-MAC, resumption), and, in decrypted TLS 1.3 handshake records,
Finished and KeyUpdate, which change a side's keys. `HandshakeReader` cuts one side's handshake
stream into messages, skipping the bodies of those it does not read without holding them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kdissect.text import cut

CLIENT_HELLO, SERVER_HELLO, FINISHED, KEY_UPDATE = 1, 2, 20, 24
MAX_HELLO = 64 * 1024  # a hello is a few KB at most (post-quantum key shares included)
# The server name kept of a ClientHello, in characters: a DNS name has 253 at most, where the
# extension allows 64 KB, and every decrypted message of the connection carries the name.
MAX_SNI = 255
# The ServerHello random of a HelloRetryRequest (RFC 8446 section 4.1.3).
HELLO_RETRY = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
EXT_SERVER_NAME, EXT_ALPN, EXT_ETM, EXT_PSK, EXT_EARLY_DATA, EXT_VERSIONS = 0, 16, 22, 41, 42, 43


class BadHandshake(Exception):
    """A hello that breaks the format."""


@dataclass(slots=True)
class Hello:
    random: bytes
    session_id: bytes
    version: int  # legacy_version, or supported_versions' choice in a ServerHello
    suites: list[int]  # offered (ClientHello) or chosen (ServerHello, one)
    extensions: dict[int, bytes] = field(default_factory=dict)

    @property
    def retry(self) -> bool:
        return self.random == HELLO_RETRY

    def sni(self) -> str | None:
        data = self.extensions.get(EXT_SERVER_NAME)
        if not data or len(data) < 5 or data[2] != 0:
            return None
        n = struct.unpack_from(">H", data, 3)[0]
        name = data[5:5 + n]
        return cut(name.decode("ascii", "replace"), MAX_SNI) if len(name) == n else None

    def alpn(self) -> list[str]:
        data = self.extensions.get(EXT_ALPN) or b""
        out, at = [], 2
        while at < len(data):
            n = data[at]
            out.append(data[at + 1:at + 1 + n].decode("ascii", "replace"))
            at += 1 + n
        return out


def parse_hello(body: bytes, server: bool) -> Hello:
    try:
        return _parse_hello(body, server)
    except (struct.error, IndexError):
        raise BadHandshake("a hello cut short") from None


def _parse_hello(body: bytes, server: bool) -> Hello:
    version = struct.unpack_from(">H", body)[0]
    random = body[2:34]
    at = 34
    sid_len = body[at]
    session_id = body[at + 1:at + 1 + sid_len]
    at += 1 + sid_len
    if server:
        suites = [struct.unpack_from(">H", body, at)[0]]
        at += 3  # suite, compression method
    else:
        n = struct.unpack_from(">H", body, at)[0]
        suites = list(struct.unpack_from(f">{n // 2}H", body, at + 2))
        at += 2 + n
        at += 1 + body[at]  # compression methods
    hello = Hello(random, session_id, version, suites)
    if len(random) != 32 or len(session_id) != sid_len or at > len(body):
        raise BadHandshake("a hello cut short")
    if at + 2 <= len(body):
        end = at + 2 + struct.unpack_from(">H", body, at)[0]
        if end > len(body):
            raise BadHandshake("hello extensions longer than the hello")
        at += 2
        while at + 4 <= end:
            etype, elen = struct.unpack_from(">HH", body, at)
            hello.extensions[etype] = body[at + 4:at + 4 + elen]
            at += 4 + elen
    versions = hello.extensions.get(EXT_VERSIONS)
    if server and versions is not None and len(versions) == 2:
        hello.version = struct.unpack(">H", versions)[0]
    return hello


class HandshakeReader:
    """One side's handshake messages, from the bytes of its handshake records in order. Only the
    messages whose types are `wanted` are kept whole (up to MAX_HELLO bytes); the others are
    counted past."""

    __slots__ = ("wanted", "buf", "skip")

    def __init__(self, wanted: frozenset[int]) -> None:
        self.wanted = wanted
        self.buf = bytearray()
        self.skip = 0  # body bytes of an unwanted message still to pass over

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """The wanted messages these bytes complete, as (type, body)."""
        if self.skip:
            n = min(self.skip, len(data))
            self.skip -= n
            data = data[n:]
        self.buf += data
        out: list[tuple[int, bytes]] = []
        buf = self.buf
        while len(buf) >= 4:
            mtype = buf[0]
            length = int.from_bytes(buf[1:4], "big")
            if mtype not in self.wanted:
                n = min(length, len(buf) - 4)
                self.skip = length - n
                del buf[:4 + n]
                if self.skip:
                    break
                continue
            if length > MAX_HELLO:
                raise BadHandshake(f"a handshake message of {length} bytes")
            if len(buf) < 4 + length:
                break
            out.append((mtype, bytes(buf[4:4 + length])))
            del buf[:4 + length]
        return out
