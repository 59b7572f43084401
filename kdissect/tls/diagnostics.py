"""The TLS layer's diagnostics, as data. They describe a conversation rather than one message:
`conversations` lists them with the TLS facts, the commands sum them up on standard error."""

from __future__ import annotations

from kdissect.diagnostics import Catalogue
from kdissect.model import Group, Severity

TLS = Catalogue("tls", "TLS: decryption with a key log", (
    ("no_keylog", Severity.NOTE, Group.UNDECODED,
     "a TLS connection that is not decrypted because no key log was given (--tls-keylog FILE, "
     "-o tls.keylog_file:FILE or the SSLKEYLOGFILE variable)"),
    ("keylog_unreadable", Severity.WARNING, Group.UNDECODED,
     "the key log file cannot be read: no TLS connection is decrypted"),
    ("no_secret", Severity.WARNING, Group.UNDECODED,
     "the key log holds no secret for this connection's client random: it is not decrypted"),
    ("bad_key", Severity.ERROR, Group.CHECKSUM,
     "a record does not authenticate with the key log's secret (a wrong secret, or damaged bytes): the "
     "rest of that side is not decrypted"),
    ("unsupported", Severity.WARNING, Group.UNDECODED,
     "a TLS version or cipher suite kdissect does not decrypt (it decrypts TLS 1.2 and 1.3 with AES-GCM, "
     "AES-CCM, ChaCha20-Poly1305 and AES-CBC suites)"),
    ("no_handshake", Severity.WARNING, Group.UNDECODED,
     "the capture starts after the connection's handshake: without its hellos there are no keys"),
    ("malformed", Severity.ERROR, Group.MALFORMED,
     "bytes that break the TLS record or handshake format: the rest of that side is not decrypted"),
    ("gap", Severity.WARNING, Group.SEQUENCE,
     "bytes of the encrypted stream are missing from the capture: the rest of that side is not "
     "decrypted (record boundaries and sequence numbers are lost)"),
    ("alert", Severity.WARNING, Group.PROTOCOL,
     "a fatal TLS alert: the sender ends the connection"),
    ("unbuffered", Severity.WARNING, Group.REASSEMBLE,
     "the capture's conversations together keep as many bytes of unfinished records, handshake "
     "messages, messages and out-of-order segments as they may (128 MiB): a side whose unfinished "
     "record or handshake message grows past that is dropped, and not decrypted further"),
), prefix="tls")
