"""The consumer protocol carried in `bytes` fields of the classic group APIs.

JoinGroup metadata and DescribeGroups member metadata hold a ConsumerProtocolSubscription;
SyncGroup and DescribeGroups assignments hold a ConsumerProtocolAssignment. Each starts with
its own int16 version; the layout comes from the generated tables (schema_messages.EMBEDDED).
Groups of other protocol types (Kafka Connect, custom assignors) carry other bytes: those stay
raw unless they decode cleanly and completely. Newer versions than the tables know are decoded
with the newest known version; their extra trailing fields stay raw (the protocol only appends).
"""

from __future__ import annotations

from kdissect.errors import DecodeError
from kdissect.kafka.ops import ArrayCap, Ctx
from kdissect.kafka.plan import compile_message
from kdissect.kafka.schema_messages import EMBEDDED
from kdissect.model import RAW, STRUCT, Field
from kdissect.wire.reader import WireReader

SUBSCRIPTION = "ConsumerProtocolSubscription"
ASSIGNMENT = "ConsumerProtocolAssignment"
LABELS = {SUBSCRIPTION: "consumer protocol subscription", ASSIGNMENT: "consumer protocol assignment"}


def decode_embedded(message: str, f: Field, buf: bytes, ctx: Ctx) -> Field:
    """Replace a bytes Field (offset/length cover its length prefix) by the decoded structure,
    or return it unchanged when the bytes are not this protocol."""
    data: bytes = f.value
    start = f.offset + f.length - len(data)
    lo, hi, flex, _fields = EMBEDDED[message]
    if len(data) < 2:
        return f
    version = int.from_bytes(data[:2], "big", signed=True)
    if version < lo:
        return f
    r = WireReader(buf, start + 2, start + len(data))
    sub = Ctx(ctx.opts, ctx.state, budget=ctx.budget)
    try:
        body = compile_message(message, min(version, hi), flex is not None and version >= flex)(r, sub)
    except ArrayCap:
        ctx.diags.extend(sub.diags)  # the limit is the message's: its next array stops it
        return f
    except DecodeError:
        return f
    kids = [Field("version", version, start, 2)] + (body.children or [])
    if r.remaining:
        if version <= hi:
            return f  # not this protocol: a known version must use every byte
        kids.append(Field("unknown_fields", r.rest(), r.pos, r.end - r.pos, None, RAW))
    ctx.topics.extend(sub.topics)
    ctx.diags.extend(sub.diags)
    return Field(f.name, None, f.offset, f.length, kids, STRUCT, None, LABELS[message])


def subscription(f: Field, r: WireReader, ctx: Ctx) -> Field:
    return decode_embedded(SUBSCRIPTION, f, r.buf, ctx)


def assignment(f: Field, r: WireReader, ctx: Ctx) -> Field:
    return decode_embedded(ASSIGNMENT, f, r.buf, ctx)

