"""A scripted Kafka SASL responder for capture recording (librdkafka's mock cluster has no SASL).

It answers just enough for a real client to authenticate and fetch metadata: ApiVersions
(v0-v3), SaslHandshake (v0-v1), SaslAuthenticate (v0-v1) with PLAIN, SCRAM-SHA-256/512 (RFC 5802
server side) and OAUTHBEARER (any token), and Metadata v0-v1 naming itself as the one broker.
Other requests close the connection. Only the client side of such a capture is genuine.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import struct
import threading
from typing import Any

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
ITERATIONS = 4096
ADVERTISED = ((18, 0, 3), (17, 0, 1), (36, 0, 1), (3, 0, 1))  # api key, min, max
SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33


def _s16(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _b32(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b


def _api_versions(version: int) -> bytes:
    if version >= 3:
        body = struct.pack(">h", 0) + bytes([len(ADVERTISED) + 1])
        body += b"".join(struct.pack(">hhh", *a) + b"\x00" for a in ADVERTISED)
        return body + struct.pack(">i", 0) + b"\x00"
    body = struct.pack(">hi", 0, len(ADVERTISED)) + b"".join(struct.pack(">hhh", *a) for a in ADVERTISED)
    return body + (struct.pack(">i", 0) if version >= 1 else b"")


class Scram:
    """The server side of one SCRAM exchange."""

    def __init__(self, mechanism: str) -> None:
        self.hash = hashlib.sha256 if mechanism.endswith("256") else hashlib.sha512
        self.salt = os.urandom(16)
        self.first_bare = self.server_first = ""
        self.salted = b""

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self.hash).digest()

    def first(self, msg: str) -> tuple[int, str]:
        self.first_bare = msg.split(",", 2)[2]
        attrs = dict(p.split("=", 1) for p in self.first_bare.split(",") if "=" in p)
        password = USERS.get(attrs.get("n", ""))
        if password is None:
            return SASL_AUTHENTICATION_FAILED, "e=unknown-user"
        self.salted = hashlib.pbkdf2_hmac(self.hash().name, password.encode(), self.salt, ITERATIONS)
        nonce = attrs["r"] + base64.b64encode(os.urandom(12)).decode()
        self.server_first = f"r={nonce},s={base64.b64encode(self.salt).decode()},i={ITERATIONS}"
        return 0, self.server_first

    def final(self, msg: str) -> tuple[int, str]:
        without_proof, _, proof = msg.rpartition(",p=")
        auth = f"{self.first_bare},{self.server_first},{without_proof}".encode()
        client_key = self._hmac(self.salted, b"Client Key")
        signature = self._hmac(self.hash(client_key).digest(), auth)
        expected = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        if base64.b64decode(proof) != expected:
            return SASL_AUTHENTICATION_FAILED, "e=invalid-proof"
        server_sig = self._hmac(self._hmac(self.salted, b"Server Key"), auth)
        return 0, "v=" + base64.b64encode(server_sig).decode()


class Connection:
    def __init__(self, sock: socket.socket, port: int) -> None:
        self.sock, self.port = sock, port
        self.mechanism = ""
        self.scram: Scram | None = None

    def serve(self) -> None:
        with self.sock:
            while (req := self._read()) is not None:
                reply = self._answer(req)
                if reply is None:
                    return
                self.sock.sendall(struct.pack(">i", len(reply)) + reply)

    def _read(self) -> bytes | None:
        head = self._exact(4)
        return None if head is None else self._exact(struct.unpack(">i", head)[0])

    def _exact(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except OSError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def _answer(self, req: bytes) -> bytes | None:
        key, version, corr, client_len = struct.unpack_from(">hhih", req, 0)
        body_at = 10 + max(client_len, 0)
        head = struct.pack(">i", corr)
        if key == 18:
            return head + _api_versions(version)
        if key == 17:
            return head + self._handshake(req, body_at)
        if key == 36:
            return head + self._authenticate(req, body_at)
        if key == 3:
            broker = struct.pack(">i", 1) + _s16("127.0.0.1") + struct.pack(">i", self.port)
            if version >= 1:
                return head + struct.pack(">i", 1) + broker + _s16(None) + struct.pack(">ii", 1, 0)
            return head + struct.pack(">i", 1) + broker + struct.pack(">i", 0)
        return None

    def _handshake(self, req: bytes, at: int) -> bytes:
        n = struct.unpack_from(">h", req, at)[0]
        self.mechanism = req[at + 2 : at + 2 + n].decode()
        err = 0 if self.mechanism in MECHANISMS else UNSUPPORTED_SASL_MECHANISM
        return struct.pack(">hi", err, len(MECHANISMS)) + b"".join(_s16(m) for m in MECHANISMS)

    def _authenticate(self, req: bytes, at: int) -> bytes:
        n = struct.unpack_from(">i", req, at)[0]
        err, out = self._step(req[at + 4 : at + 4 + n])
        message = None if err == 0 else "authentication failed"
        return struct.pack(">h", err) + _s16(message) + _b32(out.encode()) + struct.pack(">q", 0)

    def _step(self, token: bytes) -> tuple[int, str]:
        text = token.decode("utf-8", "replace")
        if self.mechanism == "PLAIN":
            _, user, password = (text.split("\x00") + ["", ""])[:3]
            return (0, "") if USERS.get(user) == password else (SASL_AUTHENTICATION_FAILED, "")
        if self.mechanism == "OAUTHBEARER":
            return 0, ""
        if self.scram is None:
            self.scram = Scram(self.mechanism)
            return self.scram.first(text)
        return self.scram.final(text)


class Responder:
    """Listens on 127.0.0.1 (a random port); one thread per connection."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.port: int = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=Connection(sock, self.port).serve, daemon=True).start()

    def stop(self) -> None:
        self.server.close()


def client_conf(port: int, mechanism: str, user: str = "alice", password: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": f"127.0.0.1:{port}", "client.id": "kd-sasl",
                            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                            "reconnect.backoff.ms": 2000, "reconnect.backoff.max.ms": 5000}
    if mechanism == "OAUTHBEARER":
        conf.update({"enable.sasl.oauthbearer.unsecure.jwt": True,
                     "sasl.oauthbearer.config": f"principal={user} extension_traceId=42"})
    else:
        conf.update({"sasl.username": user, "sasl.password": password or USERS[user]})
    return conf
