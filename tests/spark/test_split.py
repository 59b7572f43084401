"""Byte-range splitting without Spark: the job's three steps run in this process on Arrow
batches (stage-1 ranges, the driver's check, the shuffle done by sorting, both passes over
the groups) give exactly the single-process messages: frame and stream numbers, topic names
learned on other connections, every value."""

from __future__ import annotations

import gzip
import os
import pickle
from pathlib import Path
from typing import Any

import pytest
from linesplits import line_splits
from support import CAPTURES, SHARED_CAPTURES, sidecar_decode_as, sidecar_keylog

pa = pytest.importorskip("pyarrow")

from kdissect.dissect.base import CaptureState  # noqa: E402
from kdissect.kafka.topicids import TopicIds  # noqa: E402
from kdissect.pipeline import dissect_file  # noqa: E402
from kdissect.render.jsonout import dumps, message_dict  # noqa: E402
from kdissect.spark import split  # noqa: E402
from kdissect.spark.sqltypes import arrow_schema  # noqa: E402
from kdissect.spark.worker import Config  # noqa: E402


def _partitions(packets: list[dict[str, Any]], n: int) -> list[Any]:
    """The shuffle: packets hashed by conversation into n partitions, each sorted."""
    parts: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    for p in packets:
        parts[sum(p["key"]) % n].append(p)
    schema = arrow_schema(split.GROUPED_COLUMNS)
    out = []
    for part in parts:
        part.sort(key=lambda p: (p["file"], p["key"], p["frame"]))
        out.append([pa.RecordBatch.from_pylist(part[i:i + 7], schema=schema) for i in range(0, len(part), 7)])
    return out


def split_messages(path: str, size: int, cfg: Config, partitions: int = 3,
                   blocks: bool = False) -> tuple[list[str], split.Checked]:
    c = split.capture(path, os.path.getsize(path), size, blocks=blocks)
    assert c is not None, f"{path} cannot be split"
    rows, checked = step2(c, _step1(c, size))
    assert not checked.whole, f"{path}: the parts disagree"
    return parts_messages(c, rows, checked, cfg, partitions)


def step2(c: split.Capture, batches: list[Any]) -> tuple[list[dict[str, Any]], split.Checked]:
    """Step 1's rows, and the driver's check of them."""
    rows = pa.Table.from_batches(batches).to_pylist()
    return rows, split.check([c], [tuple(r[k] for k in split.SPAN_COLUMNS) for r in rows if r["key"] is None])


def parts_messages(c: split.Capture, rows: list[dict[str, Any]], checked: split.Checked, cfg: Config,
                   partitions: int = 3) -> tuple[list[str], split.Checked]:
    """Step 3 for step 1's rows: the shuffle, both passes over the groups."""
    path = c.path
    offsets = checked.offsets[0]
    packets = [{"file": r["file"], "key": r["key"], "frame": r["number"] + offsets[r["part"]], "ts": r["ts"],
                "linktype": r["linktype"], "data": r["data"], "wirelen": r["wirelen"]}
               for r in rows if r["key"] is not None and r["part"] in offsets]
    packets += [dict(zip(split.GROUP_COLUMNS, row, strict=True)) for row in checked.joined]
    parts = _partitions(packets, partitions)
    learned = []
    for part in parts:
        for b in split.learn_groups(cfg, checked.frames)(iter(part)):
            learned += [tuple(r.values()) for r in b.to_pylist()]
    taught = split.taught(learned, checked.frames)
    got = []
    for part in parts:
        for m in split._messages(iter(part), cfg, [path], taught):
            got.append(_canon(m))
    return sorted(got), checked


