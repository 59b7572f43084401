"""What the record decoders share: the decode context, timestamps as dates, attribute flags,
and the walk over a sequence of batches/messages that tells a broker's cut from a truncation."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

from kdissect.dissect.base import Budget, Options
from kdissect.kafka.compression import codec_name, inflate
from kdissect.kafka.diagnostics import DIAGNOSTICS
from kdissect.model import BYTES, RAW, TIME_MS, Diagnostic, Field
from kdissect.wire.codecs import CodecError, CodecUnavailable

# Fields are built for at most Budget.entries_left records and batches per message (all its
# `records` fields together); past that, v2 batches are counted from their headers only (a note
# says so), which bounds the time and memory one message can take.
LOG_APPEND_TIME = 0x08  # attributes bit: timestamps were set by the broker
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MAX_MS = 253402300799999  # 9999-12-31T23:59:59.999Z


class Ctx:
    """State of one decode_records call: options, diagnostics, counters, and the message's
    budget (decompressed bytes, records and batches shown), shared by its records fields. (A
    plain class: a dataclass's generated __init__ would run as Python code, not compiled.)"""

    __slots__ = ("opts", "budget", "diags", "records", "batches", "nbytes")

    def __init__(self, opts: Options, budget: Budget) -> None:
        self.opts = opts
        self.budget = budget
        self.diags: list[Diagnostic] = []
        self.records = 0
        self.batches = 0
        self.nbytes = 0

    def over_limit(self, offset: int) -> bool:
        """Whether the message may show no more records and batches (noted once per message);
        when it may, one is counted against the budget."""
        b = self.budget
        if b.entry():
            return False
        if b.first("kafka.records.limit"):
            self.add("records.limit", f"{b.entries_spent('records and batches')}: the rest are counted "
                     "from batch headers, not shown", offset)
        return True

    def add(self, name: str, text: str, offset: int) -> None:
        """The Kafka diagnostic `name` ("records.crc", see kafka/diagnostics.py)."""
        self.diags.append(DIAGNOSTICS(name, text, offset))

    def inflate(self, codec: int, data: bytes, offset: int, legacy_lz4: bool = False) -> bytes | None:
        """Decompress against what is left of the message's budget; problems become diagnostics
        at `offset`. Once the budget is spent nothing more is decompressed (noted once)."""
        b = self.budget
        if b.inflate_left <= 0:
            if b.first("kafka.records.decompression_budget"):
                self.add("records.decompression_budget",
                         f"{b.which()} is spent: compressed records from here on are not decoded", offset)
            return None
        left = b.inflate_left
        try:
            out = inflate(codec, data, left, legacy_lz4)
        except CodecUnavailable as e:
            if b.first(f"kafka.records.codec_unavailable.{codec}"):
                self.add("records.codec_unavailable",
                         f"{codec_name(codec)} payload: {e}: records not decoded", offset)
            return None
        except CodecError as e:
            b.spend(e.produced, False)
            if not e.capped:
                self.add("records.decompress", f"{codec_name(codec)} payload: {e}", offset)
                return None
            why = str(e) if left == b.inflate_limit else (
                f"{codec_name(codec)} output exceeds the {left} bytes left of {b.which()}")
            self.add("records.decompression_cap",
                     f"{why} (a decompression bomb?): records not decoded", offset)
            return None
        b.spend(len(out), True)
        return out


def flags_display(attributes: int, names: tuple[tuple[int, str], ...]) -> str:
    """"lz4|transactional": the codec when compressed, then the set flags; "none" if neither."""
    parts = [codec_name(attributes & 0x07)] if attributes & 0x07 else []
    parts += [name for bit, name in names if attributes & bit]
    return "|".join(parts) or "none"


def leaf(name: str, value: object, off: int, length: int, real: bool, hint: str | None = None,
         display: str | None = None) -> Field:
    """A scalar field; `real` False means the bytes live in a decompressed buffer, not in the
    message, so the field has no message offset."""
    return Field(name, value, off if real else -1, length, None, hint, display)


def time_leaf(name: str, ms: int, off: int, length: int, real: bool) -> Field:
    return leaf(name, ms, off, length, real, TIME_MS)


def bytes_leaf(name: str, value: bytes | None, off: int, length: int, real: bool) -> Field:
    return leaf(name, value, off, length, real, BYTES)


# decode(buf, start, end, ctx, real) -> the field of one batch or message spanning [start, end)
EntryDecoder = Callable[[bytes, int, int, Ctx, bool], Field]
MIN_ENTRY = 14  # the smallest legal entry after offset + length: a magic 0 message


def walk(buf: bytes, start: int, end: int, ctx: Ctx, real: bool, partial_ok: bool,
         decoders: dict[int, EntryDecoder]) -> list[Field]:
    """Entries (batches or messages: int64 offset, int32 length, ..., magic at +16) in
    [start, end). An entry running past `end` is the broker's cut at the fetch size when
    `partial_ok` (a note), else a truncation (an error)."""
    out: list[Field] = []
    pos = start
    where = start if real else -1
    while pos < end:
        if ctx.over_limit(pos if real else where):
            count_rest(buf, pos, end, ctx)
            break
        size = int.from_bytes(buf[pos + 8 : pos + 12], "big", signed=True) if end - pos >= 12 else None
        if size is not None and size < MIN_ENTRY:
            ctx.add("records.bad_length", f"batch/message length {size} is too small", pos if real else where)
            out.append(leaf("undecoded", bytes(buf[pos:end]), pos, end - pos, real, RAW))
            break
        if size is None or pos + 12 + size > end:
            out.append(_partial(buf, pos, end, size, ctx, real, partial_ok))
            break
        magic = buf[pos + 16]
        dec = decoders.get(magic)
        if dec is None:
            ctx.add("records.magic", f"unknown record format magic {magic}", pos if real else where)
            out.append(leaf("undecoded", bytes(buf[pos : pos + 12 + size]), pos, 12 + size, real, RAW))
        else:
            out.append(dec(buf, pos, pos + 12 + size, ctx, real))
        pos += 12 + size
    return out


V2_HEADER = 61  # a RecordBatch header; records_count is its last int32


def count_rest(buf: bytes, pos: int, end: int, ctx: Ctx) -> None:
    """Past the message's limit: the RecordBatches left in [pos, end) are counted from their
    headers, without fields; counting stops at anything else."""
    while end - pos >= V2_HEADER:
        size = int.from_bytes(buf[pos + 8 : pos + 12], "big", signed=True)
        if size < V2_HEADER - 12 or pos + 12 + size > end or buf[pos + 16] != 2:
            return
        ctx.batches += 1
        ctx.records += max(int.from_bytes(buf[pos + 57 : pos + 61], "big", signed=True), 0)
        pos += 12 + size


def _partial(buf: bytes, pos: int, end: int, size: int | None, ctx: Ctx, real: bool, partial_ok: bool) -> Field:
    need = "its length" if size is None else f"{size + 12} bytes"
    text = f"last batch/message cut short: {end - pos} bytes of {need}"
    if partial_ok:
        ctx.add("records.partial", text + " (the broker stops at the fetch size)", pos if real else -1)
    else:
        ctx.add("records.truncated", text, pos if real else -1)
    f = leaf("partial", bytes(buf[pos:end]), pos, end - pos, real, RAW)
    f.label = "partial (cut at the fetch size)" if partial_ok else "truncated"
    return f
