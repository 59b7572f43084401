"""Key schedules and record decryption, over the `cryptography` package's ciphers.

TLS 1.2 (RFC 5246): the key block from the master secret with the PRF, and the three record
protections: AEAD with an explicit nonce (AES-GCM, AES-CCM; RFC 5288), AEAD with an implicit
nonce (ChaCha20-Poly1305; RFC 7905), and AES-CBC with HMAC, MAC-then-encrypt or, when both sides
agreed to it, encrypt-then-MAC (RFC 7366). TLS 1.3 (RFC 8446): traffic keys from a traffic
secret with HKDF-Expand-Label, the per-record nonce, the inner content type, and key updates.

`decrypt` raises `BadRecord` when a record does not authenticate (a wrong secret, or bytes
that were damaged) and never returns unauthenticated bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from kdissect.tls.suites import HASH_LENGTHS, Suite

TAG = 16  # the AEAD tag of every AEAD suite kdissect decrypts
HASHES = {"SHA": hashlib.sha1, "SHA256": hashlib.sha256, "SHA384": hashlib.sha384}
_HKDF_HASHES = {"SHA256": hashes.SHA256, "SHA384": hashes.SHA384}


class BadRecord(Exception):
    """A record that does not decrypt or authenticate."""


# -- TLS 1.2 ------------------------------------------------------------------------------------


def prf(secret: bytes, label: bytes, seed: bytes, length: int, hash_name: str) -> bytes:
    """TLS 1.2's PRF: P_hash(secret, label + seed) cut to length."""
    digest = HASHES[hash_name]
    seed = label + seed
    out = bytearray()
    a = seed
    while len(out) < length:
        a = hmac.new(secret, a, digest).digest()
        out += hmac.new(secret, a + seed, digest).digest()
    return bytes(out[:length])


def _cuts(lengths: tuple[int, ...]) -> list[tuple[int, int]]:
    out, at = [], 0
    for n in lengths:
        out.append((at, n))
        at += n
    return out


class Protection:
    """One side's record protection; `decrypt(type, version, payload, seq)` -> plaintext."""

    def decrypt(self, ctype: int, version: int, payload: bytes, seq: int) -> tuple[int, bytes]:
        """(content type, plaintext) of one record."""
        raise NotImplementedError


def _aead(cipher: str, key: bytes) -> AESGCM | AESCCM | ChaCha20Poly1305:
    if cipher == "gcm":
        return AESGCM(key)
    if cipher == "ccm":
        return AESCCM(key)
    return ChaCha20Poly1305(key)


def _open(aead: AESGCM | AESCCM | ChaCha20Poly1305, nonce: bytes, data: bytes, aad: bytes) -> bytes:
    try:
        return aead.decrypt(nonce, data, aad)
    except InvalidTag:
        raise BadRecord("the record's authentication tag does not verify") from None


class Aead12(Protection):
    """AES-GCM/CCM (8-byte explicit nonce after a 4-byte implicit part) and ChaCha20-Poly1305
    (the 12-byte IV XOR the sequence number)."""

    def __init__(self, cipher: str, key: bytes, iv: bytes) -> None:
        self.aead = _aead(cipher, key)
        self.iv = iv
        self.explicit = cipher != "chacha20"

    def decrypt(self, ctype: int, version: int, payload: bytes, seq: int) -> tuple[int, bytes]:
        if self.explicit:
            if len(payload) < 8 + TAG:
                raise BadRecord("an encrypted record shorter than its nonce and tag")
            nonce, data = self.iv + payload[:8], payload[8:]
        else:
            if len(payload) < TAG:
                raise BadRecord("an encrypted record shorter than its tag")
            nonce, data = _xor_seq(self.iv, seq), payload
        aad = struct.pack(">QBHH", seq, ctype, version, len(data) - TAG)
        return ctype, _open(self.aead, nonce, data, aad)


