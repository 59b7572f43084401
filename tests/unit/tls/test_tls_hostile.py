"""Hostile input for the TLS layer: damaged records of real sessions, random bytes after a
record header, hellos cut anywhere, lengths that announce too much. Nothing raises; nothing
unauthenticated comes out; what is held stays bounded."""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tlspeer import run

from kdissect.stream.reassembly import Buffered, Data
from kdissect.tls.connection import MAX_RECORD, TlsConnection
from kdissect.tls.handshake import MAX_HELLO, MAX_SNI, BadHandshake, HandshakeReader, parse_hello
from kdissect.tls.keylog import READ_CHUNK, KeyLog
from kdissect.tls.records import starts_tls

MESSAGES = [(0, b"\x00\x00\x00\x08abcdefgh"), (1, b"\x00\x00\x00\x04wxyz" * 50), (0, b"tail")]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> list[object]:
    d = tmp_path_factory.mktemp("tls")
    return [run(str(d / "a.log"), "1.3", None, 0, MESSAGES),
            run(str(d / "b.log"), "1.2", "ECDHE-RSA-AES128-GCM-SHA256", 0, MESSAGES),
            run(str(d / "c.log"), "1.2", "ECDHE-RSA-AES256-SHA", 1 << 19, MESSAGES)]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 2), flow=st.integers(0, 40), pos=st.integers(0, 1 << 16), xor=st.integers(1, 255),
       cut=st.integers(0, 1 << 16))
def test_damaged_sessions_never_raise_nor_yield_forgeries(sessions: list[object], which: int, flow: int, pos: int,
                                                          xor: int, cut: int) -> None:
    s = sessions[which]
    flows = list(s.flows)  # type: ignore[attr-defined]
    i = flow % len(flows)
    side, data = flows[i]
    damaged = bytearray(data)
    damaged[pos % len(damaged)] ^= xor
    flows[i] = (side, bytes(damaged[: max(1, cut % (len(damaged) + 1))]) if cut % 3 == 0 else bytes(damaged))
    conn = TlsConnection(KeyLog(s.keylog))  # type: ignore[attr-defined]
    got = [bytearray(), bytearray()]
    for frame, (side, data) in enumerate(flows, 1):
        for ev in conn.feed(side, [Data(data, frame, 0.0)]):
            if isinstance(ev, Data):
                got[side] += ev.data
    for side in (0, 1):  # whatever came out is what that side sent, from its start
        sent = bytes(s.sent[side])  # type: ignore[attr-defined]
        assert sent.startswith(bytes(got[side]))
    assert all(len(x.buf) <= MAX_RECORD + 5 for x in conn.sides)


@settings(max_examples=300, deadline=None)
@given(rest=st.binary(max_size=600), chunks=st.lists(st.integers(1, 64), max_size=8))
def test_random_bytes_after_a_hello_header(rest: bytes, chunks: list[int]) -> None:
    data = b"\x16\x03\x01" + struct.pack(">H", len(rest)) + rest
    assert starts_tls(data)
    conn = TlsConnection(None)
    at = 0
    for n in [*chunks, len(data)]:
        conn.feed(at % 2, [Data(data[at:at + n], 1, 0.0)])
        at += n


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=300), server=st.booleans())
def test_hellos_raise_only_bad_handshake(body: bytes, server: bool) -> None:
    try:
        hello = parse_hello(body, server)
    except BadHandshake:
        return
    hello.sni()
    hello.alpn()


def test_unwanted_handshake_messages_are_skipped_without_holding_them() -> None:
    r = HandshakeReader(frozenset({1}))
    assert r.feed(b"\x0b\xff\xff\xff" + b"\x00" * 1000) == []  # a 16 MB certificate message, begun
    for _ in range(100):
        assert r.feed(b"\x00" * 100_000) == []
        assert len(r.buf) == 0
    with pytest.raises(BadHandshake):
        HandshakeReader(frozenset({1})).feed(b"\x01" + (MAX_HELLO + 1).to_bytes(3, "big"))


def test_a_record_longer_than_tls_allows_ends_that_side() -> None:
    conn = TlsConnection(None)
    out = conn.feed(0, [Data(b"\x16\x03\x01\xff\xff" + b"\x00" * 100, 1, 0.0)])
    assert out == [] and conn.sides[0].dead and [d.key for d in conn.diagnostics] == ["tls.malformed"]


