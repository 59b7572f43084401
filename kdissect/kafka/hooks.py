"""Embedded protocols in Kafka `bytes` fields: which field carries what.

(message, field path) -> decoder. A decoder takes the decoded bytes Field and returns it
unchanged or replaced by a structure. Looked up once per plan compilation.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import lru_cache

from kdissect.kafka.ops import Ctx
from kdissect.model import SECRET, STRUCT, Field
from kdissect.wire.reader import WireReader

Hook = Callable[[Field, WireReader, Ctx], Field]

CONSUMER_SUBSCRIPTION = (("JoinGroupRequest", "protocols.metadata"),
                         ("JoinGroupResponse", "members.metadata"),
                         ("DescribeGroupsResponse", "groups.members.member_metadata"))
CONSUMER_ASSIGNMENT = (("SyncGroupRequest", "assignments.assignment"),
                       ("SyncGroupResponse", "assignment"),
                       ("DescribeGroupsResponse", "groups.members.member_assignment"))
SASL = {("SaslAuthenticateRequest", "auth_bytes"): True, ("SaslAuthenticateResponse", "auth_bytes"): False}
# Credentials carried as plain bytes: delegation-token HMACs (the token's password) and SCRAM
# salted passwords. Redacted unless show_secrets.
SECRET_BYTES = frozenset({
    ("AlterUserScramCredentialsRequest", "upsertions.salted_password"),
    ("CreateDelegationTokenResponse", "hmac"),
    ("RenewDelegationTokenRequest", "hmac"),
    ("ExpireDelegationTokenRequest", "hmac"),
    ("DescribeDelegationTokenResponse", "tokens.hmac"),
})


def lookup(message: str, path: str) -> Hook | None:
    key = (message, path)
    if key in CONSUMER_SUBSCRIPTION or key in CONSUMER_ASSIGNMENT:
        from kdissect.kafka import consumer_protocol as cp  # imports plan, which imports this

        return cp.subscription if key in CONSUMER_SUBSCRIPTION else cp.assignment
    if key in SASL:
        return _sasl_hook(SASL[key])
    if key in SECRET_BYTES:
        return _secret_bytes
    return None


@lru_cache(maxsize=1)
def sasl_decoder() -> Callable[..., list[Field]] | None:
    try:
        mod = importlib.import_module("kdissect.kafka.sasl")
    except ImportError:
        return None
    fn = getattr(mod, "decode_sasl_auth_bytes", None)
    return fn if callable(fn) else None


def _sasl_hook(is_request: bool) -> Hook:
    def hook(f: Field, r: WireReader, ctx: Ctx) -> Field:
        decode = sasl_decoder()
        if decode is None:
            return f
        data: bytes = f.value
        start = f.offset + f.length - len(data)
        kids = decode(ctx.state.get("sasl_mechanism"), data, start, is_request, ctx.opts)
        if not kids:
            return f
        return Field(f.name, None, f.offset, f.length, kids, STRUCT, None, "SASL")
    return hook


def _secret_bytes(f: Field, r: WireReader, ctx: Ctx) -> Field:
    if ctx.opts.show_secrets:
        return f
    size = len(f.value)
    return Field(f.name, f"<redacted {size} bytes>", f.offset + f.length - size, size, hint=SECRET)
