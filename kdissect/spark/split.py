"""Big captures split by byte range, so that each byte is read once whatever the task count.

1. Each task reads one byte range of a capture (capture/ranges.py: the records that start in
   it), decodes link, IP and TCP headers, and emits its packets keyed by conversation (the
   canonical endpoints), with their frame numbers within the range, plus one span row: where
   its first record started, where the next range's must start, how many frames it held.
   A capture on another file system is read instead in the blocks of Spark's text source
   (`block_lines`): a block's task reads the records it holds whole, and its span row carries
   the bytes before and after them. A capture that cannot be cut (gzip, or a pcapng that
   declares an interface after its head) is one part, read from start to end by one task
   (`streamed`): opened where it is when local, else, when gzip, through the text source,
   which inflates it by its name (`.gz`) in one split.
2. The driver checks that the ranges of each capture agree (`stitch`), or puts the records cut
   between blocks together (`join`: they join the shuffle), and turns range frame numbers into
   the capture's. A capture whose parts disagree (a record boundary found in the wrong place, a
   pcapng interface declared late, blocks short of the file's size, a gzip stream whose length
   is not the one its trailer gives) is decoded whole by one task instead.
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
import functools
import io
import itertools
import operator
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kdissect.capture.l2l4 import decode
from kdissect.capture.pcapfile import GZIP_MAGIC, CaptureFile, RawFrame
from kdissect.capture.ranges import HEAD, Block, Layout, RangeReader, Span, join, layout, read_block, stitch
from kdissect.dissect.base import CaptureState, Lessons
from kdissect.model import Message
from kdissect.spark import worker
from kdissect.spark.progress import Counters
from kdissect.spark.rows import combined_values
from kdissect.spark.schema import combined_columns
from kdissect.spark.sqltypes import Columns, arrow_schema, spark_schema
from kdissect.spark.tablefiles import Writing
from kdissect.spark.units import conversation_key
from kdissect.spark.worker import Config, compiled_filter

# A range's packets (key: the conversation's endpoints), and its one span row (key null).
# part: a range's number, or a block's start (the offset of the file split it was read from).
PACKET_COLUMNS: Columns = (
    ("file", "int"), ("part", "bigint"), ("key", "binary"), ("number", "bigint"), ("ts", "double"),
    ("linktype", "int"), ("data", "binary"), ("wirelen", "bigint"), ("span_first", "bigint"),
    ("span_next", "bigint"), ("span_frames", "bigint"), ("span_bytes", "bigint"), ("span_late", "boolean"),
    ("span_head", "binary"), ("span_tail", "binary"),
)
SPAN_COLUMNS = ("file", "part", "span_first", "span_next", "span_frames", "span_bytes", "span_late",
                "span_head", "span_tail")
# The first pass's rows: a conversation's first frame, or a group's lessons (pickled).
LEARNED_COLUMNS: Columns = (("file", "int"), ("start", "bigint"), ("lessons", "binary"))
GROUP_KEYS = ("file", "key")
# Frames before each part of a capture (the driver's; joined to the packet rows).
OFFSET_COLUMNS: Columns = (("file", "int"), ("part", "bigint"), ("offset", "bigint"))
GROUPED_COLUMNS: Columns = (("file", "int"), ("key", "binary"), ("frame", "bigint"), ("ts", "double"),
                            ("linktype", "int"), ("data", "binary"), ("wirelen", "bigint"))
GROUP_COLUMNS = tuple(name for name, _ in GROUPED_COLUMNS)
BATCH_PACKETS = 4096  # packets in one Arrow batch of step 1, at most
BATCH_BYTES = 16 * 1024 * 1024  # and packet bytes


MIN_RANGE = 4096  # bytes: a range smaller than this costs more to plan than to read
FIRST_LOOK = 4096  # bytes the driver reads of a capture's head first (all of HEAD if they do not do)


@dataclass(frozen=True, slots=True)
class Capture:
    """A capture read by parts: its path, size and layout, its ranges [start, end), and the
    bytes the driver read to learn its layout. `blocks`: read through Spark's file source, in
    the blocks it cuts (about the ranges), rather than by tasks that open the path. A capture
    without a layout is streamed: one part, the whole file, read by one task; `isize`: the
    length its gzip trailer gives (modulo 2**32), which checks the file source's reading."""

    path: str
    size: int
    layout: Layout | None
    ranges: tuple[tuple[int, int], ...]
    head_read: int
    blocks: bool = False
    isize: int | None = None

    @property
    def streamed(self) -> bool:
        return self.layout is None

    def through_spark(self) -> Capture:
        """The capture read through Spark's file source, when its parts can be (a local capture
        streamed from a file that Spark does not inflate cannot: it stays as it is)."""
        if self.blocks or (self.streamed and (self.isize is None or not self.path.endswith(".gz"))):
            return self
        return replace(self, blocks=True)