def test_what_the_sides_keep_counts_in_the_pool_and_a_side_that_grows_past_it_ends() -> None:
    # A ClientHello announced at 65,000 bytes, in records of 16 KB, and the connection left open:
    # the handshake reader kept it, counted nowhere: 5,000 such connections (1.1 MB of gzip) took
    # 519 MB to export. Past the capture's pool, the side that grows lets it go and ends.
    pool = Buffered(limit=40_000)
    conn = TlsConnection(None, pool)
    hello = b"\x01" + (65_000).to_bytes(3, "big") + bytes(16_380)
    assert conn.feed(0, [Data(b"\x16\x03\x01" + struct.pack(">H", len(hello)) + hello, 1, 0.0)]) == []
    assert pool.used == 16_384 and not conn.sides[0].dead
    assert conn.feed(0, [Data(b"\x16\x03\x01\x40\x00" + bytes(16_384), 2, 0.0)]) == []
    assert pool.used == 32_768
    assert conn.feed(1, [Data(b"\x16\x03\x03\x20\x00" + bytes(100), 3, 0.0)]) == []  # a record begun
    assert pool.used == 32_873
    assert conn.feed(0, [Data(b"\x16\x03\x01\x40\x00" + bytes(16_384), 4, 0.0)]) == []
    assert conn.sides[0].dead and [d.key for d in conn.diagnostics] == ["tls.unbuffered"]
    assert "49152 bytes of an unfinished record or handshake message dropped" in conn.diagnostics[0].message
    assert pool.used == 105 and not conn.sides[1].dead
    conn.release()
    assert pool.used == 0

def test_key_log_lines_that_are_not_secrets_are_skipped(tmp_path: Path) -> None:
    log = tmp_path / "k.log"
    good = "CLIENT_RANDOM " + "11" * 32 + " " + "22" * 48
    log.write_text("\n".join(["# comment", "CLIENT_RANDOM zz 00", "RSA " + "00" * 8 + " " + "11" * 48,
                              "CLIENT_RANDOM " + "11" * 31 + " 00", "CLIENT_RANDOM " + "33" * 32 + " " + "4" * 5000,
                              "", "EXPORTER_SECRET " + "11" * 32 + " " + "55" * 32, good]) + "\n")
    k = KeyLog(str(log))
    assert k.secret(b"CLIENT_RANDOM", bytes.fromhex("11" * 32)) == bytes.fromhex("22" * 48)
    assert len(k) == 1
    missing = KeyLog(str(tmp_path / "absent.log"))
    assert missing.secret(b"CLIENT_RANDOM", b"\x11" * 32) is None and missing.error


def test_a_key_log_line_over_a_read_chunk_is_skipped_whole(tmp_path: Path) -> None:
    # A line longer than the 1 MiB read was dropped a chunk at a time, and what followed the last
    # chunk boundary in it read as a line of its own: here a secret forged inside a long comment.
    log = tmp_path / "k.log"
    good = b"CLIENT_RANDOM " + b"11" * 32 + b" " + b"22" * 48 + b"\n"
    forged = b"CLIENT_RANDOM " + b"33" * 32 + b" " + b"44" * 48
    after = b"CLIENT_RANDOM " + b"55" * 32 + b" " + b"66" * 48 + b"\n"
    pad = b"#" + b"x" * (2 * READ_CHUNK - len(good) - 1)
    log.write_bytes(good + pad + forged + b"\n" + after)
    k = KeyLog(str(log))
    assert k.secret(b"CLIENT_RANDOM", bytes.fromhex("55" * 32)) == bytes.fromhex("66" * 48)
    assert k.secret(b"CLIENT_RANDOM", bytes.fromhex("33" * 32)) is None and len(k) == 2
    # The same when the long line is still being written: its end comes in a later read.
    log.write_bytes(good + pad)
    k = KeyLog(str(log))
    assert len(k) == 0 and k.secret(b"CLIENT_RANDOM", bytes.fromhex("11" * 32)) is not None
    with log.open("ab") as f:
        f.write(forged + b"\n" + after)
    assert k.secret(b"CLIENT_RANDOM", bytes.fromhex("33" * 32)) is None and len(k) == 2


