"""SASL tokens made by an independent client implementation (kafka-python's PLAIN, SCRAM and
OAUTHBEARER mechanisms) and server messages in the RFC 5802 / 7628 formats decode to fields
with the secrets redacted unless asked."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth
from kafka.net.sasl.plain import SaslMechanismPlain
from kafka.net.sasl.scram import ScramClient

from kdissect.dissect.base import Options
from kdissect.kafka.sasl import REDACTED, decode_sasl_auth_bytes, guess_mechanism
from kdissect.model import SECRET, Field

HIDE, SHOW = Options(), Options(show_secrets=True)
SALT = base64.b64encode(b"0123456789abcdef").decode()


def values(fields: list[Field]) -> dict[str, object]:
    return {f.name: f.value for f in fields}


def located(fields: list[Field], data: bytes, at: int) -> None:
    """Every string field (but redacted ones) is the bytes at its offset."""
    for f in fields:
        if isinstance(f.value, str) and f.value != REDACTED and f.name not in ("mechanism", "step"):
            assert data[f.offset - at : f.offset - at + f.length].decode() == f.value, f.name


def test_plain() -> None:
    data = SaslMechanismPlain(sasl_plain_username="alice", sasl_plain_password="pa55").auth_bytes()
    fields = decode_sasl_auth_bytes("PLAIN", data, 40, True, HIDE)
    assert values(fields) == {"mechanism": "PLAIN", "step": "plain", "authzid": "alice", "username": "alice",
                              "password": REDACTED}
    assert values(decode_sasl_auth_bytes(None, data, 40, True, SHOW))["password"] == "pa55"
    located(fields, data, 40)
    pw = fields[-1]
    assert data[pw.offset - 40 : pw.offset - 40 + pw.length] == b"pa55"


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange(mech: str) -> None:
    client = ScramClient("bob", "secret", mech)
    first = client.first_message()
    f1 = decode_sasl_auth_bytes(mech, first, 100, True, HIDE)
    assert values(f1) == {"mechanism": mech, "step": "client_first", "gs2_cbind_flag": "n", "username": "bob",
                          "nonce": client.nonce.decode()}
    located(f1, first, 100)
    server_first = b"r=" + client.nonce + b"srvNonce,s=" + SALT.encode() + b",i=4096"
    f2 = decode_sasl_auth_bytes(mech, server_first, 0, False, HIDE)
    assert values(f2) == {"mechanism": mech, "step": "server_first", "nonce": client.nonce.decode() + "srvNonce",
                          "salt": SALT, "iterations": 4096}
    located(f2, server_first, 0)
    client.process_server_first_message(server_first)
    final = client.final_message()
    f3 = values(decode_sasl_auth_bytes(mech, final, 0, True, HIDE))
    assert (f3["step"], f3["channel_binding"], f3["proof"]) == ("client_final", "biws", REDACTED)
    shown = values(decode_sasl_auth_bytes(mech, final, 0, True, SHOW))
    assert shown["proof"] == base64.b64encode(client.client_proof).decode()
    f4 = values(decode_sasl_auth_bytes(mech, b"v=" + base64.b64encode(b"sig"), 0, False, HIDE))
    assert (f4["step"], f4["server_signature"]) == ("server_final", base64.b64encode(b"sig").decode())
    f5 = values(decode_sasl_auth_bytes(mech, b"e=invalid-proof", 0, False, HIDE))
    assert (f5["step"], f5["error"]) == ("server_final", "invalid-proof")


def test_scram_authzid_escaped_username_and_delegation_token_extension() -> None:
    data = b"n,a=admin,n=us=2Cer,r=abc,tokenauth=true"
    fields = decode_sasl_auth_bytes("SCRAM-SHA-256", data, 0, True, HIDE)
    assert values(fields) == {"mechanism": "SCRAM-SHA-256", "step": "client_first", "gs2_cbind_flag": "n",
                              "authzid": "admin", "username": "us,er", "nonce": "abc", "extensions": None}
    assert [(e.value, e.offset) for e in fields[-1].children or []] == [("tokenauth=true", 26)]


class _Tokens(AbstractTokenProvider):
    def token(self) -> str:
        return "eyJhbGciOiJub25lIn0.eyJzdWIiOiJib2IifQ."

    def extensions(self) -> dict[str, str]:
        return {"traceId": "42"}


def test_oauthbearer_initial_response_and_error() -> None:
    mech = SaslMechanismOAuth(sasl_oauth_token_provider=_Tokens())
    data = mech.auth_bytes()
    fields = decode_sasl_auth_bytes("OAUTHBEARER", data, 7, True, HIDE)
    assert [f.name for f in fields] == ["mechanism", "step", "gs2_cbind_flag", "auth", "extensions"]
    auth = {c.name: c.value for c in fields[3].children or []}
    assert auth == {"scheme": "Bearer", "token": REDACTED}
    exts = [{c.name: c.value for c in e.children or []} for e in fields[4].children or []]
    assert exts == [{"key": "traceId", "value": "42"}]
    token = decode_sasl_auth_bytes(None, data, 7, True, SHOW)[3].children[1]  # type: ignore[index]
    assert data[token.offset - 7 : token.offset - 7 + token.length].decode() == _Tokens().token()
    err = values(decode_sasl_auth_bytes("OAUTHBEARER", b'{"status":"invalid_token","scope":"x"}', 0, False, HIDE))
    assert (err["step"], err["status"], err["scope"]) == ("server_error", "invalid_token", "x")
    assert values(decode_sasl_auth_bytes("OAUTHBEARER", b"\x01", 0, True, HIDE))["step"] == "client_error_ack"


def test_guesses() -> None:
    client = ScramClient("u", "p", "SCRAM-SHA-256")
    assert guess_mechanism(client.first_message(), True) == "SCRAM"
    assert guess_mechanism(b"r=abc,s=" + SALT.encode() + b",i=10", False) == "SCRAM"
    assert guess_mechanism(b"\x00u\x00p", True) == "PLAIN"
    assert guess_mechanism(SaslMechanismOAuth(sasl_oauth_token_provider=_Tokens()).auth_bytes(), True) == "OAUTHBEARER"
    assert guess_mechanism(b"\x60\x82\x01\x00", True) is None
    assert guess_mechanism(b"", False) is None


def test_opaque_and_empty_tokens() -> None:
    gss = decode_sasl_auth_bytes("GSSAPI", b"\x60\x82\x01\x00", 3, True, HIDE)
    assert [(f.name, f.value, f.offset) for f in gss] == [("mechanism", "GSSAPI", -1), ("token", b"\x60\x82\x01\x00", 3)]
    empty = decode_sasl_auth_bytes("PLAIN", b"", 3, False, HIDE)
    assert values(empty) == {"mechanism": "PLAIN", "step": "empty"}
    assert values(decode_sasl_auth_bytes("PLAIN", b"no nul here", 0, True, HIDE))["token"] == b"no nul here"


# -- a real client (librdkafka) against the scripted responder, through the pipeline -----------


def _sasl_tokens(show: bool) -> list[tuple[str, dict[str, object]]]:
    import json
    from pathlib import Path

    from kdissect.pipeline import dissect_file
    from kdissect.protocols import DissectorRegistry

    path = Path(__file__).resolve().parents[3] / "captures" / "kafka" / "scripted_ck_sasl.pcap"
    if not path.exists():
        pytest.skip("captures/kafka/scripted_ck_sasl.pcap is not present")
    ports = json.loads(path.with_suffix(".json").read_text())["ports"]
    msgs = dissect_file(str(path), DissectorRegistry(decode_as={p: "kafka" for p in ports}),
                        Options(show_secrets=show))
    out = []
    for m in msgs:
        auth = next((f for f in m.fields if f.name == "auth_bytes" and f.children), None)
        if auth is not None:
            out.append((m.kind, {c.name: c.value for c in auth.children or []}))
    return out


def test_capture_sasl_exchanges() -> None:
    """The client reconnects a varying number of times: check each mechanism's exchanges."""
    tokens = _sasl_tokens(False)
    by_mech: dict[object, list[tuple[str, object]]] = {}
    for kind, t in tokens:
        by_mech.setdefault(t["mechanism"], []).append((kind, t["step"]))
    assert set(by_mech) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}
    scram = [("request", "client_first"), ("response", "server_first"),
             ("request", "client_final"), ("response", "server_final")]
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        steps = by_mech[mech]
        assert steps and len(steps) % 4 == 0 and steps == scram * (len(steps) // 4)
    assert set(by_mech["PLAIN"]) == {("request", "plain")}
    assert set(by_mech["OAUTHBEARER"]) == {("request", "client_initial")}
    plain = [t for _, t in tokens if t["mechanism"] == "PLAIN"]
    assert {t["username"] for t in plain} == {"alice", "bob"} and {t["password"] for t in plain} == {REDACTED}
    proofs = {t["proof"] for _, t in tokens if t["step"] == "client_final"}
    assert proofs == {REDACTED}
    shown = {t["password"] for _, t in _sasl_tokens(True) if t["mechanism"] == "PLAIN"}
    assert shown == {"alice-secret", "wrong"}


def test_oauthbearer_token_offsets_are_byte_exact() -> None:
    """Offsets count bytes, so a value that is not UTF-8 before the token cannot shift the
    token's span (hex dumps mask exactly that span); a token without a scheme is still hidden."""
    data = b"n,,\x01x=\xff\xfe\x01auth=Bearer tok.en\x01\x01"
    auth = next(f for f in decode_sasl_auth_bytes("OAUTHBEARER", data, 10, True, HIDE) if f.name == "auth")
    token = auth.children[1]  # type: ignore[index]
    assert (token.value, token.hint) == (REDACTED, SECRET)
    assert data[token.offset - 10 : token.offset - 10 + token.length] == b"tok.en"
    bare = b"n,,\x01auth=opaque-token\x01\x01"
    auth = next(f for f in decode_sasl_auth_bytes("OAUTHBEARER", bare, 0, True, HIDE) if f.name == "auth")
    scheme, token = auth.children  # type: ignore[misc]
    assert (scheme.value, token.value) == ("", REDACTED)
    assert bare[token.offset : token.offset + token.length] == b"opaque-token"


def test_redacted_fields_are_marked_secret() -> None:
    data = SaslMechanismPlain(sasl_plain_username="alice", sasl_plain_password="pa55").auth_bytes()
    assert [f.name for f in decode_sasl_auth_bytes("PLAIN", data, 0, True, HIDE) if f.hint == SECRET] == ["password"]
    assert not [f for f in decode_sasl_auth_bytes("PLAIN", data, 0, True, SHOW) if f.hint == SECRET]


@pytest.mark.parametrize("count", ["\u00b2", "\u0661\u0662", "9" * 5000, "-1", ""])
def test_an_iteration_count_that_is_no_ascii_number_stays_text(count: str) -> None:
    token = f"r=abc,s={SALT},i={count}".encode()
    assert values(decode_sasl_auth_bytes("SCRAM-SHA-256", token, 0, False, HIDE))["iterations"] == count


@given(st.sampled_from([None, "PLAIN", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"]), st.booleans(),
       st.lists(st.sampled_from(["n,,", "y,", "r=", "s=", "i=", "c=", "p=", "a=", "\x01auth=", ",", "=", "\x00",
                                 "\u00b2", "9" * 30, "Bearer ", "x"]), max_size=12).map("".join))
def test_any_token_decodes_to_fields(mechanism: str | None, is_request: bool, text: str) -> None:
    data = text.encode()
    fields = decode_sasl_auth_bytes(mechanism, data, 7, is_request, HIDE)
    assert fields[0].name == "mechanism" and all(isinstance(f, Field) for f in fields)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"status":' * 100_000 + "1" + "}" * 100_000])
def test_a_server_message_nested_deeper_than_the_stack_stays_a_token(text: str) -> None:
    fields = decode_sasl_auth_bytes("OAUTHBEARER", text.encode(), 0, False, HIDE)
    assert [f.name for f in fields] == ["mechanism", "token"]


@pytest.mark.parametrize(("mech", "token"), [
    ("SCRAM-SHA-256", b"n,,n=u,r=x" + b"," * 400_000),
    ("SCRAM-SHA-256", "n,,n=\u00e9,r=x,".encode() + b"q=\xc3\xa9," * 100_000),
    ("OAUTHBEARER", b"n,,\x01" + b"k=v\x01" * 300_000 + b"\x01"),
])
def test_a_token_of_countless_attributes_decodes_quickly_to_a_few_fields(mech: str, token: bytes) -> None:
    # An attribute's offset is carried from the one before it (not counted again from the start),
    # and past MAX_ATTRIBUTES the rest of the token stays in the last attribute.
    import time

    t0 = time.process_time()
    fields = decode_sasl_auth_bytes(mech, token, 7, True, HIDE)
    assert time.process_time() - t0 < 2.0
    flat = [f for f in fields for f in (f.children or [f])]
    assert 3 <= len(flat) <= 110
    last = flat[-1]
    assert last.offset - 7 + last.length <= len(token)
    located([f for f in flat if f.hint != SECRET], token, 7)


def test_scram_attribute_offsets_count_bytes() -> None:
    token = "n,,n=j\u00f6rg,r=n\u00f6nce,x=\u00e9xt,w\u00e9ird".encode()
    fields = decode_sasl_auth_bytes("SCRAM-SHA-256", token, 3, True, HIDE)
    flat = [f for f in fields for f in (f.children or [f])]
    located(flat, token, 3)
    assert [(f.name, f.value) for f in flat if f.name in ("username", "nonce", "ext_x", "extension")] == [
        ("username", "j\u00f6rg"), ("nonce", "n\u00f6nce"), ("ext_x", "\u00e9xt"), ("extension", "w\u00e9ird")]