Head = Callable[[int, int], bytes]  # (offset, n) -> n bytes of a file from offset (fewer at its end)


def local_head(path: str) -> Head:
    def head(offset: int, n: int) -> bytes:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(n)
    return head


def capture(path: str, size: int, split: int, head: Head | None = None, blocks: bool = False) -> Capture | None:
    """The capture at `path` cut into ranges of about `split` bytes (at least MIN_RANGE); a
    capture of more than one range that ranges cannot cut (gzip; a pcapng whose interfaces are
    not all declared at its head) streamed, when the task can read it from start to end (a
    local file; through the file source, a gzip one named .gz); else None. head: how to read
    its head (a local file's by default)."""
    read = head if head is not None else local_head(path)
    head_bytes = read(0, FIRST_LOOK)
    lay = layout(head_bytes)
    if lay is None and len(head_bytes) == FIRST_LOOK and not head_bytes.startswith(GZIP_MAGIC):
        head_bytes += read(FIRST_LOOK, HEAD - FIRST_LOOK)
        lay = layout(head_bytes)
    start = lay.data_start if lay is not None else 0
    n = -(-(size - start) // max(MIN_RANGE, split))
    if n < 2:
        return None
    if lay is None:
        return _streamed(path, size, read, head_bytes, blocks)
    cuts = [start + (size - start) * k // n for k in range(n + 1)]
    return Capture(path, size, lay, tuple(zip(cuts, cuts[1:], strict=False)), len(head_bytes), blocks)


def _streamed(path: str, size: int, read: Head, head_bytes: bytes, blocks: bool) -> Capture | None:
    gz = head_bytes.startswith(GZIP_MAGIC)
    if blocks and not (gz and path.endswith(".gz")):
        return None
    trailer = read(size - 4, 4) if gz else b""
    return Capture(path, size, None, ((0, size),), len(head_bytes) + len(trailer), blocks,
                   int.from_bytes(trailer, "little") if gz else None)


# -- 1. the ranges ------------------------------------------------------------------------

# The work of step 1, as data: one row per range.
WORK_COLUMNS: Columns = (("file", "int"), ("part", "int"), ("path", "string"), ("size", "bigint"),
                         ("start", "bigint"), ("end", "bigint"), ("layout", "binary"))


def work(captures: Sequence[Capture]) -> list[tuple[Any, ...]]:
    """The rows of step 1's work (WORK_COLUMNS) for the captures read by ranges."""
    return [(file, part, c.path, c.size, start, end, pickle.dumps(c.layout))
            for file, c in enumerate(captures) if not c.blocks for part, (start, end) in enumerate(c.ranges)]


def read_ranges(counters: Counters | None) -> Any:
    """Step 1's task: work rows in; each range's packet rows and one span row out (a streamed
    capture: the whole file's)."""
    def task(batches: Iterator[Any]) -> Iterator[Any]:
        for b in batches:
            for row in b.to_pylist():
                lay = pickle.loads(row["layout"])
                if lay is None:
                    with CaptureFile(row["path"]) as cap:
                        yield from _streamed_batches(row["file"], row["part"], cap, None)
                else:
                    with open(row["path"], "rb") as f:
                        reader = RangeReader(f, lay, row["start"], row["end"], row["size"])
                        yield from _packet_batches(row["file"], row["part"], reader,
                                                   functools.partial(_range_span, reader))
                if counters is not None:  # the ranges and the head before the first add up to the size
                    counters.decoded.add(row["end"] - (row["start"] if row["part"] else 0))
    return task


def _streamed_batches(file: int, part: int, cap: CaptureFile, joined: Joined | None) -> Iterator[Any]:
    """The rows of a streamed capture: its packets, then its span row, which says the whole
    file was read (late: it was not, or not as it is: read it whole instead)."""
    def span() -> tuple[Any, ...]:
        complete = joined.complete() if joined is not None else True
        read = joined.size if joined is not None else cap.position()
        return _span_values(Span(0, read, counted.frames, read, not complete), None, None)

    counted = _Counted(cap)
    return _packet_batches(file, part, counted, span)


class _Counted:
    """Frames, counted as they pass."""

    def __init__(self, frames: Iterable[RawFrame]) -> None:
        self._frames = frames
        self.frames = 0

    def __iter__(self) -> Iterator[RawFrame]:
        for frame in self._frames:
            self.frames += 1
            yield frame


# A capture read in blocks: Spark's text source with a newline as line end, each line's exact
# bytes (cast to binary) with the start of the file split it was read from. A split holds the
# lines that start in it, so its lines, each with its newline back, are one piece of the file
# (plus a newline the file may not end with), and the pieces of the splits, in order, are the
# whole file: each byte is read once, through whatever file system Spark reads. A file the
# source cannot read to its end (a gzip stream cut short or damaged) gives the lines read
# before the error, which then do not add up to the file: it is read whole instead, by the
# capture reader, which decodes up to the damage.
LINE_SEPARATOR = "\n"
MAX_LINE = 64 * 1024 * 1024  # longer lines (bytes without a newline) are skipped: the file is then read whole
KEEP = 16 * 1024 * 1024  # the most bytes a block keeps before its first record (for the driver)


def block_lines(spark: Any, file: int, path: str) -> Any:
    """The DataFrame of a capture's lines: (file, start, line)."""
    from pyspark.sql import functions as F

    return (spark.read.option("lineSep", LINE_SEPARATOR)
            .option("mapreduce.input.linerecordreader.line.maxlength", str(MAX_LINE))
            .option("ignoreCorruptFiles", "true").text(path)
            .select(F.lit(file).alias("file"), F.col("_metadata.file_block_start").alias("start"),
                    F.col("value").cast("binary").alias("line")))


def read_blocks(captures: dict[int, Capture], counters: Counters | None) -> Any:
    """Step 1's task for captures read in blocks: lines in (block_lines); each block's packet rows
    and one span row out (a streamed capture: its one block, the whole file, inflated)."""
    def task(batches: Iterator[Any]) -> Iterator[Any]:
        for (file, start), rows in itertools.groupby(_lines(batches), key=operator.itemgetter(0, 1)):
            c = captures[file]
            if c.layout is None:
                joined = Joined((line for _, _, line in rows), c.isize, c.size)
                cap = CaptureFile(c.path, stream=io.BufferedReader(joined, io.DEFAULT_BUFFER_SIZE))
                yield from _streamed_batches(file, start, cap, joined)
                if counters is not None:
                    counters.decoded.add(c.size)
                continue
            data = b"\n".join([*(line for _, _, line in rows), b""])  # each line with its newline back
            frames, block = read_block(data, c.layout, start == 0, KEEP)
            del data
            yield from _packet_batches(file, start, frames,
                                       functools.partial(_span_values, block.span, block.head, block.tail))
            if counters is not None:
                counters.decoded.add(block.span.bytes_read)
    return task


class Joined(io.RawIOBase):
    """A file's bytes from its lines as the text source gives them, each without its newline:
    the newlines put back. Lines cannot say whether the file ends with a newline; the length its
    gzip trailer gives (`isize`, modulo 2**32) does, and says whether the lines were all there
    (the text source skips a line longer than MAX_LINE): `complete()`, once the lines are read
    to their end. `size`: the bytes the file source read for them (the compressed file)."""

    def __init__(self, lines: Iterator[bytes], isize: int | None, size: int) -> None:
        super().__init__()
        self._lines = lines
        self._isize = isize
        self.size = size
        self._total = 0  # the length of the pieces so far
        self._started = False
        self._buf = b""
        self._at = 0
        self._ended = False
        self._whole = False

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        n = 0
        while n < len(view):
            if self._at >= len(self._buf) and not self._next():
                break
            k = min(len(view) - n, len(self._buf) - self._at)
            view[n:n + k] = self._buf[self._at:self._at + k]
            self._at += k
            n += k
        return n

    def _next(self) -> bool:
        """The next piece of the file in _buf; False at its end."""
        self._buf, self._at = b"", 0
        if self._ended:
            return False
        line = next(self._lines, None)
        if line is None:
            self._ended = True
            last = self._isize is not None and (self._total + 1) % 2**32 == self._isize
            self._whole = last or self._isize is None or self._total % 2**32 == self._isize
            if not last:
                return False
            line = b""  # the file's last newline
        self._buf = b"\n" + line if self._started else line
        self._started = True
        self._total += len(self._buf)
        return True

    def complete(self) -> bool:
        """Whether the bytes given are the file's, all of them (the rest of the lines is read
        first: a reader may stop before the end)."""
        while self._next():
            pass
        return self._whole


def _lines(batches: Iterator[Any]) -> Iterator[tuple[int, int, bytes]]:
    for b in batches:
        yield from zip(b.column("file").to_pylist(), b.column("start").to_pylist(), b.column("line").to_pylist(),
                       strict=True)


def _packet_batches(file: int, part: int, frames: Iterable[RawFrame], span: Callable[[], tuple[Any, ...]]) -> Iterator[Any]:
    """The rows of a range or block: its packets keyed by conversation, then its span row
    (span(): its values, once the frames are read)."""
    import pyarrow as pa

    schema = arrow_schema(PACKET_COLUMNS)
    keys: list[bytes] = []
    numbers: list[int] = []
    times: list[float] = []
    links: list[int] = []
    datas: list[bytes] = []
    wirelens: list[int] = []
    held = 0
    for frame in frames:
        key = packet_key(frame)
        if key is None:
            continue
        keys.append(key)
        numbers.append(frame.number)
        times.append(frame.ts)
        links.append(frame.linktype)
        datas.append(frame.data)
        wirelens.append(frame.wirelen)
        held += len(frame.data)
        if len(keys) >= BATCH_PACKETS or held >= BATCH_BYTES:
            yield _packets(pa, schema, file, part, keys, numbers, times, links, datas, wirelens)
            keys, numbers, times, links, datas, wirelens, held = [], [], [], [], [], [], 0
    if keys:
        yield _packets(pa, schema, file, part, keys, numbers, times, links, datas, wirelens)
    yield pa.RecordBatch.from_pylist([dict(zip(("file", "part", *_SPAN_NAMES), (file, part, *span()), strict=True))],
                                     schema=schema)


def _packets(pa: Any, schema: Any, file: int, part: int, *columns: list[Any]) -> Any:
    """A batch of packet rows (PACKET_COLUMNS): the packets' columns; file and part repeated,
    the span's columns null."""
    n = len(columns[0])
    fields = list(schema)
    arrays = [pa.array([file] * n, fields[0].type), pa.array([part] * n, fields[1].type),
              *(pa.array(values, f.type) for values, f in zip(columns, fields[2:8], strict=True)),
              *(pa.nulls(n, f.type) for f in fields[8:])]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def packet_key(frame: RawFrame) -> bytes | None:
    """The conversation a TCP packet belongs to (its endpoints in canonical order); None for
    other packets."""
    seg = decode(frame)
    if seg is None:
        return None
    a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
    return conversation_key(*((a, b) if a <= b else (b, a)))


_SPAN_NAMES = SPAN_COLUMNS[2:]


def _range_span(reader: RangeReader) -> tuple[Any, ...]:
    return _span_values(reader.span, None, None)


def _span_values(span: Span, head: bytes | None, tail: bytes | None) -> tuple[Any, ...]:
    return span.first, span.next, span.frames, span.bytes_read, span.late, head, tail


# -- 2. the driver's check --------------------------------------------------------------

@dataclass(slots=True)
class Checked:
    """Frames before each range or block of each capture that read well by parts (file ->
    part -> offset), the captures to read whole instead, the frames in each capture, the bytes
    the parts read, and the packets of the records no block held whole (GROUP_COLUMNS rows)."""

    offsets: dict[int, dict[int, int]]
    whole: list[int]
    frames: dict[int, int]
    bytes_read: int
    joined: list[tuple[Any, ...]]


def check(captures: Sequence[Capture], spans: list[Any]) -> Checked:
    """From the span rows (SPAN_COLUMNS)."""
    by_file: dict[int, dict[int, Block]] = {}
    read = sum(c.head_read for c in captures)
    for file, part, first, nxt, frames, nbytes, late, head, tail in spans:
        by_file.setdefault(file, {})[part] = Block(Span(first, nxt, frames, nbytes, bool(late)), head, tail)
        read += nbytes
    out = Checked({}, [], {}, read, [])
    for file, c in enumerate(captures):
        got = by_file.get(file, {})
        found = _one_part(got) if c.layout is None else \
            _joined(file, c, c.layout, got, out.joined) if c.blocks else _stitched(c, c.layout, got)
        if found is None:
            out.whole.append(file)
            continue
        offsets, between = found
        out.offsets[file] = {k: off for k, off in offsets.items() if off is not None}
        out.frames[file] = sum(got[k].span.frames for k in out.offsets[file]) + between
    return out


Found = tuple[dict[int, int | None], int]  # the offsets of a capture's parts; the frames between them


def _one_part(got: dict[int, Block]) -> Found | None:
    """A streamed capture: its one part, read whole."""
    if list(got) != [0] or got[0].span.late:
        return None
    return {0: 0}, 0


def _stitched(c: Capture, lay: Layout, got: dict[int, Block]) -> Found | None:
    if len(got) != len(c.ranges):
        return None
    offsets = stitch(lay, [(a, b, got[k].span) for k, (a, b) in enumerate(c.ranges)])
    return None if offsets is None else (dict(enumerate(offsets)), 0)


def _joined(file: int, c: Capture, lay: Layout, got: dict[int, Block], rows: list[tuple[Any, ...]]) -> Found | None:
    """The packets of the records put together between blocks go to rows."""
    starts = sorted(got)
    joined = join(lay, c.size, [got[k] for k in starts])
    if joined is None:
        return None
    for frame in joined.frames:
        key = packet_key(frame)
        if key is not None:
            rows.append((file, key, frame.number, frame.ts, frame.linktype, frame.data, frame.wirelen))
    return dict(zip(starts, joined.offsets, strict=True)), len(joined.frames)


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
        rows = (combined_values(m, cfg.max_bytes) for m in _messages(batches, cfg, paths, t.value))
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


def decode_ranges(spark: Any, captures: Sequence[Capture], cfg: Config, counters: Counters | None = None,
                  writing: Writing | None = None) -> Ranged:
    """Steps 1 and 2 run here (two small results reach the driver); step 3's second pass is
    the returned DataFrame (writing: its tasks write the tables themselves, and it holds what
    they counted)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    sc = spark.sparkContext
    packets = _parts(spark, captures, counters).persist(StorageLevel.DISK_ONLY)
    spans = packets.where(F.col("key").isNull()).select(*SPAN_COLUMNS).collect()
    checked = check(captures, [tuple(r) for r in spans])
    offsets = spark.createDataFrame(
        [(f, k, off) for f, parts in checked.offsets.items() for k, off in parts.items()],
        spark_schema(OFFSET_COLUMNS))
    ranged = (packets.where(F.col("key").isNotNull())
              .join(F.broadcast(offsets), ["file", "part"])
              .select("file", "key", (F.col("number") + F.col("offset")).alias("frame"),
                      "ts", "linktype", "data", "wirelen"))
    if checked.joined:
        ranged = ranged.unionByName(spark.createDataFrame(checked.joined, spark_schema(GROUPED_COLUMNS)))
    grouped = (ranged.repartition(max(sum(len(c.ranges) for c in captures), sc.defaultParallelism), *GROUP_KEYS)
               .sortWithinPartitions(*GROUP_KEYS, "frame")
               .persist(StorageLevel.DISK_ONLY))
    learned = grouped.mapInArrow(learn_groups(cfg, checked.frames), spark_schema(LEARNED_COLUMNS)).collect()
    packets.unpersist()
    t = sc.broadcast(taught([tuple(r) for r in learned], checked.frames))
    groups = decode_groups(cfg, [c.path for c in captures], t, counters)
    frame = grouped.mapInArrow(groups, spark_schema(combined_columns())) if writing is None else \
        grouped.mapInArrow(writing.wrap(groups, "groups"), writing.schema())
    return Ranged(frame, [captures[i] for i in checked.whole], checked.bytes_read, [grouped])


def _parts(spark: Any, captures: Sequence[Capture], counters: Counters | None) -> Any:
    """Step 1: the packet and span rows of every range and block (lazy)."""
    frames = []
    rows = work(captures)
    if rows:
        plan = spark.createDataFrame(spark.sparkContext.parallelize(rows, len(rows)), spark_schema(WORK_COLUMNS))
        frames.append(plan.mapInArrow(read_ranges(counters), spark_schema(PACKET_COLUMNS)))
    blocks = {file: c for file, c in enumerate(captures) if c.blocks}
    if blocks:
        cut = [b - a for c in blocks.values() if not c.streamed for a, b in c.ranges]
        if cut:  # (a streamed capture is one split whatever this says: gzip cannot be entered mid-way)
            spark.conf.set("spark.sql.files.maxPartitionBytes", str(max(cut)))
        lines = functools.reduce(lambda x, y: x.unionByName(y),
                                 (block_lines(spark, file, c.path) for file, c in blocks.items()))
        frames.append(lines.mapInArrow(read_blocks(blocks, counters), spark_schema(PACKET_COLUMNS)))
    return functools.reduce(lambda x, y: x.unionByName(y), frames)
