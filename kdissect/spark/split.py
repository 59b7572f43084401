"""Big captures split by byte range, so that each byte is read once whatever the task count.

1. Each task reads one byte range of a capture (capture/ranges.py: the records that start in
   it), decodes link, IP and TCP headers, and emits its packets keyed by conversation (the
   canonical endpoints), with their frame numbers within the range, plus one span row: where
   its first record started, where the next range's must start, how many frames it held.
2. The driver checks that the ranges of each capture agree (`stitch`) and turns range frame
   numbers into the capture's. A capture whose ranges disagree (a record boundary found in the
   wrong place, a pcapng interface declared late) is decoded whole by one task instead.
3. A shuffle groups each conversation's packets in frame order. A first pass over the groups
   runs only the TCP tracker and the quiet decoding of protocols that learn across
   conversations: it reports where each conversation starts (the capture's stream numbers are
   the order of those starts) and what each group learned, with frames (dissect/base.py's
   Teaches). The second pass dissects each group once, numbered and taught as the
   single-process run would be.

Stream numbers, frame numbers and every decoded value equal the single-process run's, except
past the tracker's bounds (more than 10,000 conversations open at once, or a packet of one of
more than 20,000 ended conversations), where the single process closes or forgets
conversations that a group, holding only its own, keeps.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import pickle
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kdissect.capture.l2l4 import decode
from kdissect.capture.pcapfile import RawFrame
from kdissect.capture.ranges import HEAD, Layout, RangeReader, Span, layout, stitch
from kdissect.dissect.base import CaptureState, Lessons
from kdissect.model import Message
from kdissect.spark import worker
from kdissect.spark.progress import Counters
from kdissect.spark.rows import combined_row
from kdissect.spark.schema import combined_columns
from kdissect.spark.sqltypes import Columns, arrow_schema, ddl
from kdissect.spark.units import conversation_key
from kdissect.spark.worker import Config, compiled_filter

# A range's packets (key: the conversation's endpoints), and its one span row (key null).
PACKET_COLUMNS: Columns = (
    ("file", "int"), ("part", "int"), ("key", "binary"), ("number", "bigint"), ("ts", "double"),
    ("linktype", "int"), ("data", "binary"), ("wirelen", "bigint"), ("span_first", "bigint"),
    ("span_next", "bigint"), ("span_frames", "bigint"), ("span_bytes", "bigint"), ("span_late", "boolean"),
)
SPAN_COLUMNS = ("file", "part", "span_first", "span_next", "span_frames", "span_bytes", "span_late")
# The first pass's rows: a conversation's first frame, or a group's lessons (pickled).
LEARNED_COLUMNS: Columns = (("file", "int"), ("start", "bigint"), ("lessons", "binary"))
GROUP_KEYS = ("file", "key")
GROUP_COLUMNS = ("file", "key", "frame", "ts", "linktype", "data", "wirelen")
BATCH_PACKETS = 4096  # packets in one Arrow batch of step 1, at most
BATCH_BYTES = 16 * 1024 * 1024  # and packet bytes


MIN_RANGE = 4096  # bytes: a range smaller than this costs more to plan than to read
FIRST_LOOK = 4096  # bytes the driver reads of a capture's head first (all of HEAD if they do not do)


@dataclass(frozen=True, slots=True)
class Capture:
    """A capture read by ranges: its path, size and layout, its ranges [start, end), and the
    bytes the driver read to learn its layout."""

    path: str
    size: int
    layout: Layout
    ranges: tuple[tuple[int, int], ...]
    head_read: int


def capture(path: str, size: int, split: int) -> Capture | None:
    """The capture at a local path cut into ranges of about `split` bytes (at least
    MIN_RANGE), or None when it cannot be read by ranges (gzip; a pcapng whose interfaces are
    not all declared at its head) or would be one range."""
    with open(path, "rb") as f:
        head = f.read(FIRST_LOOK)
        lay = layout(head)
        if lay is None and len(head) == FIRST_LOOK:
            head += f.read(HEAD - FIRST_LOOK)
            lay = layout(head)
    if lay is None:
        return None
    start = lay.data_start
    n = -(-(size - start) // max(MIN_RANGE, split))
    if n < 2:
        return None
    cuts = [start + (size - start) * k // n for k in range(n + 1)]
    return Capture(path, size, lay, tuple(zip(cuts, cuts[1:], strict=False)), len(head))


# -- 1. the ranges ------------------------------------------------------------------------

# The work of step 1, as data: one row per range.
WORK_COLUMNS: Columns = (("file", "int"), ("part", "int"), ("path", "string"), ("size", "bigint"),
                         ("start", "bigint"), ("end", "bigint"), ("layout", "binary"))


def work(captures: Sequence[Capture]) -> list[tuple[Any, ...]]:
    """The rows of step 1's work (WORK_COLUMNS)."""
    return [(file, part, c.path, c.size, start, end, pickle.dumps(c.layout))
            for file, c in enumerate(captures) for part, (start, end) in enumerate(c.ranges)]


