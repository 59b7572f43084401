"""The cipher suites kdissect decrypts, as data: IANA code point -> IANA name. A name says all
there is to know (RFC 5246 / RFC 8446 naming): the bulk cipher and its key length, and the hash
of the PRF / HKDF and of the record MAC. `suite(code)` turns a name into `Suite` parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

NAMES: dict[int, str] = {
    # TLS 1.3 (RFC 8446)
    0x1301: "TLS_AES_128_GCM_SHA256",
    0x1302: "TLS_AES_256_GCM_SHA384",
    0x1303: "TLS_CHACHA20_POLY1305_SHA256",
    0x1304: "TLS_AES_128_CCM_SHA256",
    # TLS 1.2: RSA key transport
    0x002F: "TLS_RSA_WITH_AES_128_CBC_SHA",
    0x0035: "TLS_RSA_WITH_AES_256_CBC_SHA",
    0x003C: "TLS_RSA_WITH_AES_128_CBC_SHA256",
    0x003D: "TLS_RSA_WITH_AES_256_CBC_SHA256",
    0x009C: "TLS_RSA_WITH_AES_128_GCM_SHA256",
    0x009D: "TLS_RSA_WITH_AES_256_GCM_SHA384",
    # TLS 1.2: DHE
    0x0033: "TLS_DHE_RSA_WITH_AES_128_CBC_SHA",
    0x0039: "TLS_DHE_RSA_WITH_AES_256_CBC_SHA",
    0x0067: "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256",
    0x006B: "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256",
    0x009E: "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256",
    0x009F: "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384",
    0xCCAA: "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    # TLS 1.2: ECDHE
    0xC009: "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    0xC00A: "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    0xC013: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    0xC014: "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    0xC023: "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    0xC024: "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384",
    0xC027: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    0xC028: "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
    0xC02B: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    0xC02C: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    0xC02F: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    0xC030: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    0xCCA8: "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    0xCCA9: "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    # TLS 1.2: AES-CCM (RFC 6655, RFC 7251), whose names omit the PRF's hash (SHA-256)
    0xC09C: "TLS_RSA_WITH_AES_128_CCM",
    0xC09D: "TLS_RSA_WITH_AES_256_CCM",
    0xC09E: "TLS_DHE_RSA_WITH_AES_128_CCM",
    0xC09F: "TLS_DHE_RSA_WITH_AES_256_CCM",
    0xC0AC: "TLS_ECDHE_ECDSA_WITH_AES_128_CCM",
    0xC0AD: "TLS_ECDHE_ECDSA_WITH_AES_256_CCM",
}

# Bulk ciphers by the name's cipher part: (kind, key length). GCM and CCM carry a 16-byte tag.
CIPHERS: dict[str, tuple[str, int]] = {
    "AES_128_GCM": ("gcm", 16),
    "AES_256_GCM": ("gcm", 32),
    "AES_128_CCM": ("ccm", 16),
    "AES_256_CCM": ("ccm", 32),
    "CHACHA20_POLY1305": ("chacha20", 32),
    "AES_128_CBC": ("cbc", 16),
    "AES_256_CBC": ("cbc", 32),
}
HASH_LENGTHS = {"SHA": 20, "SHA256": 32, "SHA384": 48}


@dataclass(frozen=True, slots=True)
class Suite:
    code: int
    name: str
    cipher: str  # "gcm", "ccm", "chacha20" (AEAD) or "cbc"
    key_length: int
    hash: str  # the name's last part: "SHA" (SHA-1), "SHA256" or "SHA384"

    @property
    def aead(self) -> bool:
        return self.cipher != "cbc"

    @property
    def tls13(self) -> bool:
        """A TLS 1.3 suite (TLS_AES_128_GCM_SHA256...): no key exchange in its name, which only
        TLS 1.3 may choose, and TLS 1.3 only those."""
        return "_WITH_" not in self.name

    @property
    def prf_hash(self) -> str:
        """The hash of TLS 1.2's PRF and of TLS 1.3's HKDF: SHA-384 for *_SHA384, else SHA-256."""
        return "SHA384" if self.hash == "SHA384" else "SHA256"

    @property
    def mac_length(self) -> int:
        """The record MAC's key and tag length (CBC suites only)."""
        return 0 if self.aead else HASH_LENGTHS[self.hash]

    @property
    def fixed_iv_length(self) -> int:
        """TLS 1.2's implicit IV part: 4 bytes for GCM/CCM, 12 for ChaCha20, none for CBC."""
        return {"gcm": 4, "ccm": 4, "chacha20": 12}.get(self.cipher, 0)


def suite(code: int) -> Suite | None:
    """The Suite of a code point, or None when kdissect cannot decrypt it."""
    name = NAMES.get(code)
    if name is None:
        return None
    body, _, hash_name = name.rpartition("_")
    if hash_name not in HASH_LENGTHS:  # the CCM suites: no hash in the name
        body, hash_name = name, "SHA256"
    for part, (kind, key_length) in CIPHERS.items():
        if body.endswith(part):
            return Suite(code, name, kind, key_length, hash_name)
    raise AssertionError(f"cipher of {name} not in CIPHERS")


def suite_name(code: int) -> str:
    """A code point's IANA name if known, else its number as Wireshark writes an unknown one."""
    return NAMES.get(code) or f"Unknown (0x{code:04x})"


VERSIONS: dict[int, str] = {0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1", 0x0303: "TLS 1.2",
                            0x0304: "TLS 1.3"}


def version_name(code: int) -> str:
    return VERSIONS.get(code) or f"Unknown (0x{code:04x})"
