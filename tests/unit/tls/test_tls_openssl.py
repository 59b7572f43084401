"""The TLS layer against OpenSSL: real sessions between Python's `ssl` client and server (tlspeer),
their bytes fed to TlsConnection as a capture would deliver them, cut at random places. What it
decrypts must be exactly what each side sent, for every version and record protection."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tlspeer import OP_NO_ENCRYPT_THEN_MAC, SNI, Session, run

from kdissect.stream.reassembly import Data, Gap
from kdissect.tls.connection import TlsConnection
from kdissect.tls.keylog import KeyLog

# (TLS version, OpenSSL cipher string, context options, certificate): each record protection.
SUITES = {
    "1.3-default": ("1.3", None, 0, "rsa"),
    "1.2-ecdhe-aes128gcm": ("1.2", "ECDHE-RSA-AES128-GCM-SHA256", 0, "rsa"),
    "1.2-ecdhe-aes256gcm": ("1.2", "ECDHE-RSA-AES256-GCM-SHA384", 0, "rsa"),
    "1.2-ecdhe-chacha20": ("1.2", "ECDHE-RSA-CHACHA20-POLY1305", 0, "rsa"),
    "1.2-ecdsa-aes128gcm": ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256", 0, "ec"),
    "1.2-rsa-aes128gcm": ("1.2", "AES128-GCM-SHA256", 0, "rsa"),
    "1.2-ccm": ("1.2", "AES128-CCM", 0, "rsa"),
    "1.2-cbc-sha256-etm": ("1.2", "ECDHE-RSA-AES128-SHA256", 0, "rsa"),
    "1.2-cbc-sha384-etm": ("1.2", "ECDHE-RSA-AES256-SHA384", 0, "rsa"),
    "1.2-cbc-sha1-mte": ("1.2", "ECDHE-RSA-AES256-SHA", OP_NO_ENCRYPT_THEN_MAC, "rsa"),
    "1.2-cbc-sha256-mte": ("1.2", "AES128-SHA256", OP_NO_ENCRYPT_THEN_MAC, "rsa"),
}
MESSAGES = [(0, b"\x00\x00\x00\x10request-one-abc"), (1, b"response" * 3000), (0, bytes(range(256)) * 70),
            (1, b"x")]


def session(tmp_path: Path, name: str, messages: list[tuple[int, bytes]] = MESSAGES) -> Session:
    version, cipher, options, cert = SUITES[name]
    return run(str(tmp_path / "keys.log"), version, cipher, options, messages, cert)


def decrypt(s: Session, keylog: str | None, cuts: list[int] | None = None) -> tuple[TlsConnection, list[bytes]]:
    """Each side's decrypted bytes; `cuts` splits each flow into pieces at these fractions."""
    conn = TlsConnection(KeyLog(keylog) if keylog else None)
    got = [bytearray(), bytearray()]
    for frame, (side, data) in enumerate(s.flows, 1):
        pieces = _split(data, cuts or [])
        for ev in conn.feed(side, [Data(p, frame, float(frame)) for p in pieces]):
            assert isinstance(ev, Data)
            assert ev.frame == frame
            got[side] += ev.data
    return conn, [bytes(g) for g in got]


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    at, out = 0, []
    for c in cuts:
        end = min(len(data), at + c)
        if end > at:
            out.append(data[at:end])
            at = end
    out.append(data[at:])
    return [p for p in out if p]


@pytest.mark.parametrize("name", SUITES)
def test_decrypts_what_each_side_sent(tmp_path: Path, name: str) -> None:
    s = session(tmp_path, name)
    conn, got = decrypt(s, s.keylog)
    assert got == [bytes(s.sent[0]), bytes(s.sent[1])]
    assert conn.diagnostics == []
    assert conn.info.version == {"TLSv1.3": "TLS 1.3", "TLSv1.2": "TLS 1.2"}[s.version]
    assert conn.info.sni == SNI
    assert conn.info.decrypted and conn.client == 0
    suite = conn.suite
    assert suite is not None and suite.name.startswith("TLS_")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(SUITES)), cuts=st.lists(st.integers(1, 700), max_size=12),
       sizes=st.lists(st.tuples(st.integers(0, 1), st.integers(1, 40_000)), min_size=1, max_size=4))
