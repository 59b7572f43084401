"""What runs on the executors: decode a unit of work and yield Arrow record batches.

Captures are opened where they are when the path is local (a plain path or file:); bytes that
Spark already read through a Hadoop file system (the job's binaryFile input) or that fsspec
reads (the data source with a URL) are spooled to a local temporary file first, since the
capture reader streams from a file. pyarrow is imported here, never by kdissect's core.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kdissect import accel
from kdissect.dissect.base import Options
from kdissect.model import Message
from kdissect.protocols import DissectorRegistry
from kdissect.spark.records import KEY_AT, VALUE_AT
from kdissect.spark.rows import LAYER_ROWS, Values, combined_values
from kdissect.spark.schema import combined_columns, layer_columns
from kdissect.spark.sqltypes import Columns, arrow_schema
from kdissect.spark.units import Piece, Unit, share_filter

BATCH_ROWS = 2048
BATCH_BYTES = 64 * 1024 * 1024  # record keys and values a batch holds at most (past one row)
# Records a batch holds at most (past one row): a message may carry 100,000 records of a few bytes
# each, about a kilobyte apiece as Python rows, so a batch of 2,048 such messages would be GBs.
BATCH_RECORDS = 65_536
# A decoded message is hundreds of small objects, few of them in reference cycles: collecting
# the youngest generation every 700 allocations (Python's default) costs a third of the time.
GC_THRESHOLD = (200_000, 50, 1000)


@dataclass(frozen=True)
class Config:
    """Decoding options, shipped to the executors with the job."""

    decode_as: dict[int, str] = field(default_factory=dict)
    max_bytes: int = 256
    max_decompressed: int = 64 * 1024 * 1024
    show_secrets: bool = False
    display_filter: str | None = None  # -Y text: compiled on each executor (it does not pickle)
    tls_keylog: str | None = None  # a key log path, read by each executor where it runs


    def build(self) -> tuple[DissectorRegistry, Options]:
        opts = Options(max_bytes=self.max_bytes, max_decompressed=self.max_decompressed,
                       show_secrets=self.show_secrets, tls_keylog=self.tls_keylog)
        return DissectorRegistry(decode_as=self.decode_as), opts


def local_path(path: str) -> str | None:
    """The local file a path names, or None when it needs a file system client."""
    if path.startswith("file://"):
        return path[len("file://"):]
    if path.startswith("file:"):
        return path[len("file:"):]
    return None if "://" in path else path


@contextlib.contextmanager
def opened(path: str, content: bytes | None = None) -> Iterator[str]:
    """A local file with the capture's bytes, for as long as the block runs."""
    local = local_path(path) if content is None else None
    if local is not None:
        yield local
        return
    fd, tmp = tempfile.mkstemp(prefix="kdissect-", suffix=".cap")
    try:
        with os.fdopen(fd, "wb") as out:
            if content is not None:
                out.write(content)
            else:
                _copy_url(path, out)
        yield tmp
    finally:
        os.unlink(tmp)


def _copy_url(path: str, out: Any) -> None:
    try:
        import fsspec
    except ImportError:
        from kdissect.errors import UsageError

        raise UsageError(f"{path}: reading URLs here needs fsspec (pip install fsspec)") from None
    with fsspec.open(path, "rb") as f:
        shutil.copyfileobj(f, out, 1 << 20)


def messages(piece: Piece, cfg: Config, content: bytes | None = None) -> Iterator[Message]:
    """The messages of one piece (a capture, or one flow-hash share of it) that pass -Y."""
    from kdissect.pipeline import dissect_file

    registry, opts = cfg.build()
    keep = compiled_filter(cfg.display_filter)
    with opened(piece.path, content) as local:
        for m in dissect_file(local, registry, opts, flow_filter=share_filter(piece.share, piece.shares)):
            m.capture = piece.path
            if keep is None or keep(m):
                yield m


@functools.lru_cache(maxsize=8)
def compiled_filter(text: str | None) -> Callable[[Message], bool] | None:
    if not text:
        return None
    from kdissect.filter import compile_filter

    return compile_filter(text)


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def batches(rows: Iterable[Values], cols: Columns) -> Iterator[Any]:
    """Rows (tuples of values in the order of cols) as Arrow record batches of the table's
    schema, of at most BATCH_ROWS rows, BATCH_BYTES of record keys and values (a record's exact
    bytes may be megabytes) and BATCH_RECORDS records, past the row that reaches a bound."""
    with _fewer_collections():
        yield from _batches(rows, cols)


def _batches(rows: Iterable[Values], cols: Columns) -> Iterator[Any]:
    schema = arrow_schema(cols)
    weigh = _weigher([name for name, _ in cols])
    chunk: list[Values] = []
    held = records = 0
    for row in rows:
        chunk.append(row)
        if weigh is not None:
            b, r = weigh(row)
            held += b
            records += r
        if len(chunk) >= BATCH_ROWS or held >= BATCH_BYTES or records >= BATCH_RECORDS:
            yield batch(chunk, schema)
            chunk, held, records = [], 0, 0
    if chunk:
        yield batch(chunk, schema)


def batch(chunk: list[Values], schema: Any) -> Any:
    """Rows (tuples of values in the order of schema's fields) as one Arrow record batch, built
    column by column (the rows transposed): pyarrow converts each column's values, a struct's
    from its tuple, in one call; a column of nulls (the struct of a protocol the batch does not
    hold) is made as such."""
    import pyarrow as pa

    arrays = []
    for values, f in zip(zip(*chunk, strict=True), schema, strict=True):
        if values[0] is None and values.count(None) == len(values):
            arrays.append(pa.nulls(len(values), f.type))
        else:
            arrays.append(pa.array(values, type=f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


Weigher = Callable[[Values], tuple[int, int]]


def _weigher(names: list[str]) -> Weigher | None:
    """The key and value bytes a row holds and its number of records: those of its records
    (a combined row) or its own (a record row); None for rows without records."""
    if "_records" in names:
        at = names.index("_records")

        def records(row: Values) -> tuple[int, int]:
            recs = row[at]
            return sum(len(r[VALUE_AT] or b"") + len(r[KEY_AT] or b"") for r in recs), len(recs)
        return records
    if "key" in names and "value" in names:
        key, value = names.index("key"), names.index("value")
        return lambda row: (len(row[value] or b"") + len(row[key] or b""), 0)
    return None


def layer_rows(msgs: Iterable[Message], layer: str, max_bytes: int) -> Iterator[Values]:
    make: Callable[[Message, int], list[Values]] = LAYER_ROWS[layer]
    for m in msgs:
        yield from make(m, max_bytes)


RowTest = Callable[[Values], bool]


def read_unit(unit: Unit, cfg: Config, layer: str, keep: RowTest | None = None) -> Iterator[Any]:
    """The data source's read: one layer's batches for a unit (keep: the rows to keep)."""
    msgs = (m for piece in unit for m in messages(piece, cfg))
    out = layer_rows(msgs, layer, cfg.max_bytes)
    yield from batches(out if keep is None else filter(keep, out), layer_columns(layer))


def combined(pieces: Iterable[tuple[Piece, bytes | None]], cfg: Config) -> Iterator[Any]:
    """The job's task: combined rows (messages + records + transaction) of some pieces."""
    msgs = (m for piece, content in pieces for m in messages(piece, cfg, content))
    yield from batches((combined_values(m, cfg.max_bytes) for m in msgs), combined_columns())


accel.bind(globals(), "kdissect.spark._batch", ("batch", "_batches"))
