"""The part of a payload command (SEND, MESSAGE) after the BaseCommand:

    [0x0e02][size][BrokerEntryMetadata]   optional, broker -> client only
    [0x0e01][CRC32-C]                     magic and checksum of everything that follows
    [metadata size][MessageMetadata][payload]

The payload is compressed as MessageMetadata.compression says; a batch (num_messages_in_batch
set) holds, after decompression, [size][SingleMessageMetadata][bytes] per message. Encrypted
payloads and chunks of a larger message stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kdissect.dissect.base import Options
from kdissect.dissect.partial import inline_partial, keep_partial
from kdissect.errors import DecodeError, Truncated
from kdissect.model import BYTES, ENUM, HEX, RAW, STRUCT, Diagnostic, Field, array, struct
from kdissect.pulsar.protowire import WalkContext, walk
from kdissect.text import plural
from kdissect.wire.codecs import CodecError, CodecUnavailable, decompress
from kdissect.wire.crc import crc32c
from kdissect.wire.reader import WireReader

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY = 0x0E02
# The fields of a decompressed batch entry's metadata past these (properties by the thousand)
# count against the capture's entries, as the entry itself does: no bytes of the capture bound
# them (a few dozen bytes of zstd hold 100,000 empty properties).
FREE_ENTRY_FIELDS = 32


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
    broken: bool = False  # the batch breaks part-way (cut short, an entry that overruns)


def decode_payload(data: bytes, pos: int, ctx: WalkContext, opts: Options) -> tuple[list[Field], PayloadFacts]:
    """Fields for data[pos:]; problems go to ctx.diags. Raises DecodeError only on framing."""
    out: list[Field] = []
    facts = PayloadFacts()
    r = WireReader(data, pos)
    try:
        if r.remaining >= 2 and r.peek(2) == MAGIC_BROKER_ENTRY.to_bytes(2, "big"):
            out.append(_broker_entry(r, ctx))
        if r.remaining >= 2 and r.peek(2) == MAGIC_CRC32C.to_bytes(2, "big"):
            out.append(Field("magic", MAGIC_CRC32C, r.pos, 2, hint=HEX))
            r.skip(2)
            out.extend(_checksum(r, data, ctx, facts))
        else:
            ctx.note("no_checksum", "payload without magic 0x0e01 and checksum (protocol < 6)", r.pos)
        meta_at = r.pos
        size = r.uint32()
        out.append(Field("metadata_size", size, meta_at, 4))
        meta_at = r.pos
        try:
            children = _walk_sized(r, size, "MessageMetadata", ctx)
        except DecodeError as e:
            raise inline_partial(e, [], "metadata", meta_at) from None
    except DecodeError as e:
        raise keep_partial(e, "payload", pos, out, STRUCT) from None
    meta = Field("metadata", None, meta_at, r.pos - meta_at, children, STRUCT)
    out.append(meta)
    facts.metadata = meta
    out.extend(_payload(data, r.pos, len(data), meta, ctx, opts, facts))
    return out, facts


def _walk_sized(r: WireReader, size: int, message: str, ctx: WalkContext) -> list[Field]:
    """The fields of `message` in the next `size` bytes (r moves past them). When the frame is
    cut short inside them, the fields up to the cut travel on a Truncated as its partial."""
    if size > r.remaining and r.end == ctx.cut:
        start = r.pos
        children = walk(r.buf, start, r.end, message, ctx, 0)
        e = Truncated(f"{message}: {size} bytes, {r.end - start} captured", r.end)
        e.partial = Field(message, None, start, r.end - start, children, STRUCT)
        raise e
    sub = r.sub(size)
    return walk(r.buf, sub.pos, sub.end, message, ctx, 0)


def _broker_entry(r: WireReader, ctx: WalkContext) -> Field:
    at = r.pos
    r.skip(2)
    children = [Field("magic", MAGIC_BROKER_ENTRY, at, 2, hint=HEX)]
    try:
        size = r.uint32()
        children.append(Field("size", size, at + 2, 4))
        children += _walk_sized(r, size, "BrokerEntryMetadata", ctx)
    except DecodeError as e:
        raise inline_partial(e, children, "broker_entry_metadata", at) from None
    return struct("broker_entry_metadata", children, at, r.pos - at)


def _checksum(r: WireReader, data: bytes, ctx: WalkContext, facts: PayloadFacts) -> list[Field]:
    """The checksum after the magic 0x0e01, and whether it is right."""
    at = r.pos - 2
    value = r.uint32()
    total = int.from_bytes(data[0:4], "big") + 4 if len(data) >= 4 else -1
    fields = [Field("checksum", value, at + 2, 4, hint=HEX)]
    if total != len(data):
        fields.append(Field("checksum_status", "unverified (incomplete frame)", at + 2, 4))
        return fields
    computed = crc32c(data[r.pos:])
    facts.checksum_ok = computed == value
    if facts.checksum_ok:
        fields.append(Field("checksum_status", "correct", at + 2, 4))
        return fields
    fields.append(Field("checksum_status", f"incorrect, should be 0x{computed:08x}", at + 2, 4))
    ctx.note("checksum", f"CRC32-C mismatch: frame says 0x{value:08x}, computed 0x{computed:08x}", at + 2)
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
        ctx.note("encrypted", f"encrypted payload, keys: {', '.join(facts.encryption_keys)}", start)
        return [payload]
    if facts.chunk or not opts.decode_records:
        return [payload]
    body = _decompressed(raw, start, meta, facts.compression, ctx, opts)
    if body is None:
        return [payload]
    if facts.compression != "NONE":
        payload = Field("payload", body, start, end - start, hint=BYTES,
                        label=f"payload ({facts.compression.lower()}, {plural(len(raw), 'byte')} compressed)")
    if not isinstance(batch, int):
        return [payload]
    if facts.compression == "NONE":
        f = _batch(data, start, end, batch, start, end - start, False, ctx)
    else:
        f = _batch(body, 0, len(body), batch, start, end - start, True, ctx)
    kids = f.children or []
    facts.broken = bool(kids) and kids[-1].name == "undecoded"
    return [f]


def _int(v: object) -> int:
    return v if isinstance(v, int) else 0


# MessageMetadata.compression -> the codec of wire/codecs.py
_CODECS = {"LZ4": "lz4-block", "ZLIB": "zlib", "ZSTD": "zstd", "SNAPPY": "snappy"}


def _decompressed(raw: bytes, start: int, meta: Field, codec: str, ctx: WalkContext, opts: Options) -> bytes | None:
    """The payload decompressed within what is left of the message's budget. The output must
    be the `uncompressed_size` the metadata announces, which also caps the codec's work."""
    if codec == "NONE":
        return raw
    size = _int(meta.get("uncompressed_size"))
    cap = min(opts.max_decompressed, ctx.budget.inflate_left)
    name = codec.lower()
    if size > cap:
        ctx.note("decompress_cap", f"{name}: uncompressed size {size} exceeds the {cap} bytes left of "
                 f"{ctx.budget.which()}", start)
        return None
    try:
        if codec not in _CODECS:
            raise CodecError(f"unknown compression {codec}")
        body = decompress(_CODECS[codec], raw, size, size)
    except CodecUnavailable as e:
        ctx.note("codec_unavailable", f"{e}: payload not decoded", start)
        return None
    except CodecError as e:
        ctx.budget.spend(e.produced, False)
        ctx.note("decompress", _problem(e, name, size, cap), start)
        return None
    if len(body) != size:
        ctx.budget.spend(len(body), False)
        ctx.note("decompress", f"{name}: {plural(len(body), 'byte')} decompressed, metadata says {size}", start)
        return None
    ctx.budget.spend(len(body), True)
    return body


