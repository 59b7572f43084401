"""SASL exchanges carried by Kafka: SaslAuthenticate's auth_bytes and the raw tokens of the v0
handshake. PLAIN (RFC 4616), SCRAM-SHA-256/512 (RFC 5802 messages) and OAUTHBEARER (RFC 7628)
are decoded; passwords, proofs and tokens are redacted unless opts.show_secrets (a SECRET field
whose offset and length are the hidden bytes, which hex dumps mask). Anything else (GSSAPI, an
unknown mechanism, bytes that do not parse) is kept as one raw field."""

from __future__ import annotations

from collections.abc import Callable

from kdissect.dissect.base import Options
from kdissect.model import ARRAY, RAW, SECRET, STRUCT, Field

REDACTED = "<redacted>"
# SCRAM attribute letters (RFC 5802 section 5.1) -> field names; secrets are redacted.
SCRAM_ATTRS = {"n": "username", "a": "authzid", "r": "nonce", "s": "salt", "i": "iterations",
               "c": "channel_binding", "p": "proof", "v": "server_signature", "e": "error",
               "m": "reserved"}
SCRAM_SECRETS = {"p"}
MAX_DIGITS = 19  # an iteration count longer than an int64's digits stays text (int() refuses past 4300)
# Attributes decoded from one SCRAM message or OAUTHBEARER key/value list (a handful in practice);
# past it the rest stays in the last one, unsplit, so a token of a million commas costs one field.
MAX_ATTRIBUTES = 100
# A mechanism's name has 1 to 20 characters (RFC 4422 section 3.1); SaslHandshake's string
# allows 32,767, and the conversation remembers the name for every token that follows.
MAX_MECHANISM = 20


def decode_sasl_auth_bytes(mechanism: str | None, data: bytes, offset: int, is_request: bool,
                           opts: Options) -> list[Field]:
    """Fields for one SASL token `data` found at `offset` of the message. `mechanism` is the
    one named in SaslHandshake; None guesses it from the bytes when unambiguous."""
    mech = (mechanism or "").upper()
    if not mech:
        mech = guess_mechanism(data, is_request) or ""
    family = "SCRAM" if mech.startswith("SCRAM-") else mech
    decoder = _DECODERS.get(family)
    fields = None
    if decoder is not None and data:
        fields = decoder(data, offset, is_request, opts)
    head = [Field("mechanism", mech or None, -1, 0)]
    if fields is None:
        if not data:
            return head + [Field("step", "empty", offset, 0)]
        return head + [Field("token", data, offset, len(data), hint=RAW)]
    return head + fields


def guess_mechanism(data: bytes, is_request: bool) -> str | None:
    """The mechanism a token belongs to, when its shape says so without doubt."""
    text = data.decode("utf-8", "replace")
    if text.startswith(("n,", "y,", "p=")):
        if "\x01auth=" in text:
            return "OAUTHBEARER"
        if ",r=" in text:
            return "SCRAM"
    if is_request and text.startswith("c=") and ",r=" in text and ",p=" in text:
        return "SCRAM"
    if not is_request and (text.startswith("r=") and ",s=" in text and ",i=" in text):
        return "SCRAM"
    if is_request and data.count(b"\x00") == 2:
        return "PLAIN"
    return None


def _secret(name: str, value: str, at: int, size: int, opts: Options) -> Field:
    """A secret's field: its value with show_secrets, else REDACTED marked SECRET over its bytes."""
    if opts.show_secrets:
        return Field(name, value, at, size)
    return Field(name, REDACTED, at, size, hint=SECRET)


# -- PLAIN -----------------------------------------------------------------------------


def _plain(data: bytes, offset: int, is_request: bool, opts: Options) -> list[Field] | None:
    """authzid NUL authcid NUL password (client only; the server answers with nothing)."""
    if not is_request or data.count(b"\x00") != 2:
        return None
    authzid, user, password = data.split(b"\x00")
    p1 = offset + len(authzid) + 1
    p2 = p1 + len(user) + 1
    return [
        Field("step", "plain", offset, len(data)),
        Field("authzid", authzid.decode("utf-8", "replace"), offset, len(authzid)),
        Field("username", user.decode("utf-8", "replace"), p1, len(user)),
        _secret("password", password.decode("utf-8", "replace"), p2, len(password), opts),
    ]


# -- SCRAM -----------------------------------------------------------------------------


def _scram_step(text: str, is_request: bool) -> tuple[str, int]:
    """The message kind and where its attribute list starts (after a GS2 header)."""
    if is_request and text.startswith(("n,", "y,", "p=")):
        first = text.find(",")
        second = text.find(",", first + 1)
        return "client_first", second + 1 if second > 0 else 0
    if is_request:
        return "client_final", 0
    if text.startswith(("v=", "e=")):
        return "server_final", 0
    return "server_first", 0