def _step1(c: split.Capture, size: int) -> list[Any]:
    """Step 1's batches: the ranges read by their own tasks, or the blocks of Spark's text
    source (the file's lines, split at multiples of `size`, in batches of 5 lines)."""
    if not c.blocks:
        work = pa.RecordBatch.from_pylist([dict(zip([n for n, _ in split.WORK_COLUMNS], r, strict=True))
                                           for r in split.work([c])])
        return list(split.read_ranges(None)(iter([work])))
    blob = Path(c.path).read_bytes()
    if c.streamed:  # the text source inflates a .gz file, and cannot cut it
        blob = gzip.decompress(blob)
    cuts = [0, len(blob)] if c.streamed else [*range(0, len(blob), size), len(blob)]
    return read_lines(c, [(0, start, line) for start, got in line_splits(blob, cuts) for line in got])


def read_lines(c: split.Capture, lines: list[tuple[int, int, bytes]]) -> list[Any]:
    """Step 1 of a capture read in blocks, from the text source's lines (file, split start, line)."""
    schema = pa.schema([("file", pa.int32()), ("start", pa.int64()), ("line", pa.binary())])
    batches = [pa.RecordBatch.from_pylist([dict(zip(("file", "start", "line"), r, strict=True)) for r in lines[i:i + 5]],
                                          schema=schema) for i in range(0, len(lines), 5)]
    return list(split.read_blocks({0: c}, None)(iter(batches)))


def _canon(m: Any) -> str:
    """A message as the JSON export gives it, but for `number` (its place in one process's output)."""
    d = message_dict(m, 256)
    d.pop("number", None)
    return dumps(d)


def config(path: str) -> Config:
    """The capture's decoding options from its sidecars (the mock cluster's ports, a key log)."""
    p = Path(path)
    return Config(decode_as=sidecar_decode_as(p, p.parent.name), tls_keylog=sidecar_keylog(p))


def single(path: str, cfg: Config) -> list[str]:
    registry, opts = cfg.build()
    out = []
    for m in dissect_file(path, registry, opts):
        m.capture = path
        out.append(_canon(m))
    return sorted(out)


def _splittable(paths: list[Path]) -> list[str]:
    return [str(p) for p in paths if not p.name.endswith(".gz") and p.stat().st_size > 3 * split.MIN_RANGE]


PROJECT = _splittable(sorted(CAPTURES.rglob("*.pcap*")))


@pytest.mark.parametrize("blocks", [False, True], ids=["ranges", "blocks"])
@pytest.mark.parametrize("path", PROJECT, ids=[Path(p).name for p in PROJECT])
def test_parts_decode_as_the_single_process(path: str, blocks: bool) -> None:
    cfg = config(path)
    got, checked = split_messages(path, split.MIN_RANGE, cfg, blocks=blocks)
    assert got == single(path, cfg)
    assert os.path.getsize(path) <= checked.bytes_read
    if blocks:  # the driver read the head; the blocks, the file once (and one newline)
        assert checked.bytes_read - split.capture(path, os.path.getsize(path), split.MIN_RANGE).head_read \
            in (os.path.getsize(path), os.path.getsize(path) + 1)


@pytest.mark.parametrize("blocks", [False, True], ids=["ranges", "blocks"])
def test_shared_captures_decode_as_the_single_process(blocks: bool) -> None:
    paths = _splittable(sorted(SHARED_CAPTURES.glob("*/*.pcap*")))
    if not paths:
        pytest.skip("../shared/captures is absent: the test needs real material from outside the project")
    for path in paths:
        cfg = config(path)
        got, _ = split_messages(path, split.MIN_RANGE, cfg, blocks=blocks)
        assert got == single(path, cfg), path


STREAMED = [str(CAPTURES / "kafka" / "mock_ck_transactions.pcap"), str(CAPTURES / "pulsar" / "gen__pulsar_codecs_batches.pcap"),
            str(CAPTURES / "tls" / "kafka_tls12_aes128gcm.pcap")]


