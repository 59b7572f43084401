"""Real TLS sessions in memory: Python's `ssl` (OpenSSL) on both ends, talking through memory
BIOs, with the client writing its secrets to an NSS key log. The bytes each side sends are kept
in the order they were sent, as a capture would see them on the wire."""

from __future__ import annotations

import datetime
import ssl
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

OP_NO_ENCRYPT_THEN_MAC = 1 << 19  # OpenSSL's SSL_OP_NO_ENCRYPT_THEN_MAC (not exported by ssl)
SNI = "broker-1.kafka.example"


@cache
def certificate(kind: str = "rsa") -> tuple[str, str]:
    """(certificate, key) PEM files of a throw-away self-signed certificate."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048) if kind == "rsa" \
        else ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SNI)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    d = Path(tempfile.mkdtemp(prefix="kdissect-tls-"))
    (d / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
    return str(d / "cert.pem"), str(d / "key.pem")


@dataclass
class Session:
    keylog: str
    flows: list[tuple[int, bytes]] = field(default_factory=list)  # (0 client / 1 server, bytes)
    sent: tuple[bytearray, bytearray] = field(default_factory=lambda: (bytearray(), bytearray()))
    version: str = ""
    cipher: str = ""  # OpenSSL's name


def contexts(keylog: str, version: str, cipher: str | None, options: int, cert: str
             ) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(client, server) contexts; the client writes the key log."""
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.check_hostname = False
    client_ctx.verify_mode = ssl.CERT_NONE
    client_ctx.keylog_filename = keylog
    client_ctx.options |= options
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(*certificate(cert))
    for ctx in (client_ctx, server_ctx):
        if version == "1.2":
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        if cipher:
            ctx.set_ciphers(cipher)
    return client_ctx, server_ctx


class _Wire:
    """Two TLS objects joined by memory BIOs; what crosses is recorded in order."""

    def __init__(self, client_ctx: ssl.SSLContext, server_ctx: ssl.SSLContext, s: Session) -> None:
        self.bios = [ssl.MemoryBIO() for _ in range(4)]
        self.ends = (client_ctx.wrap_bio(self.bios[0], self.bios[1], server_side=False, server_hostname=SNI),
                     server_ctx.wrap_bio(self.bios[2], self.bios[3], server_side=True))
        self.s = s

    def pump(self) -> None:
        b = self.bios
        moved = True
        while moved:
            moved = False
            for side, out, into in ((0, b[1], b[2]), (1, b[3], b[0])):
                data = out.read()
                if data:
                    self.s.flows.append((side, data))
                    into.write(data)
                    moved = True

    def handshake(self) -> None:
        done = [False, False]
        while not all(done):
            for i, obj in enumerate(self.ends):
                if not done[i]:
                    try:
                        obj.do_handshake()
                        done[i] = True
                    except ssl.SSLWantReadError:
                        pass
            self.pump()

    def send(self, side: int, data: bytes) -> None:
        self.ends[side].write(data)
        self.s.sent[side].extend(data)
        self.pump()
        got = bytearray()
        while len(got) < len(data):
            try:
                got += self.ends[1 - side].read(1 << 20)
            except ssl.SSLWantReadError:
                self.pump()
        assert bytes(got) == data
        self.pump()


def run(keylog: str, version: str = "1.3", cipher: str | None = None, options: int = 0,
        messages: list[tuple[int, bytes]] | None = None, cert: str = "rsa") -> Session:
    """A handshake, then each (side, bytes) of messages sent by that side and read by the other."""
    s = Session(keylog)
    wire = _Wire(*contexts(keylog, version, cipher, options, cert), s)
    wire.handshake()
    for side, data in messages or []:
        wire.send(side, data)
    client = wire.ends[0]
    s.version = client.version() or ""
    s.cipher = (client.cipher() or ("",))[0]
    return s