def _scram(data: bytes, offset: int, is_request: bool, opts: Options) -> list[Field] | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    step, start = _scram_step(text, is_request)
    fields = [Field("step", step, offset, len(data))]
    if start:
        fields += _gs2_header(text[:start], offset)
    extensions: list[Field] = []
    at = offset + len(text[:start].encode())
    for part in text[start:].split(",", MAX_ATTRIBUTES - 1):
        f = _scram_attr(part, at, opts)
        (extensions if f.name == "extension" else fields).append(f)
        at += len(part.encode()) + 1  # the attribute and its comma
    return fields + _extensions(extensions)


def _extensions(items: list[Field]) -> list[Field]:
    if not items:
        return []
    start = items[0].offset
    end = items[-1].offset + items[-1].length
    return [Field("extensions", None, start, end - start, items, ARRAY)]


def _gs2_header(header: str, offset: int) -> list[Field]:
    """"n,," / "y,," / "p=cb,": channel-binding flag and optional authzid ("a=...")."""
    flag, _, rest = header.partition(",")
    authz = rest.rstrip(",")
    out = [Field("gs2_cbind_flag", flag, offset, len(flag.encode()))]
    if authz.startswith("a="):
        out.append(Field("authzid", authz[2:], offset + len(flag) + 3, len(authz.encode()) - 2))
    return out


def _scram_attr(part: str, at: int, opts: Options) -> Field:
    key, eq, value = part.partition("=")
    size = len(part.encode())
    if not eq or len(key) != 1:
        return Field("extension", part, at, size)
    name = SCRAM_ATTRS.get(key, f"ext_{key}")
    if key in SCRAM_SECRETS:
        return _secret(name, value, at + 2, size - 2, opts)
    if key == "i" and value.isascii() and value.isdigit() and len(value) <= MAX_DIGITS:
        return Field(name, int(value), at + 2, size - 2)
    if key == "n":
        value = value.replace("=2C", ",").replace("=3D", "=")
    return Field(name, value, at + 2, size - 2)


# -- OAUTHBEARER -----------------------------------------------------------------------


def _oauthbearer(data: bytes, offset: int, is_request: bool, opts: Options) -> list[Field] | None:
    if not is_request:
        return _oauth_server(data.decode("utf-8", "replace"), offset)
    if data == b"\x01":
        return [Field("step", "client_error_ack", offset, 1)]
    # Split on bytes so that offsets stay exact even where the text is not valid UTF-8.
    header, sep, kvs = data.partition(b"\x01")
    if not sep:
        return None
    fields = [Field("step", "client_initial", offset, len(data))]
    fields += _gs2_header(header.decode("utf-8", "replace"), offset)
    pos = offset + len(header) + 1
    extensions: list[Field] = []
    for kv in kvs.split(b"\x01", MAX_ATTRIBUTES - 1):
        if kv:
            f = _oauth_kv(kv, pos, opts)
            (extensions if f.name == "extension" else fields).append(f)
        pos += len(kv) + 1
    return fields + _extensions(extensions)


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _oauth_kv(kv: bytes, at: int, opts: Options) -> Field:
    key, _, value = kv.partition(b"=")
    vat = at + len(key) + 1
    if key == b"auth":
        scheme, sp, token = value.partition(b" ")
        if not sp:  # no "Bearer ": the whole value is the token
            scheme, token = b"", value
        return Field("auth", None, at, len(kv), [
            Field("scheme", _text(scheme), vat, len(scheme)),
            _secret("token", _text(token), vat + len(scheme) + len(sp), len(token), opts),
        ], STRUCT)
    return Field("extension", None, at, len(kv), [
        Field("key", _text(key), at, len(key)),
        Field("value", _text(value), vat, len(value)),
    ], STRUCT)


def _oauth_server(text: str, offset: int) -> list[Field] | None:
    """An error status as JSON ({"status": ..., "scope": ..., "openid-configuration": ...})."""
    import json  # (only here: a Kafka capture without this error does not load it)

    try:
        doc = json.loads(text)
        if not isinstance(doc, dict):
            return None
        fields = [Field("step", "server_error", offset, len(text.encode()))]
        for key in ("status", "scope", "openid-configuration"):
            if key in doc:
                fields.append(Field(key.replace("-", "_"), str(doc[key]), offset, len(text.encode())))
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python's stack goes
        return None
    return fields


Decoder = Callable[[bytes, int, bool, Options], "list[Field] | None"]
_DECODERS: dict[str, Decoder] = {"PLAIN": _plain, "SCRAM": _scram, "OAUTHBEARER": _oauthbearer}