def read_ranges(counters: Counters | None) -> Any:
    """Step 1's task: work rows in; each range's packet rows and one span row out."""
    def task(batches: Iterator[Any]) -> Iterator[Any]:
        for b in batches:
            for row in b.to_pylist():
                yield from _range_batches(row["file"], row["part"], row["path"], row["size"], row["start"],
                                          row["end"], pickle.loads(row["layout"]))
                if counters is not None:  # the ranges and the head before the first add up to the size
                    counters.decoded.add(row["end"] - (row["start"] if row["part"] else 0))
    return task


def _range_batches(file: int, part: int, path: str, size: int, start: int, end: int, lay: Layout) -> Iterator[Any]:
    import pyarrow as pa

    schema = arrow_schema(PACKET_COLUMNS)
    cols: dict[str, list[Any]] = {name: [] for name, _ in PACKET_COLUMNS}
    held = 0
    with open(path, "rb") as f:
        reader = RangeReader(f, lay, start, end, size)
        for frame in reader:
            seg = decode(frame)
            if seg is None:
                continue
            a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
            _packet(cols, file, part, conversation_key(*((a, b) if a <= b else (b, a))), frame)
            held += len(frame.data)
            if len(cols["file"]) >= BATCH_PACKETS or held >= BATCH_BYTES:
                yield pa.RecordBatch.from_pydict(cols, schema=schema)
                cols, held = {name: [] for name, _ in PACKET_COLUMNS}, 0
    _span(cols, file, part, reader.span)
    yield pa.RecordBatch.from_pydict(cols, schema=schema)


_PACKET_NAMES = tuple(name for name, _ in PACKET_COLUMNS)


def _packet(cols: dict[str, list[Any]], file: int, part: int, key: bytes, frame: RawFrame) -> None:
    for name, value in zip(_PACKET_NAMES, (file, part, key, frame.number, frame.ts, frame.linktype,
                                            frame.data, frame.wirelen, None, None, None, None, None), strict=True):
        cols[name].append(value)


def _span(cols: dict[str, list[Any]], file: int, part: int, span: Span) -> None:
    for name, value in zip(_PACKET_NAMES, (file, part, None, None, None, None, None, None, span.first,
                                            span.next, span.frames, span.bytes_read, span.late), strict=True):
        cols[name].append(value)


# -- 2. the driver's check --------------------------------------------------------------

@dataclass(slots=True)
class Checked:
    """Frames before each range of each capture that read well by ranges (file -> part ->
    offset), the captures to read whole instead, the frames in each capture, and the bytes
    the ranges read."""

    offsets: dict[int, dict[int, int]]
    whole: list[int]
    frames: dict[int, int]
    bytes_read: int


def check(captures: Sequence[Capture], spans: list[Any]) -> Checked:
    """From the span rows (file, part, first, next, frames, bytes, late)."""
    by_file: dict[int, dict[int, Span]] = {}
    read = sum(c.head_read for c in captures)
    for file, part, first, nxt, frames, nbytes, late in spans:
        by_file.setdefault(file, {})[part] = Span(first, nxt, frames, nbytes, bool(late))
        read += nbytes
    out = Checked({}, [], {}, read)
    for file, c in enumerate(captures):
        got = by_file.get(file, {})
        if len(got) != len(c.ranges):
            out.whole.append(file)
            continue
        offsets = stitch(c.layout, [(a, b, got[k]) for k, (a, b) in enumerate(c.ranges)])
        if offsets is None:
            out.whole.append(file)
            continue
        out.offsets[file] = {k: off for k, off in enumerate(offsets) if off is not None}
        out.frames[file] = sum(got[k].frames for k in out.offsets[file])
    return out


# -- 3. the groups ----------------------------------------------------------------------

def _groups(batches: Iterator[Any]) -> Iterator[tuple[int, Iterator[RawFrame]]]:
    """(file, its frames in order) for each conversation group of a partition sorted by
    (file, key, frame)."""
    for (file, _), rows in itertools.groupby(_rows(batches), key=operator.itemgetter(0, 1)):
        yield file, (RawFrame(r[2], r[3], r[4], r[5], r[6]) for r in rows)


def _rows(batches: Iterator[Any]) -> Iterator[tuple[Any, ...]]:
    for b in batches:
        yield from zip(*(b.column(name).to_pylist() for name in GROUP_COLUMNS), strict=True)


