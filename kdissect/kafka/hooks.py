"""What Kafka `bytes` fields carry: a table of (message, field path) -> kind of content.

Pure data: the interpreter (plan.py) decodes each kind when it compiles a plan, looking a bytes
field up here once per compilation.
"""

from __future__ import annotations

from enum import Enum


class Carried(Enum):
    """The content of a bytes field."""

    SUBSCRIPTION = "ConsumerProtocolSubscription"  # an embedded message of schema_messages.EMBEDDED
    ASSIGNMENT = "ConsumerProtocolAssignment"  # likewise
    SASL_CLIENT = "sasl client token"  # a SASL token the client sent (sasl.py)
    SASL_SERVER = "sasl server token"  # a SASL token the server sent
    SECRET = "secret"  # a credential, redacted unless show_secrets


HOOKS: dict[tuple[str, str], Carried] = {
    # The consumer protocol, in the bytes of the classic group APIs.
    ("JoinGroupRequest", "protocols.metadata"): Carried.SUBSCRIPTION,
    ("JoinGroupResponse", "members.metadata"): Carried.SUBSCRIPTION,
    ("DescribeGroupsResponse", "groups.members.member_metadata"): Carried.SUBSCRIPTION,
    ("SyncGroupRequest", "assignments.assignment"): Carried.ASSIGNMENT,
    ("SyncGroupResponse", "assignment"): Carried.ASSIGNMENT,
    ("DescribeGroupsResponse", "groups.members.member_assignment"): Carried.ASSIGNMENT,
    ("SaslAuthenticateRequest", "auth_bytes"): Carried.SASL_CLIENT,
    ("SaslAuthenticateResponse", "auth_bytes"): Carried.SASL_SERVER,
    # Credentials carried as plain bytes: delegation-token HMACs (the token's password) and SCRAM
    # salted passwords.
    ("AlterUserScramCredentialsRequest", "upsertions.salted_password"): Carried.SECRET,
    ("CreateDelegationTokenResponse", "hmac"): Carried.SECRET,
    ("RenewDelegationTokenRequest", "hmac"): Carried.SECRET,
    ("ExpireDelegationTokenRequest", "hmac"): Carried.SECRET,
    ("DescribeDelegationTokenResponse", "tokens.hmac"): Carried.SECRET,
}


# APIs whose messages carry a credential (SaslAuthenticate, the delegation-token APIs,
# AlterUserScramCredentials): bytes of theirs left undecoded are redacted unless show_secrets.
CREDENTIAL_APIS = frozenset({36, 38, 39, 40, 41, 51})
