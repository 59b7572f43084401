"""The part of a payload command (SEND, MESSAGE) after the BaseCommand:

    [0x0e02][size][BrokerEntryMetadata]   optional, broker -> client only
    [0x0e01][CRC32-C]                     magic and checksum of everything that follows
    [metadata size][MessageMetadata][payload]

The payload is compressed as MessageMetadata.compression says; a batch (num_messages_in_batch
set) holds, after decompression, [size][SingleMessageMetadata][bytes] per message. Encrypted
payloads and chunks of a larger message stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import crc32c

from kdissect.dissect.base import Options
from kdissect.errors import DecodeError
from kdissect.model import BYTES, ENUM, RAW, STRUCT, Diagnostic, Field, Group, Severity, array, struct
from kdissect.pulsar.compression import CodecError, decompress
from kdissect.pulsar.protowire import WalkContext, decode, walk
from kdissect.wire.reader import WireReader

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY = 0x0E02


@dataclass
class PayloadFacts:
    """What a summary line needs from the payload section."""

    messages: int = 1
    compression: str = "NONE"
    encryption_keys: list[str] = field(default_factory=list)
    chunk: str = ""  # "chunk 2/5" for a chunk of a larger message
    null_value: bool = False
    checksum_ok: bool | None = None
    metadata: Field | None = None


def decode_payload(data: bytes, pos: int, ctx: WalkContext, opts: Options) -> tuple[list[Field], PayloadFacts]:
    """Fields for data[pos:]; problems go to ctx.diags. Raises DecodeError only on framing."""
    out: list[Field] = []
    facts = PayloadFacts()
    r = WireReader(data, pos)
    if r.remaining >= 2 and r.peek(2) == MAGIC_BROKER_ENTRY.to_bytes(2, "big"):
        out.append(_broker_entry(r, ctx))
    if r.remaining >= 2 and r.peek(2) == MAGIC_CRC32C.to_bytes(2, "big"):
        out.extend(_checksum(r, data, ctx, facts))
    else:
        ctx.note(Group.PROTOCOL, "no_checksum", "payload without magic 0x0e01 and checksum (protocol < 6)", r.pos)
    meta_at = r.pos
    size = r.uint32()
    out.append(Field("metadata_size", size, meta_at, 4))
    meta_r = r.sub(size)
    meta = decode(data, meta_r.pos, meta_r.end, "MessageMetadata", ctx, "metadata")
    out.append(meta)
    facts.metadata = meta
    out.extend(_payload(data, r.pos, len(data), meta, ctx, opts, facts))
    return out, facts


def _broker_entry(r: WireReader, ctx: WalkContext) -> Field:
    at = r.pos
    r.skip(2)
    size = r.uint32()
    sub = r.sub(size)
    children = [Field("magic", MAGIC_BROKER_ENTRY, at, 2, display="0x0e02"), Field("size", size, at + 2, 4)]
    children += walk(r.buf, sub.pos, sub.end, "BrokerEntryMetadata", ctx, 0)
    return struct("broker_entry_metadata", children, at, r.pos - at)


def _checksum(r: WireReader, data: bytes, ctx: WalkContext, facts: PayloadFacts) -> list[Field]:
    at = r.pos
    r.skip(2)
    value = r.uint32()
    total = int.from_bytes(data[0:4], "big") + 4 if len(data) >= 4 else -1
    fields = [Field("magic", MAGIC_CRC32C, at, 2, display="0x0e01"), Field("checksum", value, at + 2, 4)]
    if total != len(data):
        fields.append(Field("checksum_status", "unverified (incomplete frame)", at + 2, 4))
        return fields
    computed = crc32c.crc32c(data[r.pos:])
    facts.checksum_ok = computed == value
    if facts.checksum_ok:
        fields.append(Field("checksum_status", "correct", at + 2, 4))
        return fields
    fields.append(Field("checksum_status", f"incorrect, should be 0x{computed:08x}", at + 2, 4))
    ctx.diags.append(Diagnostic(
        Severity.ERROR, Group.CHECKSUM, "pulsar.checksum",
        f"CRC32-C mismatch: frame says 0x{value:08x}, computed 0x{computed:08x}", at + 2,
    ))
    return fields


def _enum_name(meta: Field, name: str, default: str) -> str:
    f = meta.child(name)
    if f is None or f.hint != ENUM or not f.display:
        return default
    return f.display


def _payload(data: bytes, start: int, end: int, meta: Field, ctx: WalkContext, opts: Options,
             facts: PayloadFacts) -> list[Field]:
    raw = data[start:end]
    facts.compression = _enum_name(meta, "compression", "NONE")
    facts.null_value = bool(meta.get("null_value"))
    keys = meta.child("encryption_keys")
    facts.encryption_keys = [str(k.get("key")) for k in (keys.children or [])] if keys else []
    batch = meta.get("num_messages_in_batch")
    if isinstance(batch, int):
        facts.messages = batch
    chunks = meta.get("num_chunks_from_msg")
    if isinstance(chunks, int) and chunks > 1:
        facts.chunk = f"chunk {_int(meta.get('chunk_id')) + 1}/{chunks}"
    payload = Field("payload", raw, start, end - start, hint=BYTES)
    if facts.encryption_keys:
        payload.label = "payload (encrypted)"
        ctx.note(Group.COMMENT, "encrypted", f"encrypted payload, keys: {', '.join(facts.encryption_keys)}", start)
        return [payload]
    if facts.chunk or not opts.decode_records:
        return [payload]
    body = _decompressed(raw, start, meta, facts.compression, ctx, opts)
    if body is None:
        return [payload]
    if facts.compression != "NONE":
        payload = Field("payload", body, start, end - start, hint=BYTES,
                        label=f"payload ({facts.compression.lower()}, {len(raw)} bytes compressed)")
    if not isinstance(batch, int):
        return [payload]
    if facts.compression == "NONE":
        return [_batch(data, start, end, batch, start, end - start, False, ctx)]
    return [_batch(body, 0, len(body), batch, start, end - start, True, ctx)]


def _int(v: object) -> int:
    return v if isinstance(v, int) else 0


def _decompressed(raw: bytes, start: int, meta: Field, codec: str, ctx: WalkContext, opts: Options) -> bytes | None:
    if codec == "NONE":
        return raw
    size = _int(meta.get("uncompressed_size"))
    if size > opts.max_decompressed:
        ctx.note(Group.UNDECODED, "decompress_cap",
                 f"{codec.lower()}: uncompressed size {size} exceeds the cap of {opts.max_decompressed} bytes",
                 start, Severity.WARNING)
        return None
    try:
        return decompress(codec, raw, size, opts.max_decompressed)
    except CodecError as e:
        ctx.note(Group.MALFORMED, "decompress", str(e), start, Severity.ERROR)
        return None


def _batch(buf: bytes, pos: int, end: int, count: int, at: int, length: int, rebase: bool,
           ctx: WalkContext) -> Field:
    """Split a batch in buf[pos:end]. Fields of a decompressed batch point at the payload."""
    r = WireReader(buf, pos, end)
    entries: list[Field] = []
    diags_before = len(ctx.diags)
    try:
        r.count(count, 4)
        for i in range(count):
            entries.append(_batch_entry(r, i, ctx))
    except DecodeError as e:
        ctx.note(Group.MALFORMED, "batch", f"batch entry {len(entries)} of {count}: {e}", e.offset, Severity.ERROR)
        entries.append(Field("undecoded", buf[r.pos:end], r.pos, end - r.pos, hint=RAW))
    if not r.at_end() and len(entries) == count:
        ctx.note(Group.MALFORMED, "batch_trailing", f"{r.remaining} bytes after the last batch entry", r.pos,
                 Severity.WARNING)
    if rebase:
        _rebase(entries, at, length)
        ctx.diags[diags_before:] = [_moved(d, at) for d in ctx.diags[diags_before:]]
    return array("messages", entries, at, length)


def _batch_entry(r: WireReader, index: int, ctx: WalkContext) -> Field:
    at = r.pos
    size = r.uint32()
    sub = r.sub(size)
    children = [Field("index", index, -1, 0), Field("metadata_size", size, at, 4)]
    children += walk(r.buf, sub.pos, sub.end, "SingleMessageMetadata", ctx, 0)
    psize = _int(next((c.value for c in children if c.name == "payload_size"), 0))
    p_at = r.pos
    value = r.raw(psize)
    null = any(c.name == "null_value" and c.value for c in children)
    children.append(Field("payload", None if null else value, p_at, psize, hint=BYTES))
    return Field("message", None, at, r.pos - at, children, STRUCT)


def _rebase(fields: list[Field], at: int, length: int) -> None:
    """Offsets into a decompressed buffer mean nothing in the frame: point at the payload."""
    for f in fields:
        if f.offset >= 0:
            f.offset, f.length = at, length
        _rebase(f.children or [], at, length)


def _moved(d: Diagnostic, at: int) -> Diagnostic:
    return Diagnostic(d.severity, d.group, d.key, d.message, at)