def _problem(e: CodecError, name: str, size: int, cap: int) -> str:
    """What went wrong, for a codec capped at the announced `size` (`cap`: the budget's)."""
    if not e.capped:
        return str(e)
    if e.declared is not None and e.declared > cap:
        return f"{name}: declared size {e.declared} exceeds the cap of {cap} bytes"
    return f"{name}: {plural(size + 1 if e.declared is None else e.declared, 'byte')} decompressed, metadata says {size}"


def _batch(buf: bytes, pos: int, end: int, count: int, at: int, length: int, rebase: bool,
           ctx: WalkContext) -> Field:
    """Split a batch in buf[pos:end]. Fields of a decompressed batch point at the payload. A
    batch the frame's cut falls in keeps the entries before the cut and the one it cuts short.
    Each entry spends one of the message's and the capture's entries, and an entry decompressed
    with more than FREE_ENTRY_FIELDS fields the rest from the capture's too."""
    r = WireReader(buf, pos, end)
    entries: list[Field] = []
    diags_before = len(ctx.diags)
    b = ctx.budget
    cut, ctx.cut = ctx.cut, (ctx.cut if not rebase else -1)  # the cut is in the frame, not in buf
    broke = False
    try:
        if end != ctx.cut:
            r.count(count, 4)
        for i in range(count):
            if b.elements_left <= 0 or not b.entry():
                why = (b.entries_spent("entries") if b.elements_left > 0 else
                       f"more than the {b.elements_limit} fields a message may show")
                ctx.note("batch_limit", f"{count} messages in the batch, {why}: the first {i} are shown", r.pos)
                break
            left = b.elements_left
            try:
                entries.append(_batch_entry(r, i, ctx))
            finally:
                if rebase and left - b.elements_left > FREE_ENTRY_FIELDS:
                    b.decompressed_elements(left - b.elements_left - FREE_ENTRY_FIELDS)
    except DecodeError as e:
        broke = True
        ctx.note("batch", f"batch entry {len(entries)} of {count}: {e}", e.offset)
        if isinstance(e.partial, Field):
            entries.append(e.partial)  # the entry it cut short, as far as it goes
        at_break = e.offset if pos <= e.offset <= end else r.pos
        entries.append(Field("undecoded", buf[at_break:end], at_break, end - at_break, hint=RAW))
    finally:
        ctx.cut = cut
    if not broke and not r.at_end() and len(entries) == count:
        ctx.note("batch_trailing", f"{plural(r.remaining, 'byte')} after the last batch entry", r.pos)
    if rebase:
        _rebase(entries, at, length)
        ctx.diags[diags_before:] = [_moved(d, at) for d in ctx.diags[diags_before:]]
    f = array("messages", entries, at, length)
    if len(entries) < count and (not entries or entries[-1].name != "undecoded"):
        f.label = f"messages (first {len(entries)} of {count})"
    return f