class Cbc12(Protection):
    """AES-CBC with an explicit IV and an HMAC, MAC-then-encrypt or encrypt-then-MAC."""

    def __init__(self, key: bytes, mac_key: bytes, hash_name: str, etm: bool) -> None:
        self.algorithm = algorithms.AES(key)
        self.mac_key = mac_key
        self.digest = HASHES[hash_name]
        self.mac_length = HASH_LENGTHS[hash_name]
        self.etm = etm

    def decrypt(self, ctype: int, version: int, payload: bytes, seq: int) -> tuple[int, bytes]:
        m = self.mac_length
        if self.etm:
            body, tag = payload[:-m], payload[-m:]
            if len(payload) < m + 32 or len(body) % 16:
                raise BadRecord("an encrypt-then-MAC record of impossible length")
            self._check(tag, seq, ctype, version, body)
            return ctype, self._cbc(body)[0]
        if len(payload) < 32 or len(payload) % 16:
            raise BadRecord("a CBC record of impossible length")
        content, padded_ok = self._cbc(payload)
        if not padded_ok or len(content) < m:
            raise BadRecord("the record's padding or MAC does not verify")
        content, tag = content[:-m], content[-m:]
        self._check(tag, seq, ctype, version, content)
        return ctype, content

    def _cbc(self, body: bytes) -> tuple[bytes, bool]:
        """The plaintext of IV + ciphertext without its padding, and whether the padding was
        well-formed (with encrypt-then-MAC, a bad padding after a good MAC is a broken peer)."""
        dec = Cipher(self.algorithm, modes.CBC(body[:16])).decryptor()
        plain = dec.update(body[16:]) + dec.finalize()
        pad = plain[-1]
        if pad + 1 > len(plain) or plain[-pad - 1:] != bytes([pad]) * (pad + 1):
            if self.etm:
                raise BadRecord("the record's padding is malformed")
            return b"", False
        return plain[:-pad - 1], True

    def _check(self, tag: bytes, seq: int, ctype: int, version: int, data: bytes) -> None:
        header = struct.pack(">QBHH", seq, ctype, version, len(data))
        if not hmac.compare_digest(hmac.new(self.mac_key, header + data, self.digest).digest(), tag):
            raise BadRecord("the record's MAC does not verify")


def _protection_12(s: Suite, mac_key: bytes, key: bytes, iv: bytes, etm: bool = False) -> Protection:
    if s.aead:
        return Aead12(s.cipher, key, iv)
    return Cbc12(key, mac_key, s.hash, etm)


def protections_12(s: Suite, master: bytes, client_random: bytes, server_random: bytes, etm: bool
                   ) -> tuple[Protection, Protection]:
    """The (client, server) write protections of a TLS 1.2 connection; `etm`: the ServerHello
    accepted encrypt-then-MAC (it applies to CBC suites only)."""
    mac, key, iv = s.mac_length, s.key_length, s.fixed_iv_length
    block = prf(master, b"key expansion", server_random + client_random, 2 * (mac + key + iv), s.prf_hash)
    k = [block[i:i + n] for i, n in _cuts((mac, mac, key, key, iv, iv))]
    return (_protection_12(s, k[0], k[2], k[4], etm), _protection_12(s, k[1], k[3], k[5], etm))


# -- TLS 1.3 ------------------------------------------------------------------------------------


def hkdf_expand_label(secret: bytes, label: bytes, context: bytes, length: int, hash_name: str) -> bytes:
    full = b"tls13 " + label
    info = struct.pack(">HB", length, len(full)) + full + bytes([len(context)]) + context
    return HKDFExpand(_HKDF_HASHES[hash_name](), length, info).derive(secret)


class Aead13(Protection):
    """One side's TLS 1.3 protection under one traffic secret; `next()` is the protection after
    a KeyUpdate."""

    def __init__(self, s: Suite, secret: bytes) -> None:
        self.suite = s
        self.secret = secret
        h = s.prf_hash
        self.aead = _aead(s.cipher, hkdf_expand_label(secret, b"key", b"", s.key_length, h))
        self.iv = hkdf_expand_label(secret, b"iv", b"", 12, h)

    def decrypt(self, ctype: int, version: int, payload: bytes, seq: int) -> tuple[int, bytes]:
        if len(payload) < TAG + 1:
            raise BadRecord("an encrypted record shorter than its tag")
        plain = _open(self.aead, _xor_seq(self.iv, seq), payload, struct.pack(">BHH", ctype, version, len(payload)))
        inner = plain.rstrip(b"\x00")
        if not inner:
            raise BadRecord("a decrypted record without its content type")
        return inner[-1], inner[:-1]

    def next(self) -> Aead13:
        h = self.suite.prf_hash
        return Aead13(self.suite, hkdf_expand_label(self.secret, b"traffic upd", b"", HASH_LENGTHS[h], h))


def _xor_seq(iv: bytes, seq: int) -> bytes:
    n = len(iv)
    return (int.from_bytes(iv, "big") ^ seq).to_bytes(n, "big")
