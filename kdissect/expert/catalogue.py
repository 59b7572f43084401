"""The kinds of finding, like the diagnostic catalogue: each declared once, as data, by the
analyzer that reports it (its `KINDS`), with a severity, a category, a title and a hint; a
`Finding` is made only from its kind (`Kind.finding`), so every finding of a key reads alike.

docs/expert.md is generated from the catalogue (`kdissect fields --findings`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kdissect.model import Message, Severity

# The categories of the findings, in the order they are listed.
CATEGORIES = ("consumer", "producer", "broker", "network", "zookeeper", "pulsar", "rocketmq")
MAX_EVIDENCE = 20  # frames (and streams) a finding names; `count` says how many there were
MAX_NAMES = 5  # names an Evidence keeps by default
_ORDER = {s: i for i, s in enumerate(Severity)}


@dataclass(frozen=True, slots=True)
class Kind:
    key: str  # stable, dotted: "kafka.consumer.rebalance"
    severity: Severity
    category: str  # one of CATEGORIES
    title: str  # what the finding is, in a few words
    hint: str  # what to look at or change

    def finding(self, summary: str, protocol: str, ts: float | None = None, *, evidence: Evidence | None = None,
                last_ts: float | None = None, frames: Iterable[int] | None = None,
                streams: Iterable[int] | None = None, values: dict[str, Any] | None = None,
                count: int | None = None, severity: Severity | None = None) -> Finding:
        """A finding of this kind: `summary` is its one line, `values` the numbers behind it
        (JSON-ready), `frames` and `streams` the evidence (the first MAX_EVIDENCE are named).
        `evidence` gives the times, frames, streams and count the other arguments leave out."""
        if evidence is not None:
            ts = evidence.first_ts if ts is None else ts
            last_ts = evidence.last_ts if last_ts is None else last_ts
            frames = evidence.frames if frames is None else frames
            streams = evidence.streams if streams is None else streams
            count = evidence.count if count is None else count
        first = 0.0 if ts is None else ts
        return Finding(self, summary, protocol, first, first if last_ts is None else last_ts,
                       _evidence(frames or ()), _evidence(streams or ()), values or {},
                       1 if count is None else count, severity or self.severity)


@dataclass(slots=True)
class Evidence:
    """The occurrences behind one finding: how many, the times of the first and the last noted,
    the first MAX_EVIDENCE distinct frames and streams (what a finding names of them) and the
    first `max_names` distinct names (ids, error texts...)."""

    count: int = 0
    first_ts: float | None = None
    last_ts: float | None = None
    frames: list[int] = field(default_factory=list)
    streams: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    max_names: int = MAX_NAMES

    def add(self, m: Message, name: str | None = None) -> None:
        """One occurrence: the message `m` (its time, frame and stream), and a name for it."""
        self.note(m.ts, m.frame, m.stream, name)

    def note(self, ts: float, frame: int | None = None, stream: int | None = None, name: str | None = None) -> None:
        """One occurrence at `ts`, with its frame and stream when it has them."""
        self.count += 1
        if self.first_ts is None:
            self.first_ts = ts
        self.last_ts = ts
        self.cite(frame, stream)
        if name is not None and name not in self.names and len(self.names) < self.max_names:
            self.names.append(name)

    def cite(self, frame: int | None = None, stream: int | None = None) -> None:
        """A frame or stream that shows the occurrences, beside those `note` took."""
        _cite(self.frames, frame)
        _cite(self.streams, stream)


def _cite(numbers: list[int], n: int | None) -> None:
    if n is not None and n not in numbers and len(numbers) < MAX_EVIDENCE:
        numbers.append(n)


def _evidence(numbers: Iterable[int]) -> list[int]:
    out: list[int] = []
    for n in numbers:
        if n not in out:
            out.append(n)
            if len(out) == MAX_EVIDENCE:
                break
    return sorted(out)


@dataclass(slots=True)
class Finding:
    kind: Kind
    summary: str
    protocol: str
    first_ts: float
    last_ts: float
    frames: list[int]
    streams: list[int]
    values: dict[str, Any] = field(default_factory=dict)
    count: int = 1
    severity: Severity = Severity.NOTE  # the kind's, unless the analyzer raised or lowered it

    def sort_key(self) -> tuple[int, int, float, str]:
        """Worst first, then by category, then in capture order."""
        return (-_ORDER[self.severity], CATEGORIES.index(self.kind.category), self.first_ts, self.summary)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.kind.key, "severity": self.severity.value, "category": self.kind.category,
            "protocol": self.protocol, "title": self.kind.title, "summary": self.summary,
            "first_ts": self.first_ts, "last_ts": self.last_ts, "count": self.count,
            "frames": self.frames, "streams": self.streams, "values": self.values, "hint": self.kind.hint,
        }


def check(kinds: Iterable[Kind]) -> dict[str, Kind]:
    """The kinds by key; a key declared twice or an unknown category is a bug."""
    out: dict[str, Kind] = {}
    for k in kinds:
        if k.key in out:
            raise ValueError(f"finding kind {k.key} declared twice")
        if k.category not in CATEGORIES:
            raise ValueError(f"finding kind {k.key}: unknown category {k.category}")
        out[k.key] = k
    return out
