"""Kafka record data: the bytes of a `records` field (Produce requests, Fetch responses, ...).

A records field holds batches one after another; the magic byte at offset 16 of each selects
the format: 0 and 1 are MessageSet messages (records_legacy), 2 is a RecordBatch (records_v2).
The field tree is an array of batches (a legacy message counts as a batch); its offsets are
offsets into the whole message, except below a compressed payload, whose fields have offset -1.
"""

from __future__ import annotations

from kdissect import accel
from kdissect.dissect.base import Budget, Options
from kdissect.kafka.records_common import Ctx, EntryDecoder, walk
from kdissect.kafka.records_legacy import decode_message
from kdissect.kafka.records_v2 import count_batch, decode_batch
from kdissect.model import ARRAY, Diagnostic, Field
from kdissect.text import plural

DECODERS: dict[int, EntryDecoder] = {0: decode_message, 1: decode_message, 2: decode_batch}
# Summary-only views: v2 batches are counted from their headers (legacy messages are few and
# their compressed wrappers hide their count, so they are decoded as usual).
COUNTERS: dict[int, EntryDecoder] = {**DECODERS, 2: count_batch}


def decode_records(buf: bytes, start: int, end: int, opts: Options, name: str = "records",
                   partial_ok: bool = True, budget: Budget | None = None
                   ) -> tuple[Field, list[Diagnostic], dict[str, int]]:
    """Decode the batches in buf[start:end] (the bytes after the field's length prefix).

    Returns the field (an array of batches), diagnostics and {"records", "batches", "bytes"}
    (bytes: the sum of key and value sizes). A batch running past `end` is the broker's cut at
    the fetch size: a note when `partial_ok` (responses), an error otherwise. `budget` is the
    message's (all its records fields share opts.max_decompressed decompressed bytes and the
    limit on records and batches shown); a new one when None. Never raises. Its compiled twin
    is kdissect/kafka/_records.pyx.
    """
    end = min(end, len(buf))
    start = max(0, min(start, end))
    ctx = Ctx(opts, budget if budget is not None else Budget(opts))
    decoders = DECODERS if opts.record_detail else COUNTERS
    batches = walk(buf, start, end, ctx, True, partial_ok, decoders) if opts.decode_records else []
    field = Field(name, None, start, end - start, batches, ARRAY)
    if not opts.decode_records and end > start:
        field.children = None
        field.value = bytes(buf[start:end])
        field.hint = "raw"
    field.label = f"{name} ({plural(ctx.records, 'record')} in {plural(ctx.batches, 'batch')})"
    return field, ctx.diags, {"records": ctx.records, "batches": ctx.batches, "bytes": ctx.nbytes}


accel.bind(globals(), "kdissect.kafka._records", ("decode_records",))
