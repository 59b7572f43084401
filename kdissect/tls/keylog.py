"""The NSS key log format (`SSLKEYLOGFILE`, Wireshark's `tls.keylog_file`): one secret a line,
`LABEL <client random, 64 hex digits> <secret, hex>`, `#` comments. Only the labels of the key
schedules kdissect runs are kept: `CLIENT_RANDOM` (the TLS 1.2 master secret) and TLS 1.3's
handshake and first application traffic secrets.

A key log may grow while it is read (`sniff` beside a client that appends to it): a lookup that
misses reads what was appended since the last read (up to the size the file had then), so the file
is read once in all. Only a regular file is read: SSLKEYLOGFILE naming a device or a FIFO (which
never ends, or blocks until a writer comes) is a key log that cannot be read. Lines that
are not secrets (other labels, bad hex, too long) are skipped, a long one whole up to its end. The secrets never leave this
object except to the key schedule.
"""

from __future__ import annotations

import binascii
import os
import stat

LABELS = frozenset({
    b"CLIENT_RANDOM",
    b"CLIENT_HANDSHAKE_TRAFFIC_SECRET", b"SERVER_HANDSHAKE_TRAFFIC_SECRET",
    b"CLIENT_TRAFFIC_SECRET_0", b"SERVER_TRAFFIC_SECRET_0",
})
MAX_LINE = 1024  # a key log line is under 250 bytes; longer ones are not secrets
MAX_SECRETS = 4_000_000  # about 600 MB of key log; beyond it new secrets are not kept
READ_CHUNK = 1 << 20


class KeyLog:
    def __init__(self, path: str) -> None:
        self.path = path
        self._secrets: dict[tuple[bytes, bytes], bytes] = {}
        self._offset = 0  # bytes of the file read so far
        self._rest = b""  # a last line not yet ended
        self._skip = False  # inside a line too long to be a secret: its bytes are dropped up to its end
        self.error: str | None = None  # why the file could not be read, if it could not

    def secret(self, label: bytes, client_random: bytes) -> bytes | None:
        key = (label, client_random)
        found = self._secrets.get(key)
        if found is None:
            self.refresh()
            found = self._secrets.get(key)
        return found

    def __len__(self) -> int:
        return len(self._secrets)

    def refresh(self) -> None:
        """Read what was appended to the file since the last read."""
        try:
            # O_NONBLOCK: opening a FIFO does not wait for a writer (it is refused below)
            with open(os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    self.error = "not a regular file"
                    return
                if st.st_size < self._offset:  # truncated and written anew
                    self._offset, self._rest, self._skip = 0, b"", False
                f.seek(self._offset)
                while self._offset < st.st_size and (chunk := f.read(min(READ_CHUNK, st.st_size - self._offset))):
                    self._offset += len(chunk)
                    if self._skip:
                        end = chunk.find(b"\n")
                        if end < 0:
                            continue
                        chunk, self._skip = chunk[end + 1 :], False
                    lines = (self._rest + chunk).split(b"\n")
                    self._rest = lines.pop()
                    if len(self._rest) > MAX_LINE:
                        self._rest, self._skip = b"", True
                    for line in lines:
                        self._add(line)
        except OSError as e:
            self.error = e.strerror or str(e)

    def _add(self, line: bytes) -> None:
        parts = line.split()
        if len(parts) != 3 or parts[0] not in LABELS or len(line) > MAX_LINE:
            return
        try:
            client_random = binascii.unhexlify(parts[1])
            secret = binascii.unhexlify(parts[2])
        except (binascii.Error, ValueError):
            return
        if len(client_random) == 32 and secret and len(self._secrets) < MAX_SECRETS:
            self._secrets[(parts[0], client_random)] = secret
