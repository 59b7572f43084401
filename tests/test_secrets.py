"""Secrets never reach any output unless --show-secrets: SASL PLAIN passwords, SCRAM proofs and
OAUTHBEARER tokens (SaslAuthenticate v0-v2 and the unframed tokens after SaslHandshake v0),
SCRAM salted passwords and delegation-token HMACs, Pulsar auth data, ZooKeeper auth packets and
session passwords, RocketMQ ACL signatures and security tokens. Every output is checked: the
packet list, the tree, hex dumps (masked with ** and *), JSON, field values, statistics, follow
and the Spark rows; with --show-secrets each secret is shown."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth
from kafka.net.sasl.plain import SaslMechanismPlain
from kafka.net.sasl.scram import ScramClient
from pcapgen import Pkt, TcpConn, ethernet, kafka_request, kafka_response, uvarint, write_pcap

from kdissect.cli import cli
from kdissect.dissect.base import Options
from kdissect.model import SECRET, Field, Message, Pdu, Row, secret_ranges
from kdissect.pipeline import dissect_file
from kdissect.render.text import hexdump
from kdissect.rocketmq import encode as rmq
from kdissect.spark import rows

PLAIN_PASSWORD = "pl41n-S3cret!"
LEGACY_PASSWORD = "v0-r4w-Pa55w0rd"
OAUTH_TOKEN = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJjYXJvbCIsImV4cCI6NDEwMjQ0NDgwMH0."
DELEGATION_HMAC = bytes.fromhex("8d3f01a2b4c6d8e0f1a3b5c7d9e1f2a4")
DESCRIBED_HMAC = bytes.fromhex("c0ffee11d00d2b3c4d5e6f708192a3b4")
PULSAR_TOKEN = b"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwdWxzYXItY2xpZW50In0.c2lnbmF0dXJlLXB1bHNhcg"
PULSAR_REFRESHED = b"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJyZWZyZXNoZWQifQ.cmVmcmVzaGVkLXNpZ25hdHVyZQ"
PULSAR_CHALLENGE = b"chal-N0nce-4f9a1c"
ZK_DIGEST = b"alice:z00keeper-S3cret"
ZK_SESSION_PASSWD = bytes.fromhex("5e3ca1b2c3d4e5f60718293a4b5c6d7e")
RMQ_SIGNATURE = "gZ9kq2VbXw4YtLmN8pRsTuV1wXy="
RMQ_TOKEN = "sts-T0KEN-6f1c2b9e"
RMQ_BINARY_SIGNATURE = "Qm1hY1NpZ25hdHVyZUJpbmFyeQ=="


class _Tokens(AbstractTokenProvider):
    def token(self) -> str:
        return OAUTH_TOKEN

    def extensions(self) -> dict[str, str]:
        return {"traceId": "42"}


# -- Kafka framing -------------------------------------------------------------------------


def _str(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def _bytes(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b



def _cbytes(b: bytes) -> bytes:
    return uvarint(len(b) + 1) + b


def _flexible_request(api: int, version: int, corr: int, body: bytes, client: str = "kd-secrets") -> bytes:
    payload = struct.pack(">hhi", api, version, corr) + _str(client) + b"\x00" + body
    return struct.pack(">i", len(payload)) + payload


def _flexible_response(corr: int, body: bytes) -> bytes:
    payload = struct.pack(">i", corr) + b"\x00" + body
    return struct.pack(">i", len(payload)) + payload


def _frame(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b


def _handshake(conn: TcpConn, corr: int, mechanism: str, version: int = 1) -> list[bytes]:
    return [conn.segment(True, kafka_request(17, version, corr, "kd-secrets", _str(mechanism))),
            conn.segment(False, kafka_response(corr, struct.pack(">hi", 0, 1) + _str(mechanism)))]


def _auth_response(version: int, corr: int, token: bytes) -> bytes:
    body = struct.pack(">hh", 0, -1) + _bytes(token) + (struct.pack(">q", 3600000) if version >= 1 else b"")
    return kafka_response(corr, body)


def _kafka_plain(port: int) -> list[bytes]:
    """SaslHandshake v1 + SaslAuthenticate v0 with PLAIN, then a delegation token is created and
    the tokens are described."""
    c = TcpConn(cport=port)
    token = SaslMechanismPlain(sasl_plain_username="alice", sasl_plain_password=PLAIN_PASSWORD).auth_bytes()
    create = (struct.pack(">h", 0) + _str("User") + _str("alice") + struct.pack(">qqq", 1, 2, 3)
              + _str("tok-1") + _bytes(DELEGATION_HMAC) + struct.pack(">i", 0))
    described = (struct.pack(">hi", 0, 1) + _str("User") + _str("alice") + struct.pack(">qqq", 1, 2, 3)
                 + _str("tok-2") + _bytes(DESCRIBED_HMAC) + struct.pack(">ii", 0, 0))
    return [*c.handshake(), *_handshake(c, 1, "PLAIN"),
            c.segment(True, kafka_request(36, 0, 2, "kd-secrets", _bytes(token))),
            c.segment(False, _auth_response(0, 2, b"")),
            c.segment(True, kafka_request(38, 1, 3, "kd-secrets", struct.pack(">iq", 0, -1))),
            c.segment(False, kafka_response(3, create)),
            c.segment(True, kafka_request(41, 1, 4, "kd-secrets", struct.pack(">i", -1))),
            c.segment(False, kafka_response(4, described))]


def _kafka_scram(port: int) -> tuple[list[bytes], str, bytes]:
    """SCRAM-SHA-256 over SaslAuthenticate v1, then AlterUserScramCredentials (v0, flexible)
    upserting a salted password. Returns the packets, the client proof and the salted password."""
    c = TcpConn(cport=port)
    client = ScramClient("alice", "scram-Pa55word", "SCRAM-SHA-256")
    first = client.first_message()
    server_first = (b"r=" + client.nonce + b"Xq7srvNonce,s=" + base64.b64encode(b"salt-0123456789")
                    + b",i=4096")
    client.process_server_first_message(server_first)
    final = client.final_message()
    server_final = b"v=" + base64.b64encode(client.server_signature)
    salted = client.salted_password
    upsert = (uvarint(1) + uvarint(2) + uvarint(len("bob") + 1) + b"bob" + struct.pack(">bi", 1, 8192)
              + _cbytes(b"salt-bob") + _cbytes(salted) + b"\x00" + b"\x00")
    pkts = [*c.handshake(), *_handshake(c, 1, "SCRAM-SHA-256"),
            c.segment(True, kafka_request(36, 1, 2, "kd-secrets", _bytes(first))),
            c.segment(False, _auth_response(1, 2, server_first)),
            c.segment(True, kafka_request(36, 1, 3, "kd-secrets", _bytes(final))),
            c.segment(False, _auth_response(1, 3, server_final)),
            c.segment(True, _flexible_request(51, 0, 4, upsert)),
            c.segment(False, _flexible_response(4, struct.pack(">i", 0) + uvarint(1) + b"\x00"))]
    return pkts, base64.b64encode(client.client_proof).decode(), salted


def _kafka_oauth(port: int) -> list[bytes]:
    """OAUTHBEARER over SaslAuthenticate v2 (flexible)."""
    c = TcpConn(cport=port)
    token = SaslMechanismOAuth(sasl_oauth_token_provider=_Tokens()).auth_bytes()
    resp = struct.pack(">h", 0) + b"\x00" + _cbytes(b"") + struct.pack(">q", 3600000) + b"\x00"
    return [*c.handshake(), *_handshake(c, 1, "OAUTHBEARER"),
            c.segment(True, _flexible_request(36, 2, 2, _cbytes(token) + b"\x00")),
            c.segment(False, _flexible_response(2, resp))]


def _kafka_legacy(port: int) -> list[bytes]:
    """SaslHandshake v0, then the PLAIN token unframed (no Kafka header), then Metadata."""
    c = TcpConn(cport=port)
    token = SaslMechanismPlain(sasl_plain_username="dave", sasl_plain_password=LEGACY_PASSWORD).auth_bytes()
    return [*c.handshake(), *_handshake(c, 1, "PLAIN", version=0),
            c.segment(True, _frame(token)),
            c.segment(False, _frame(b"")),
            c.segment(True, kafka_request(3, 1, 2, "kd-secrets", struct.pack(">i", -1))),
            c.segment(False, kafka_response(2, struct.pack(">iii", 0, -1, 0)))]


# -- Pulsar, ZooKeeper, RocketMQ -----------------------------------------------------------


def _pb(*pairs: tuple[int, int | str | bytes]) -> bytes:
    out = b""
    for num, v in pairs:
        if isinstance(v, int):
            out += uvarint(num << 3) + uvarint(v)
        else:
            raw = v.encode() if isinstance(v, str) else v
            out += uvarint(num << 3 | 2) + uvarint(len(raw)) + raw
    return out


def _pulsar(ctype: int, body: bytes) -> bytes:
    cmd = _pb((1, ctype), (ctype, body))
    return struct.pack(">II", 4 + len(cmd), len(cmd)) + cmd


def _pulsar_conn(port: int) -> list[bytes]:
    """CONNECT with a token, CONNECTED, then an auth refresh (AUTH_CHALLENGE / AUTH_RESPONSE)."""
    c = TcpConn(cport=port, sport=6650)
    connect = _pb((1, "Pulsar-Java-v3.2.0"), (3, PULSAR_TOKEN), (4, 21), (5, "token"))
    challenge = _pb((1, "Pulsar Server3.2.0"), (2, _pb((1, "token"), (2, PULSAR_CHALLENGE))), (3, 21))
    response = _pb((1, "Pulsar-Java-v3.2.0"), (2, _pb((1, "token"), (2, PULSAR_REFRESHED))), (3, 21))
    return [*c.handshake(),
            c.segment(True, _pulsar(2, connect)),
            c.segment(False, _pulsar(3, _pb((1, "Pulsar Server3.2.0"), (2, 21)))),
            c.segment(False, _pulsar(36, challenge)),
            c.segment(True, _pulsar(37, response))]


def _zk_frame(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b


def _zk_conn(port: int) -> list[bytes]:
    """Connect (the server hands out a session password), then addauth digest."""
    c = TcpConn(cport=port, sport=2181)
    connect = struct.pack(">iqiqi", 0, 0, 30000, 0, 16) + b"\x00" * 16 + b"\x00"
    connected = struct.pack(">iiqi", 0, 30000, 0x1000030AD9D0001, 16) + ZK_SESSION_PASSWD + b"\x00"
    auth = struct.pack(">iii", -4, 100, 0) + _str4("digest") + struct.pack(">i", len(ZK_DIGEST)) + ZK_DIGEST
    return [*c.handshake(),
            c.segment(True, _zk_frame(connect)),
            c.segment(False, _zk_frame(connected)),
            c.segment(True, _zk_frame(auth)),
            c.segment(False, _zk_frame(struct.pack(">iqi", -4, 0x10, 0)))]


def _str4(s: str) -> bytes:
    return struct.pack(">i", len(s)) + s.encode()


def _rocketmq_conn(port: int) -> list[bytes]:
    """GET_ROUTEINFO_BY_TOPIC signed with ACL credentials, once with a JSON header and once with
    the binary one."""
    c = TcpConn(cport=port, sport=9876)
    acl = {"topic": "TopicKd", "AccessKey": "rocketmq2", "Signature": RMQ_SIGNATURE, "SecurityToken": RMQ_TOKEN}
    signed = {"topic": "TopicKd", "AccessKey": "rocketmq2", "Signature": RMQ_BINARY_SIGNATURE}
    return [*c.handshake(),
            c.segment(True, rmq.frame(105, opaque=1, ext=acl, serialize=0)),
            c.segment(False, rmq.frame(17, opaque=1, flag=1, remark="No topic route info", serialize=0)),
            c.segment(True, rmq.frame(105, opaque=2, ext=signed, serialize=1)),
            c.segment(False, rmq.frame(17, opaque=2, flag=1, serialize=1))]


# -- the capture ---------------------------------------------------------------------------


class Capture:
    def __init__(self, path: Path, secrets: dict[str, bytes]) -> None:
        self.path = path
        self.secrets = secrets


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    scram, proof, salted = _kafka_scram(40002)
    pkts = [*_kafka_plain(40001), *scram, *_kafka_oauth(40003), *_kafka_legacy(40004), *_pulsar_conn(40005),
            *_zk_conn(40006), *_rocketmq_conn(40007)]
    path = tmp_path_factory.mktemp("secrets") / "secrets.pcap"
    write_pcap(str(path), [Pkt(1700000000 + i * 0.001, ethernet(p)) for i, p in enumerate(pkts)])
    secrets = {
        "kafka PLAIN password": PLAIN_PASSWORD.encode(),
        "kafka SCRAM proof": proof.encode(),
        "kafka SCRAM salted password": salted,
        "kafka delegation token HMAC": DELEGATION_HMAC,
        "kafka described delegation token HMAC": DESCRIBED_HMAC,
        "kafka OAUTHBEARER token": OAUTH_TOKEN.encode(),
        "kafka v0 unframed PLAIN password": LEGACY_PASSWORD.encode(),
        "pulsar CONNECT auth_data": PULSAR_TOKEN,
        "pulsar AUTH_CHALLENGE auth_data": PULSAR_CHALLENGE,
        "pulsar AUTH_RESPONSE auth_data": PULSAR_REFRESHED,
        "zookeeper addauth digest": ZK_DIGEST,
        "zookeeper session password": ZK_SESSION_PASSWD,
        "rocketmq signature (JSON header)": RMQ_SIGNATURE.encode(),
        "rocketmq security token": RMQ_TOKEN.encode(),
        "rocketmq signature (binary header)": RMQ_BINARY_SIGNATURE.encode(),
    }
    return Capture(path, secrets)


def _streams(path: Path) -> list[int]:
    return sorted({m.stream for m in dissect_file(str(path))})


_DUMP_LINE = re.compile(r"^    [0-9a-f]{4}  ((?:(?:[0-9a-f]{2}|\*\*) ){0,15}(?:[0-9a-f]{2}|\*\*))")


def _hex_tokens(out: str) -> list[str]:
    """The hex column of every hex dump line, byte by byte ("**" for a masked byte)."""
    return [t for line in out.splitlines() if (m := _DUMP_LINE.match(line)) for t in m.group(1).split()]


def _dumped_bytes(out: str) -> bytes:
    """The bytes a hex dump shows, masked bytes as NUL (so no secret can be pieced together)."""
    return bytes(0 if t == "**" else int(t, 16) for t in _hex_tokens(out))


def _forms(secret: bytes) -> list[str]:
    """How a secret could be written: text, hex (plain and spaced), base64."""
    forms = [secret.hex(), secret.hex(" "), base64.b64encode(secret).decode()]
    with contextlib.suppress(UnicodeDecodeError):
        forms.append(secret.decode())
    return forms


def _leaks(out: str, secret: bytes) -> bool:
    return any(f in out for f in _forms(secret)) or secret in _dumped_bytes(out)


MODES = {
    "read": ["read"],
    "read -V": ["read", "-V"],
    "read -x": ["read", "-x"],
    "read -V -x": ["read", "-V", "-x"],
    "export json": ["export", "-F", "json"],
    "export jsonl": ["export", "-F", "jsonl"],
    "stats": ["stats"],
    "stats json": ["stats", "-F", "json"],
    "conversations": ["conversations", "-F", "json"],
}
# The modes that print decoded values or the bytes themselves: with --show-secrets they show
# every secret.
REVEALING = {"read -V", "read -x", "read -V -x", "export json", "export jsonl"}
SECRET_KEYS = ("kafka.auth_bytes.password", "kafka.auth_bytes.proof", "kafka.auth_bytes.auth.token",
               "kafka.sasl_token.password", "kafka.upsertions.salted_password", "kafka.hmac",
               "kafka.tokens.hmac",
               "pulsar.connect.auth_data", "pulsar.auth_challenge.challenge.auth_data",
               "pulsar.auth_response.response.auth_data", "zookeeper.auth",
               "zookeeper.passwd", "rocketmq.ext_fields.signature", "rocketmq.ext_fields.security_token")


def _run(args: list[str]) -> str:
    r = CliRunner().invoke(cli, [*args, "--no-color"] if args[0] in ("read", "follow", "stats") else args)
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.mark.parametrize("mode", list(MODES))
def test_no_output_shows_a_secret(capture: Capture, mode: str) -> None:
    args = [MODES[mode][0], str(capture.path), *MODES[mode][1:]]
    out = _run(args)
    assert "SaslAuthenticate" in out or mode.startswith(("stats", "conversations"))
    for name, secret in capture.secrets.items():
        assert not _leaks(out, secret), f"{mode}: {name}"
    shown = _run([*args, "--show-secrets"])
    if mode in REVEALING:
        for name, secret in capture.secrets.items():
            assert _leaks(shown, secret), f"{mode} --show-secrets: {name}"


def test_hex_dump_masks_exactly_the_secret_bytes(capture: Capture) -> None:
    out = _run(["read", str(capture.path), "-x"])
    assert _hex_tokens(out).count("**") == sum(len(s) for s in capture.secrets.values())
    hidden = _dumped_bytes(out)
    shown = _dumped_bytes(_run(["read", str(capture.path), "-x", "--show-secrets"]))
    assert len(hidden) == len(shown)
    changed = [i for i, (a, b) in enumerate(zip(hidden, shown, strict=True)) if a != b]
    assert changed and all(hidden[i] == 0 for i in changed)  # only masked bytes differ
    line = next(x for x in out.splitlines() if "**" in x)
    hexcol, ascii_col = line[10:57], line[58:]
    assert hexcol.count("**") == ascii_col.count("*")


def test_fields_export_of_the_secret_keys(capture: Capture) -> None:
    args = ["export", str(capture.path), "-F", "fields", *[x for k in SECRET_KEYS for x in ("-e", k)]]
    out = _run(args)
    assert "<redacted" in out
    for name, secret in capture.secrets.items():
        assert not _leaks(out, secret), name
    shown = _run([*args, "--show-secrets"])
    for name, secret in capture.secrets.items():
        assert _leaks(shown, secret), name


def test_follow_every_stream(capture: Capture) -> None:
    streams = _streams(capture.path)
    assert len(streams) == 7
    outs = {flags: "".join(_run(["follow", str(capture.path), "-s", str(s), *flags]) for s in streams)
            for flags in ((), ("-x",), ("-V", "-x"))}
    for flags, out in outs.items():
        for name, secret in capture.secrets.items():
            assert not _leaks(out, secret), f"follow {flags}: {name}"
    assert _hex_tokens(outs[("-x",)]).count("**") == sum(len(s) for s in capture.secrets.values())
    shown = "".join(_run(["follow", str(capture.path), "-s", str(s), "-x", "--show-secrets"]) for s in streams)
    for name, secret in capture.secrets.items():
        assert secret in _dumped_bytes(shown), name


def test_spark_rows(capture: Capture) -> None:
    def text(show: bool) -> str:
        out = []
        for m in dissect_file(str(capture.path), opts=Options(show_secrets=show)):
            out.append(json.dumps(rows.combined_row(m), default=str))
            for layer in rows.LAYER_ROWS.values():
                out.append(json.dumps(layer(m, 256), default=str))
        return "\n".join(out)

    hidden = text(False)
    for name, secret in capture.secrets.items():
        assert not _leaks(hidden, secret), name
    shown = text(True)
    for name, secret in capture.secrets.items():
        assert _leaks(shown, secret), name


# -- the pieces ----------------------------------------------------------------------------


def test_hexdump_masks_hex_and_ascii_columns() -> None:
    data = b"user\x00pass-word!\x00tail-bytes-here"
    lines = list(hexdump(data, hidden=[(5, 10), (40, 5), (-3, 4)]))
    assert lines[0] == ("    0000  ** 73 65 72 00 ** ** ** ** ** ** ** ** ** ** 00  "
                        "*ser.**********.")
    assert lines[1] == "    0010  74 61 69 6c 2d 62 79 74 65 73 2d 68 65 72 65     tail-bytes-here"
    assert list(hexdump(data)) == list(hexdump(data, hidden=[]))


def test_secret_ranges_walks_fields_and_rows() -> None:
    msg = Message(Pdu(b"\x00" * 64, [1], 0.0, 0.0, True), 0, "c", "s", "kafka")
    row = Row("r", (("a", None), ("token", SECRET)), (1, "<redacted>"), (0, 1, 40, 8))
    inner = Field("auth", None, 10, 20, [Field("token", "<redacted>", 12, 6, hint=SECRET),
                                          Field("nowhere", "<redacted>", -1, 0, hint=SECRET)], "struct")
    msg.fields = [Field("length", 60, 0, 4), inner, Field("items", None, 30, 30, [row], "array")]
    assert secret_ranges(msg) == [(12, 6), (40, 8)]
    assert not row.materialized


# -- a message cut inside a secret ------------------------------------------------------------

def _recut(m: Message, cut: int, show: bool) -> Message:
    """m's request re-dissected with its bytes cut at `cut`, as a capture that ends there."""
    from kdissect import protocols
    from kdissect.dissect.base import run_dissector

    d = next(p for p in protocols.dissectors() if p.name == m.protocol)
    state = d.new_state()
    for attr in ("client_started",):  # ZooKeeper: past the handshake unless this is the connect
        if hasattr(state, attr) and m.info.get("op") != "connect":
            setattr(state, attr, True)
    out = Message(Pdu(m.data[:cut], list(m.frames), m.ts, m.ts_end, True), m.stream, m.src, m.dst, m.protocol)
    run_dissector(d, out, state, Options(show_secrets=show))
    return out


def test_a_cut_inside_a_secret_leaves_no_secret_byte_in_the_undecoded_rest(capture: Capture) -> None:
    cut_any = 0
    for m in dissect_file(str(capture.path)):
        spans = secret_ranges(m)
        if m.kind != "request" or not spans or m.info.get("op") == "SaslToken":
            continue
        off, n = spans[0]
        if n < 4:
            continue
        cut = off + n // 2
        hidden = _recut(m, cut, show=False)
        shown = _recut(m, cut, show=True)
        rest = [f for f in hidden.fields if f.name in ("undecoded", "body")]
        if not rest:
            continue  # this protocol kept nothing raw past the cut
        cut_any += 1
        part = m.data[off:cut]
        assert all(f.hint == SECRET and isinstance(f.value, str) for f in rest), (m.summary, rest)
        dump = "\n".join(hexdump(hidden.data, hidden=secret_ranges(hidden)))
        assert part.hex(" ") not in dump.replace("\n", " "), m.summary
        assert any(isinstance(f.value, bytes) and part in f.value for f in shown.fields
                   if f.name in ("undecoded", "body")), m.summary
    assert cut_any >= 4