def test_any_segmentation_and_sizes(tmp_path: Path, name: str, cuts: list[int],
                                    sizes: list[tuple[int, int]]) -> None:
    messages = [(side, os.urandom(n)) for side, n in sizes]
    s = session(tmp_path, name, messages)
    _conn, got = decrypt(s, s.keylog, cuts)
    assert got == [bytes(s.sent[0]), bytes(s.sent[1])]
    os.remove(s.keylog)


@pytest.mark.parametrize("name", ["1.3-default", "1.2-ecdhe-aes128gcm", "1.2-cbc-sha1-mte", "1.2-cbc-sha256-etm"])
def test_a_wrong_secret_is_reported_once_and_nothing_leaks(tmp_path: Path, name: str) -> None:
    s = session(tmp_path, name)
    wrong = tmp_path / "wrong.log"
    lines = Path(s.keylog).read_text().splitlines()
    # The last hex digit of every secret changed: the lines still parse, the keys are wrong.
    wrong.write_text("\n".join(line[:-1] + ("0" if line[-1] != "0" else "1") for line in lines) + "\n")
    conn, got = decrypt(s, str(wrong))
    assert got == [b"", b""]
    assert [d.key for d in conn.diagnostics] == ["tls.bad_key"]
    assert not conn.info.decrypted


def test_without_the_connections_secrets(tmp_path: Path) -> None:
    s = session(tmp_path, "1.3-default")
    other = tmp_path / "other.log"
    other.write_text("# a comment\nCLIENT_RANDOM " + "ab" * 32 + " " + "cd" * 48 + "\n")
    conn, got = decrypt(s, str(other))
    assert got == [b"", b""]
    assert [d.key for d in conn.diagnostics] == ["tls.no_secret"]
    conn, got = decrypt(s, None)
    assert got == [b"", b""]
    assert [d.key for d in conn.diagnostics] == ["tls.no_keylog"]
    assert conn.info.version == "TLS 1.3" and conn.info.sni == SNI


def test_a_key_log_written_while_reading(tmp_path: Path) -> None:
    # sniff beside a client: the secrets arrive in the key log after the reader opened it.
    s = session(tmp_path, "1.2-ecdhe-aes128gcm")
    growing = tmp_path / "growing.log"
    growing.write_text("")
    keylog = KeyLog(str(growing))
    assert keylog.secret(b"CLIENT_RANDOM", b"\x00" * 32) is None
    text = Path(s.keylog).read_bytes()
    with open(growing, "ab") as f:
        f.write(text[:10])  # a line cut short stays pending
    keylog.refresh()
    assert len(keylog) == 0
    with open(growing, "ab") as f:
        f.write(text[10:])
    conn = TlsConnection(keylog)
    got = bytearray()
    for frame, (side, data) in enumerate(s.flows, 1):
        for ev in conn.feed(side, [Data(data, frame, 0.0)]):
            if side == 0 and isinstance(ev, Data):
                got += ev.data
    assert bytes(got) == bytes(s.sent[0])


def test_a_gap_stops_that_side_and_is_passed_up(tmp_path: Path) -> None:
    s = session(tmp_path, "1.3-default")
    conn = TlsConnection(KeyLog(s.keylog))
    server_flows = [i for i, (side, _) in enumerate(s.flows) if side == 1]
    lost_at = server_flows[-2]  # a late server flow goes missing
    out: list[object] = []
    for frame, (side, data) in enumerate(s.flows, 1):
        ev = Gap(len(data), frame - 1, frame + 1) if frame - 1 == lost_at else Data(data, frame, 0.0)
        out += conn.feed(side, [ev])
    assert any(isinstance(e, Gap) for e in out)
    assert [d.key for d in conn.diagnostics] == ["tls.gap"]
    client = b"".join(e.data for e in out if isinstance(e, Data) and e.frame in
                      {f for f, (side, _) in enumerate(s.flows, 1) if side == 0})
    assert client == bytes(s.sent[0])  # the other side decrypts to the end
