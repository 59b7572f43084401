"""Evidence, the accumulator behind findings, and the helpers the analyzers share."""

from __future__ import annotations

from kdissect.expert.catalogue import MAX_EVIDENCE, Evidence, Kind
from kdissect.expert.tree import get_or_make, host_of, integer, put, text
from kdissect.model import Message, Pdu, Severity

KIND = Kind("test.kind", Severity.NOTE, "broker", "A test kind", "Nothing to do.")


def message(frame: int, ts: float, stream: int) -> Message:
    return Message(Pdu(b"", [frame], ts, ts, True), stream, "10.0.0.1:5000", "10.0.0.2:9092", "kafka")


def test_evidence_counts_every_occurrence_and_names_the_first_distinct_frames_streams_and_names() -> None:
    ev = Evidence(max_names=2)
    for i in range(50):
        ev.add(message(100 + i // 2, 10.0 + i, i % 3), f"name-{i % 4}")
    assert ev.count == 50 and ev.first_ts == 10.0 and ev.last_ts == 59.0
    assert ev.frames == list(range(100, 100 + MAX_EVIDENCE))  # two occurrences a frame, named once
    assert ev.streams == [0, 1, 2] and ev.names == ["name-0", "name-1"]


def test_cite_adds_evidence_without_an_occurrence() -> None:
    ev = Evidence()
    ev.cite(7)
    ev.note(5.0, 9)
    ev.cite(stream=3)
    assert (ev.count, ev.frames, ev.streams, ev.first_ts, ev.last_ts) == (1, [7, 9], [3], 5.0, 5.0)


def test_a_finding_takes_its_times_frames_streams_and_count_from_evidence() -> None:
    ev = Evidence()
    ev.add(message(12, 1.5, 4))
    ev.add(message(3, 2.5, 4))
    f = KIND.finding("two", "kafka", evidence=ev, values={"n": 2})
    assert (f.first_ts, f.last_ts, f.frames, f.streams, f.count) == (1.5, 2.5, [3, 12], [4], 2)
    g = KIND.finding("told", "kafka", 1.0, evidence=ev, last_ts=9.0, streams=(), count=7, severity=Severity.ERROR)
    assert (g.first_ts, g.last_ts, g.frames, g.streams, g.count, g.severity) == (1.0, 9.0, [3, 12], [], 7,
                                                                                   Severity.ERROR)
    empty = KIND.finding("none", "kafka", evidence=Evidence())
    assert (empty.first_ts, empty.last_ts, empty.frames, empty.count) == (0.0, 0.0, [], 0)


def test_shared_helpers() -> None:
    assert host_of("10.0.0.1:9092") == "10.0.0.1" and host_of("[::1]:2181") == "[::1]" and host_of("sock") == "sock"
    assert integer(3) == 3 and integer(True) is None and integer("3") is None
    assert text("a") == "a" and text(1) is None
    table: dict[str, int] = {}
    assert get_or_make(table, "a", lambda: 1, 1) == 1 and get_or_make(table, "b", lambda: 2, 1) is None
    put(table, "a", 5, 1)
    put(table, "b", 6, 1)
    assert table == {"a": 5}