def learn_groups(cfg: Config, frames_of: dict[int, int]) -> Any:
    """The first pass: per group, the first frame of each conversation, and its lessons."""
    def task(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from kdissect.pipeline import Pipeline

        registry, opts = cfg.build()
        out: dict[str, list[Any]] = {"file": [], "start": [], "lessons": []}
        for file, frames in _groups(batches):
            starts: list[int] = []
            pipe = Pipeline(registry, opts, flow_filter=_nothing, numbering=_recorder(starts))
            for frame in frames:
                pipe.feed(frame)
            pipe.shared.frame = frames_of[file]
            pipe.finish()
            out["file"] += [file] * (len(starts) + 1)
            out["start"] += [*starts, None]
            out["lessons"] += [None] * len(starts) + [pickle.dumps(pipe.shared.lessons())]
        yield pa.RecordBatch.from_pydict(out, schema=arrow_schema(LEARNED_COLUMNS))
    return task


def _nothing(a: Any, b: Any) -> bool:
    return False


def _recorder(starts: list[int]) -> Callable[[int], int]:
    def number(frame: int) -> int:
        starts.append(frame)
        return len(starts) - 1
    return number


@dataclass(slots=True)
class Taught:
    """Per capture: the sorted first frames of its conversations, what they learned, and its
    frame count."""

    starts: dict[int, list[int]]
    lessons: dict[int, dict[type, Lessons]]
    frames: dict[int, int]


def taught(rows: list[Any], frames: dict[int, int]) -> Taught:
    """From the first pass's rows (file, start, lessons): each lesson's earliest frame wins."""
    out = Taught({}, {}, frames)
    for file, start, blob in rows:
        if start is not None:
            out.starts.setdefault(file, []).append(start)
        if blob is not None:
            merged = out.lessons.setdefault(file, {})
            for cls, lessons in pickle.loads(blob).items():
                into = merged.setdefault(cls, {})
                for key, (at, value) in lessons.items():
                    if key not in into or at < into[key][0]:
                        into[key] = (at, value)
    for starts in out.starts.values():
        starts.sort()
    return out


def decode_groups(cfg: Config, paths: Sequence[str], t: Any, counters: Counters | None) -> Any:
    """The second pass: each group dissected once, with the capture's stream numbers and what
    its other conversations taught (t: a broadcast Taught)."""
    def task(batches: Iterator[Any]) -> Iterator[Any]:
        rows = (combined_row(m, cfg.max_bytes) for m in _messages(batches, cfg, paths, t.value))
        out = worker.batches(rows, combined_columns())
        yield from out if counters is None else counters.counted(out, ())
    return task




def _messages(batches: Iterator[Any], cfg: Config, paths: Sequence[str], t: Taught) -> Iterator[Message]:
    from kdissect.pipeline import Pipeline

    registry, opts = cfg.build()
    keep = compiled_filter(cfg.display_filter)
    for file, frames in _groups(batches):
        starts = t.starts.get(file, [])
        shared = CaptureState()
        shared.seed(t.lessons.get(file, {}))
        pipe = Pipeline(registry, opts, capture=paths[file], shared=shared, numbering=_ranks(starts))
        for frame in frames:
            for m in pipe.feed(frame):
                if keep is None or keep(m):
                    yield m
        shared.frame = t.frames.get(file, shared.frame)
        for m in pipe.finish():
            if keep is None or keep(m):
                yield m


def _ranks(starts: list[int]) -> Callable[[int], int]:
    """A conversation's stream number: the rank of its first frame among the capture's."""
    def number(frame: int) -> int:
        return bisect.bisect_left(starts, frame)
    return number


# -- the job's part ---------------------------------------------------------------------

@dataclass(slots=True)
class Ranged:
    """The combined rows of the captures read by ranges (lazy), the captures to read whole
    instead, the bytes the ranges read (heads included), and the cached data to release
    once the rows are written."""

    frame: Any
    whole: list[Capture]
    bytes_read: int
    held: list[Any]


def decode_ranges(spark: Any, captures: Sequence[Capture], cfg: Config, counters: Counters | None = None) -> Ranged:
    """Steps 1 and 2 run here (two small results reach the driver); step 3's second pass is
    the returned DataFrame."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    sc = spark.sparkContext
    rows = work(captures)
    plan = spark.createDataFrame(sc.parallelize(rows, len(rows)), ddl(WORK_COLUMNS))
    packets = plan.mapInArrow(read_ranges(counters), ddl(PACKET_COLUMNS)).persist(StorageLevel.DISK_ONLY)
    spans = packets.where(F.col("key").isNull()).select(*SPAN_COLUMNS).collect()
    checked = check(captures, [tuple(r) for r in spans])
    offsets = spark.createDataFrame(
        [(f, k, off) for f, parts in checked.offsets.items() for k, off in parts.items()],
        "file INT, part INT, offset BIGINT")
    grouped = (packets.where(F.col("key").isNotNull())
               .join(F.broadcast(offsets), ["file", "part"])
               .select("file", "key", (F.col("number") + F.col("offset")).alias("frame"),
                       "ts", "linktype", "data", "wirelen")
               .repartition(max(len(rows), sc.defaultParallelism), *GROUP_KEYS)
               .sortWithinPartitions(*GROUP_KEYS, "frame")
               .persist(StorageLevel.DISK_ONLY))
    learned = grouped.mapInArrow(learn_groups(cfg, checked.frames), ddl(LEARNED_COLUMNS)).collect()
    packets.unpersist()
    t = sc.broadcast(taught([tuple(r) for r in learned], checked.frames))
    frame = grouped.mapInArrow(decode_groups(cfg, [c.path for c in captures], t, counters), ddl(combined_columns()))
    return Ranged(frame, [captures[i] for i in checked.whole], checked.bytes_read, [grouped])