def _batch_entry(r: WireReader, index: int, ctx: WalkContext) -> Field:
    at = r.pos
    size = r.uint32()
    children = [Field("index", index, -1, 0), Field("metadata_size", size, at, 4)]
    try:
        children += _walk_sized(r, size, "SingleMessageMetadata", ctx)
        psize, null = _entry_facts(children)
        p_at = r.pos
        value = r.raw(psize)
    except DecodeError as e:
        raise inline_partial(e, children, "message", at) from None
    children.append(Field("payload", None if null else value, p_at, psize, hint=BYTES))
    return Field("message", None, at, r.pos - at, children, STRUCT)


def _entry_facts(children: list[Field]) -> tuple[int, bool]:
    """A batch entry's payload size (its first payload_size) and whether a null_value is set."""
    psize: object = 0
    found = null = False
    for c in children:
        if c.name == "payload_size":
            if not found:
                psize, found = c.value, True
        elif c.name == "null_value" and c.value:
            null = True
    return _int(psize), null


def _rebase(fields: list[Field], at: int, length: int) -> None:
    """Offsets into a decompressed buffer mean nothing in the frame: point at the payload."""
    for f in fields:
        if f.offset >= 0:
            f.offset, f.length = at, length
        _rebase(f.children or [], at, length)


def _moved(d: Diagnostic, at: int) -> Diagnostic:
    return replace(d, offset=at)
