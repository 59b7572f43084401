"""Byte-range splitting without Spark: the job's three steps run in this process on Arrow
batches (stage-1 ranges, the driver's check, the shuffle done by sorting, both passes over
the groups) give exactly the single-process messages: frame and stream numbers, topic names
learned on other connections, every value."""

from __future__ import annotations

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
    caps = [c]
    rows = pa.Table.from_batches(_step1(c, size)).to_pylist()
    checked = split.check(caps, [tuple(r[k] for k in split.SPAN_COLUMNS) for r in rows if r["key"] is None])
    assert not checked.whole, f"{path}: the parts disagree"
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
    lines = [(0, start, line) for start, got in line_splits(blob, [*range(0, len(blob), size), len(blob)])
             for line in got]
    schema = pa.schema([("file", pa.int32()), ("start", pa.int64()), ("line", pa.binary())])
    batches = [pa.RecordBatch.from_pylist([dict(zip(("file", "start", "line"), r, strict=True)) for r in lines[i:i + 5]],
                                          schema=schema) for i in range(0, len(lines), 5)]
    return list(split.read_blocks({0: c.layout}, None)(iter(batches)))


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