def test_a_key_log_that_is_not_a_regular_file_is_unreadable(tmp_path: Path) -> None:
    # SSLKEYLOGFILE may name anything: a device that never ends, a FIFO that waits for a writer.
    fifo = tmp_path / "keys.fifo"
    os.mkfifo(fifo)
    found: list[object] = []
    logs = [KeyLog("/dev/zero"), KeyLog(str(fifo)), KeyLog(str(tmp_path))]
    t = threading.Thread(target=lambda: found.extend(k.secret(b"CLIENT_RANDOM", b"\x11" * 32) for k in logs),
                         daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive() and found == [None, None, None]
    assert [k.error for k in logs] == ["not a regular file", "not a regular file", "Is a directory"]


def test_a_key_log_is_read_up_to_the_size_it_had(tmp_path: Path) -> None:
    log = tmp_path / "k.log"
    log.write_text("CLIENT_RANDOM " + "11" * 32 + " " + "22" * 48 + "\n")
    k = KeyLog(str(log))
    assert k.secret(b"CLIENT_RANDOM", bytes.fromhex("11" * 32)) == bytes.fromhex("22" * 48)
    with log.open("a") as f:  # appended later: read by the next lookup that misses
        f.write("CLIENT_RANDOM " + "33" * 32 + " " + "44" * 48 + "\n")
    assert k.secret(b"CLIENT_RANDOM", bytes.fromhex("33" * 32)) == bytes.fromhex("44" * 48) and len(k) == 2


def _seal13(prot: object, seq: int, inner_type: int, data: bytes) -> bytes:
    """A TLS 1.3 record under prot's key (what a peer's KeyUpdate flow looks like on the wire)."""
    from kdissect.tls import crypto

    assert isinstance(prot, crypto.Aead13)
    inner = data + bytes([inner_type])
    header = b"\x17\x03\x03" + struct.pack(">H", len(inner) + crypto.TAG)
    return header + prot.aead.encrypt(crypto._xor_seq(prot.iv, seq), inner, header)


def test_a_key_update_moves_that_side_to_the_next_secret(sessions: list[object]) -> None:
    # OpenSSL's Python binding cannot send a KeyUpdate: after a real TLS 1.3 session, the client's
    # next records are sealed here, a KeyUpdate under the current keys, then data under the next.
    s = sessions[0]
    conn = TlsConnection(KeyLog(s.keylog))  # type: ignore[attr-defined]
    for frame, (side, data) in enumerate(s.flows, 1):  # type: ignore[attr-defined]
        conn.feed(side, [Data(data, frame, 0.0)])
    client = conn.sides[0]
    prot, seq = client.prot, client.seq
    assert prot is not None
    update = _seal13(prot, seq, 22, b"\x18\x00\x00\x01\x00")  # KeyUpdate(update_not_requested)
    after = _seal13(prot.next(), 0, 23, b"after the update")  # type: ignore[attr-defined]
    out = conn.feed(0, [Data(update + after, 99, 0.0)])
    assert [e.data for e in out if isinstance(e, Data)] == [b"after the update"]
    stale = _seal13(prot, seq + 1, 23, b"under the old key")
    assert conn.feed(0, [Data(stale, 100, 0.0)]) == []
    assert [d.key for d in conn.diagnostics] == ["tls.bad_key"]


@pytest.mark.parametrize(("which", "code"), [(0, 0x002F), (0, 0x0035), (0, 0xC02F), (1, 0x1301), (1, 0x1303)])
def test_a_suite_of_the_other_version_is_unsupported_not_an_error(sessions: list[object], which: int,
                                                                   code: int) -> None:
    # A TLS 1.3 ServerHello naming a TLS 1.2 suite (its CBC key reached ChaCha20-Poly1305: an
    # internal error), or a TLS 1.2 one naming a TLS 1.3 suite: the conversation is not decrypted.
    s = sessions[which]
    flows = [(side, bytearray(data)) for side, data in s.flows]  # type: ignore[attr-defined]
    side, data = next((side, data) for side, data in flows if side == 1)
    assert data[0] == 22 and data[5] == 2  # a handshake record that starts with the ServerHello
    at = 5 + 4 + 2 + 32
    at += 1 + data[at]  # past the session id
    struct.pack_into(">H", data, at, code)
    conn = TlsConnection(KeyLog(s.keylog))  # type: ignore[attr-defined]
    out = []
    for frame, (side, data) in enumerate(flows, 1):
        out += conn.feed(side, [Data(bytes(data), frame, 0.0)])
    assert not [e for e in out if isinstance(e, Data)]
    assert "tls.unsupported" in [d.key for d in conn.diagnostics]


def _hs(mtype: int, body: bytes) -> bytes:
    return bytes([mtype]) + len(body).to_bytes(3, "big") + body


def _hello(mtype: int, suite: bytes, extensions: bytes = b"") -> bytes:
    head = b"\x03\x03" + bytes([mtype]) * 32 + b"\x00"
    if mtype == 1:
        return _hs(1, head + b"\x00\x02" + suite + b"\x01\x00" + struct.pack(">H", len(extensions)) + extensions)
    return _hs(2, head + suite + b"\x00" + struct.pack(">H", len(extensions)) + extensions)


def _record(ctype: int, data: bytes) -> bytes:
    return struct.pack(">BHH", ctype, 0x0303, len(data)) + data


def test_a_flood_of_change_cipher_specs_reads_the_key_log_once(tmp_path: Path) -> None:
    """Each ChangeCipherSpec of a TLS 1.2 connection whose secret the key log lacks looked in the
    file again (opened and read it): 400,000 of them (2.4 MB) took 4.7 s, now 0.6 s."""
    path = tmp_path / "keys"
    path.write_text(f"CLIENT_RANDOM {'00' * 32} {'00' * 48}\n")
    keylog = KeyLog(str(path))
    reads = []
    refresh = keylog.refresh
    keylog.refresh = lambda: (reads.append(1), refresh())[1]  # type: ignore[method-assign]
    conn = TlsConnection(keylog)
    conn.feed(0, [Data(_record(22, _hello(1, b"\xc0\x2f")), 1, 0.0)])
    conn.feed(1, [Data(_record(22, _hello(2, b"\xc0\x2f")), 2, 0.0)])
    for side in (0, 1):
        conn.feed(side, [Data(_record(20, b"\x01") * 1000, 3, 0.0)])
    assert len(reads) == 1
    assert [d.key for d in conn.diagnostics] == ["tls.no_secret"]


def test_a_second_server_hello_ends_that_side(tmp_path: Path) -> None:
    """Every ServerHello ran the key schedule again: 400,000 TLS 1.3 ServerHellos in 16 KB
    records (20 MB) took 9.1 s with the connection's secrets in the key log, now 0.4 s."""
    path = tmp_path / "keys"
    path.write_text("".join(f"{label} {'01' * 32} {'33' * 32}\n" for label in
                            ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET")))
    conn = TlsConnection(KeyLog(str(path)))
    conn.feed(0, [Data(_record(22, _hello(1, b"\x13\x01")), 1, 0.0)])
    server_hello = _hello(2, b"\x13\x01", struct.pack(">HHH", 43, 2, 0x0304))
    conn.feed(1, [Data(_record(22, server_hello * 100), 2, 0.0)])
    assert conn.info.version == "TLS 1.3" and conn.sides[1].dead
    assert [d.key for d in conn.diagnostics] == ["tls.malformed"]


def test_a_key_update_not_at_the_end_of_its_record_ends_that_side(sessions: list[object]) -> None:
    """A record of 3,270 KeyUpdates (16 KB) derived as many keys, 0.04 s a record under keys a
    hostile capture's own key log gives (2.4 s a MB): a key change must end its record (RFC 8446
    section 5.1), so such a record ends the side as malformed, after no key change."""
    s = sessions[0]
    conn = TlsConnection(KeyLog(s.keylog))  # type: ignore[attr-defined]
    for frame, (side, data) in enumerate(s.flows, 1):  # type: ignore[attr-defined]
        conn.feed(side, [Data(data, frame, 0.0)])
    client = conn.sides[0]
    prot = client.prot
    flood = _seal13(prot, client.seq, 22, b"\x18\x00\x00\x01\x00" * 3270)
    assert conn.feed(0, [Data(flood, 99, 0.0)]) == []
    assert client.dead and client.prot is prot
    assert [d.key for d in conn.diagnostics] == ["tls.malformed"]


def test_a_server_name_longer_than_a_dns_name_is_cut() -> None:
    """Every decrypted message carries its connection's server name (export's `tls` object, read
    -V): a ClientHello naming a server of 60,000 characters made 5,000 request and response
    pairs (1.2 MB) 606 MB of JSON. The name is cut after MAX_SNI characters."""
    name = b"broker." * 8571
    sni = struct.pack(">HBH", len(name) + 3, 0, len(name)) + name
    hello = _hello(1, b"\xc0\x2f", struct.pack(">HH", 0, len(sni)) + sni)
    conn = TlsConnection(None)
    conn.feed(0, [Data(b"".join(_record(22, hello[i:i + 16000]) for i in range(0, len(hello), 16000)), 1, 0.0)])
    sent = conn.info.sni
    assert sent is not None and len(sent) == MAX_SNI
    assert sent == name[:MAX_SNI - 1].decode() + "…"
    short = _hello(1, b"\xc0\x2f", struct.pack(">HHHBH", 0, 13, 11, 0, 8) + b"broker-1")
    assert parse_hello(short[4:], False).sni() == "broker-1"
