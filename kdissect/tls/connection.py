"""TlsConnection: the TLS layer of one TCP conversation. It cuts each side's stream into records,
reads the hellos, takes the connection's secrets from the key log, decrypts each side's records
in order and returns the application data as stream events for the framers above, each chunk
credited to the frame that completed its record.

Without a key log, without the connection's secrets, with a version or cipher suite kdissect does
not decrypt, or once a side's records stop authenticating or lose their boundaries (a gap), that
side yields no more data; the reason is kept once per connection (`diagnostics`), with the facts
of the handshake (`info`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kdissect.model import Diagnostic
from kdissect.stream.reassembly import Buffered, Data, Event, Gap
from kdissect.text import plural
from kdissect.tls.diagnostics import TLS
from kdissect.tls.handshake import (
    CLIENT_HELLO,
    EXT_EARLY_DATA,
    EXT_ETM,
    EXT_PSK,
    FINISHED,
    KEY_UPDATE,
    SERVER_HELLO,
    BadHandshake,
    HandshakeReader,
    Hello,
    parse_hello,
)
from kdissect.tls.keylog import KeyLog
from kdissect.tls.records import ALERT, APPLICATION_DATA, CHANGE_CIPHER_SPEC, HANDSHAKE, HEARTBEAT
from kdissect.tls.suites import Suite, suite, suite_name, version_name

if TYPE_CHECKING:  # the ciphers (and the cryptography package) load with the first keys
    from kdissect.tls.crypto import Protection

MAX_RECORD = (1 << 14) + 2048  # the largest TLSCiphertext fragment RFC 5246 allows
TLS12, TLS13 = 0x0303, 0x0304
HELLOS = frozenset({CLIENT_HELLO, SERVER_HELLO})
POST_HELLO = frozenset({FINISHED, KEY_UPDATE})
ALERTS = {0: "close_notify", 10: "unexpected_message", 20: "bad_record_mac", 40: "handshake_failure",
          42: "bad_certificate", 43: "unsupported_certificate", 44: "certificate_revoked",
          45: "certificate_expired", 46: "certificate_unknown", 47: "illegal_parameter", 48: "unknown_ca",
          50: "decode_error", 51: "decrypt_error", 70: "protocol_version", 71: "insufficient_security",
          80: "internal_error", 90: "user_canceled", 109: "missing_extension", 112: "unrecognized_name",
          116: "certificate_required", 120: "no_application_protocol"}


@dataclass(slots=True)
class TlsInfo:
    """What a connection's handshake said, for the output; never a secret."""

    version: str = ""
    cipher: str = ""
    sni: str | None = None
    alpn: str | None = None
    resumed: bool = False
    decrypted: bool = False  # some application data was decrypted
    _json: dict[str, Any] | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The `tls` object of a decrypted message (docs/json.md)."""
        if self._json is None:
            self._json = {"version": self.version, "cipher": self.cipher, "sni": self.sni}
        return self._json

    def text(self) -> str:
        parts = [self.version or "TLS", self.cipher]
        if self.sni:
            parts.append(f"SNI {self.sni}")
        if self.alpn:
            parts.append(f"ALPN {self.alpn}")
        if self.resumed:
            parts.append("resumed")
        return ", ".join(p for p in parts if p)


class _Side:
    __slots__ = ("buf", "hs", "ehs", "prot", "seq", "encrypted", "dead", "counted")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.hs = HandshakeReader(HELLOS)  # plaintext handshake
        self.ehs = HandshakeReader(POST_HELLO)  # decrypted TLS 1.3 handshake
        self.prot: Protection | None = None
        self.seq = 0
        self.encrypted = False  # TLS 1.2: a ChangeCipherSpec was sent
        self.dead = False  # nothing more is decrypted on this side
        self.counted = 0  # the bytes of its unfinished record and handshake messages, as last counted

    def kept(self) -> int:
        return len(self.buf) + len(self.hs.buf) + len(self.ehs.buf)


class TlsConnection:
    """`client`: the side that sent the ClientHello (None until seen). What its sides keep of
    unfinished records and handshake messages counts in `pool` (the capture's pool of kept
    bytes, shared with the reassemblers and framers) until `release`."""

    def __init__(self, keylog: KeyLog | None, pool: Buffered | None = None) -> None:
        self.keylog = keylog
        self.pool = pool if pool is not None else Buffered()
        self.client: int | None = None
        self.sides = (_Side(), _Side())
        self.client_hello: Hello | None = None
        self.server_hello: Hello | None = None
        self.suite: Suite | None = None
        self.version = 0
        self.info = TlsInfo()
        self.diagnostics: list[Diagnostic] = []
        self._keys12: tuple[Protection, Protection] | None = None
        self._missing: set[bytes] = set()  # the labels the key log did not have: not looked up again

    # -- the stream ---------------------------------------------------------------------------

    def feed(self, side: int, events: list[Event]) -> list[Event]:
        """The decrypted events of side's next stream events."""
        s = self.sides[side]
        out: list[Event] = []
        for ev in events:
            if s.dead:
                break
            if isinstance(ev, Data):
                self._data(side, s, ev, out)
            elif isinstance(ev, Gap):
                self._kill(s, "gap", f"{ev.lost} encrypted bytes missing between frames {ev.frame_before} "
                                     f"and {ev.frame_after}")
                out.append(ev)
            else:
                out.append(ev)
        self._count(s)
        return out

    def release(self) -> None:
        """It will not be fed again: what its sides keep no longer counts in the pool."""
        for s in self.sides:
            s.buf, s.hs.buf, s.ehs.buf = bytearray(), bytearray(), bytearray()
            self._count(s)

    def _count(self, s: _Side) -> None:
        """Bring the pool up to date with what side s keeps; past the pool's limit a side that
        grew lets go of it, and is not decrypted further."""
        kept = s.kept()
        pool = self.pool
        pool.used += kept - s.counted
        grew, s.counted = kept > s.counted, kept
        if grew and pool.used > pool.limit and not s.dead:
            self._kill(s, "unbuffered", f"{plural(kept, 'byte')} of an unfinished record or handshake message "
                                        f"dropped: the capture's conversations already keep {pool.limit >> 20} MiB")
        if s.dead and kept:
            s.buf, s.hs.buf, s.ehs.buf = bytearray(), bytearray(), bytearray()
            pool.used -= kept
            s.counted = 0

    def _data(self, side: int, s: _Side, ev: Data, out: list[Event]) -> None:
        buf = s.buf
        buf += ev.data
        at, n = 0, len(buf)
        while n - at >= 5 and not s.dead:
            ctype, major, minor = buf[at], buf[at + 1], buf[at + 2]
            length = (buf[at + 3] << 8) | buf[at + 4]
            if not CHANGE_CIPHER_SPEC <= ctype <= HEARTBEAT or major != 3 or length > MAX_RECORD:
                self._kill(s, "malformed", f"frame {ev.frame}: not a TLS record header "
                                           f"({bytes(buf[at:at + 5]).hex()})")
                break
            end = at + 5 + length
            if end > n:
                break
            self._record(side, s, ctype, (major << 8) | minor, bytes(buf[at + 5:end]), ev, out)
            at = end
        if s.dead:
            buf.clear()
        else:
            del buf[:at]

    def _record(self, side: int, s: _Side, ctype: int, version: int, payload: bytes, ev: Data,
                out: list[Event]) -> None:
        if ctype == CHANGE_CIPHER_SPEC:
            if self.version == TLS12:
                s.encrypted, s.seq = True, 0
                s.prot = self._protection12(side)
            return
        if s.encrypted or (ctype == APPLICATION_DATA and self.version == TLS13):
            self._decrypt(side, s, ctype, version, payload, ev, out)
        elif ctype == HANDSHAKE:
            self._handshake(side, s, payload)
        elif ctype == ALERT:
            self._alert(payload)
        elif ctype == APPLICATION_DATA:
            ch = self.client_hello
            if side == self.client and self.server_hello is None and ch and EXT_EARLY_DATA in ch.extensions:
                self._note("unsupported", "0-RTT early data is not decrypted")
                return
            self._kill(s, "no_handshake", "application data before a complete handshake was captured")

    # -- handshake ----------------------------------------------------------------------------

    def _handshake(self, side: int, s: _Side, payload: bytes) -> None:
        try:
            for mtype, body in s.hs.feed(payload):
                hello = parse_hello(body, mtype == SERVER_HELLO)
                if mtype == CLIENT_HELLO:
                    self.client = side
                    self.client_hello = hello
                    self.info.sni = hello.sni()
                elif hello.retry:
                    continue
                elif self.server_hello is not None:  # each would run the key schedule again
                    self._kill(s, "malformed", "a second ServerHello")
                    return
                else:
                    self._server_hello(hello)
        except BadHandshake as e:
            self._kill(s, "malformed", str(e))

    def _server_hello(self, hello: Hello) -> None:
        self.server_hello = hello
        self.version = hello.version
        info = self.info
        info.version = version_name(hello.version)
        info.cipher = suite_name(hello.suites[0])
        alpn = hello.alpn()
        info.alpn = alpn[0] if alpn else None
        ch = self.client_hello
        if hello.version == TLS13:
            info.resumed = EXT_PSK in hello.extensions
        else:
            info.resumed = bool(ch and ch.session_id and ch.session_id == hello.session_id)
        self.suite = suite(hello.suites[0])
        if (self.suite is None or hello.version not in (TLS12, TLS13)
                or self.suite.tls13 != (hello.version == TLS13)):  # a suite of the other version
            self._unsupported()
        elif hello.version == TLS13:
            self._start13()

    def _unsupported(self) -> None:
        self._note("unsupported", f"{self.info.version}, {self.info.cipher}")
        for s in self.sides:
            s.dead = True

    # -- keys -----------------------------------------------------------------------------------

    def _secret(self, label: bytes) -> bytes | None:
        ch = self.client_hello
        if ch is None or self.server_hello is None:
            self._note("no_handshake", "the capture holds no complete ClientHello and ServerHello")
            return None
        if self.keylog is None:
            self._note("no_keylog", "no key log given")
            return None
        if label in self._missing:  # once: each ChangeCipherSpec of a flood looked in the file again
            return None
        secret = self.keylog.secret(label, ch.random)
        if secret is None:
            self._missing.add(label)
            if self.keylog.error:
                self._note("keylog_unreadable", f"{self.keylog.path}: {self.keylog.error}")
            else:
                self._note("no_secret", f"no {label.decode()} for client random {ch.random.hex()}")
        return secret

    def _protection12(self, side: int) -> Protection | None:
        if self._keys12 is None:
            master = self._secret(b"CLIENT_RANDOM")
            if master is None or self.suite is None or self.client_hello is None or self.server_hello is None:
                return None
            from kdissect.tls import crypto

            etm = EXT_ETM in self.server_hello.extensions
            self._keys12 = crypto.protections_12(self.suite, master, self.client_hello.random,
                                                 self.server_hello.random, etm)
        return self._keys12[0 if side == self.client else 1]

    def _start13(self) -> None:
        from kdissect.tls import crypto

        for side, label in ((self.client, b"CLIENT_HANDSHAKE_TRAFFIC_SECRET"),
                            (self._server_side(), b"SERVER_HANDSHAKE_TRAFFIC_SECRET")):
            if side is None:
                continue
            secret = self._secret(label)
            if secret is not None and self.suite is not None:
                s = self.sides[side]
                s.prot, s.seq = crypto.Aead13(self.suite, secret), 0

    def _server_side(self) -> int | None:
        return None if self.client is None else 1 - self.client

    # -- records ----------------------------------------------------------------------------

    def _decrypt(self, side: int, s: _Side, ctype: int, version: int, payload: bytes, ev: Data,
                 out: list[Event]) -> None:
        from kdissect.tls import crypto

        prot = s.prot
        if prot is None:  # no keys (noted once): the side is dropped
            s.dead = True
            if not self.diagnostics:
                self._note("no_handshake", "encrypted records before a complete handshake was captured")
            return
        try:
            inner, plain = prot.decrypt(ctype, version, payload, s.seq)
        except crypto.BadRecord as e:
            if self._early_data(side, s):
                return  # 0-RTT data the server declined: skipped, as the server skips it
            self._kill(s, "bad_key", f"frame {ev.frame}: {e}")
            return
        s.seq += 1
        if inner == APPLICATION_DATA:
            if plain:
                self.info.decrypted = True
                out.append(Data(plain, ev.frame, ev.ts))
        elif inner == HANDSHAKE and self.version == TLS13:
            self._handshake13(side, s, plain)
        elif inner == ALERT:
            self._alert(plain)

    def _early_data(self, side: int, s: _Side) -> bool:
        ch = self.client_hello
        return (self.version == TLS13 and side == self.client and ch is not None
                and EXT_EARLY_DATA in ch.extensions and s.seq == 0)

    def _handshake13(self, side: int, s: _Side, plain: bytes) -> None:
        try:
            messages = s.ehs.feed(plain)
        except BadHandshake as e:
            self._kill(s, "malformed", str(e))
            return
        from kdissect.tls import crypto

        for i, (mtype, _body) in enumerate(messages):
            if i + 1 < len(messages) or s.ehs.buf:  # RFC 8446 5.1; else a record of 3,000 KeyUpdates
                self._kill(s, "malformed", f"a {'Finished' if mtype == FINISHED else 'KeyUpdate'} "
                                           "not at the end of its record")
                return
            if mtype == FINISHED:
                label = b"CLIENT_TRAFFIC_SECRET_0" if side == self.client else b"SERVER_TRAFFIC_SECRET_0"
                secret = self._secret(label)
                if secret is None or self.suite is None:
                    s.dead = True
                    return
                s.prot, s.seq = crypto.Aead13(self.suite, secret), 0
            elif mtype == KEY_UPDATE and isinstance(s.prot, crypto.Aead13):
                s.prot, s.seq = s.prot.next(), 0

    def _alert(self, plain: bytes) -> None:
        if len(plain) >= 2 and plain[0] == 2:
            self._note("alert", f"fatal alert {ALERTS.get(plain[1], plain[1])}")

    # -- diagnostics -------------------------------------------------------------------------------

    def _kill(self, s: _Side, key: str, text: str) -> None:
        s.dead = True
        self._note(key, text)

    def _note(self, key: str, text: str) -> None:
        full = TLS.key(key)
        if all(d.key != full for d in self.diagnostics):
            self.diagnostics.append(TLS(key, text))

    def describe(self) -> dict[str, Any]:
        """The connection's TLS facts and diagnostics (for `conversations`)."""
        info = self.info
        return {"version": info.version or None, "cipher": info.cipher or None, "sni": info.sni,
                "alpn": info.alpn, "resumed": info.resumed, "decrypted": info.decrypted,
                "diagnostics": [d.to_json() for d in self.diagnostics]}