@pytest.mark.parametrize("blocks", [False, True], ids=["local", "text-source"])
@pytest.mark.parametrize("path", STREAMED, ids=[Path(p).name for p in STREAMED])
def test_a_gzip_capture_is_read_once_and_decoded_by_conversation(path: str, blocks: bool, tmp_path: Path) -> None:
    """A gzip capture cannot be cut: one task reads it from start to end (opened where it is,
    or through the text source, which inflates it), and its conversations are decoded as the
    single process decodes them."""
    gz = tmp_path / (Path(path).name + ".gz")
    gz.write_bytes(gzip.compress(Path(path).read_bytes()))
    size = gz.stat().st_size
    cfg = config(path)
    c = split.capture(str(gz), size, split.MIN_RANGE, blocks=blocks)
    assert c is not None and c.streamed and c.ranges == ((0, size),)
    rows, checked = step2(c, _step1(c, split.MIN_RANGE))
    assert not checked.whole
    got, _ = parts_messages(c, rows, checked, cfg)
    assert got == single(str(gz), cfg) and len(got) > 10
    assert checked.bytes_read == size + c.head_read  # the file once, and what the driver read of it
    assert c.head_read == 4096 + 4 and c.isize == os.path.getsize(path)  # (the head, the gzip trailer)


def test_a_gzip_stream_whose_length_disagrees_with_its_trailer_is_read_whole(tmp_path: Path) -> None:
    """The text source skips a line longer than it takes: the gzip trailer's length shows it."""
    path = str(CAPTURES / "kafka" / "mock_ck_transactions.pcap")
    gz = tmp_path / "t.pcap.gz"
    gz.write_bytes(gzip.compress(Path(path).read_bytes()))
    c = split.capture(str(gz), gz.stat().st_size, split.MIN_RANGE, blocks=True)
    assert c is not None and c.isize == os.path.getsize(path)
    lines = [(0, 0, line) for line in line_splits(Path(path).read_bytes(), [0, os.path.getsize(path)])[0][1]]
    assert not step2(c, read_lines(c, lines))[1].whole
    longest = max(range(len(lines)), key=lambda k: len(lines[k][2]))
    assert step2(c, read_lines(c, lines[:longest] + lines[longest + 1:]))[1].whole == [0]


def test_a_capture_on_another_file_system_is_streamed_only_when_the_text_source_can_inflate_it(tmp_path: Path) -> None:
    path = CAPTURES / "kafka" / "mock_ck_transactions.pcap"
    blob = gzip.compress(path.read_bytes())
    for name, streamed in (("a.pcap.gz", True), ("a.pcap", False)):
        (tmp_path / name).write_bytes(blob)
        c = split.capture(str(tmp_path / name), len(blob), split.MIN_RANGE, blocks=True)
        assert (c is not None) == streamed
        local = split.capture(str(tmp_path / name), len(blob), split.MIN_RANGE)
        assert local is not None and local.streamed and local.through_spark().blocks == streamed
        assert local.isize == path.stat().st_size


def test_topic_ids_are_taught_across_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """librdkafka fetches by topic id on one broker connection with names it learned from a
    Metadata response on another, which another group decodes: the lessons carry them."""
    path = str(CAPTURES / "kafka" / "mock_ck_transactions.pcap")
    cfg = config(path)
    want = single(path, cfg)
    assert split_messages(path, split.MIN_RANGE, cfg)[0] == want
    monkeypatch.setattr(CaptureState, "seed", lambda self, taught: None)
    assert split_messages(path, split.MIN_RANGE, cfg)[0] != want


def test_a_lesson_is_known_only_after_its_frame() -> None:
    ids = TopicIds()
    ids.seed({"a1": (10, "orders")})
    ids.now = 10
    assert ids.name("a1") is None
    ids.now = 11
    assert ids.name("a1") == "orders"
    ids.learn("b2", "payments")
    assert ids.lessons() == {"b2": (11, "payments")}
    assert pickle.loads(pickle.dumps(ids.lessons())) == {"b2": (11, "payments")}


def test_the_earliest_lesson_wins() -> None:
    blob = [pickle.dumps({TopicIds: {"a1": (30, "orders")}}), pickle.dumps({TopicIds: {"a1": (20, "orders")}})]
    t = split.taught([(0, 5, None), (0, None, blob[0]), (0, 2, None), (0, None, blob[1])], {0: 40})
    assert t.starts == {0: [2, 5]} and t.lessons[0][TopicIds] == {"a1": (20, "orders")}
