"""The expert run: every decoded message and every conversation's end goes to each analyzer;
at the end, their findings (worst first) and their charts' numbers (`Result.to_json`, the
`expert -F json` document, docs/expert.md)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kdissect.expert.analyzer import Analyzer
from kdissect.expert.catalogue import Finding
from kdissect.expert.series import Clock
from kdissect.model import Message


@dataclass(slots=True)
class Result:
    findings: list[Finding]
    charts: dict[str, Any]
    messages: int
    first_ts: float | None
    last_ts: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages, "first_ts": self.first_ts, "last_ts": self.last_ts,
            "findings": [f.to_json() for f in self.findings], "charts": self.charts,
        }


class Expert:
    """Feed it messages (`add`) and conversation ends (it is a pipeline ConversationObserver);
    `finish()` gives the Result. `analyzers`: the classes to run (analyzers.ANALYZERS, all of them)."""

    def __init__(self, analyzers: Sequence[type[Analyzer]]) -> None:
        self.clock = Clock()
        self.analyzers = [cls(self.clock) for cls in analyzers]
        self.messages = 0
        self.first_ts: float | None = None
        self.last_ts: float | None = None

    def add_all(self, messages: Iterable[Message]) -> Result:
        for m in messages:
            self.add(m)
        return self.finish()

    def add(self, m: Message) -> None:
        self.messages += 1
        if self.first_ts is None:
            self.first_ts = m.ts
        self.last_ts = m.ts if self.last_ts is None else max(self.last_ts, m.ts)
        self.clock.index(m.ts)
        for a in self.analyzers:
            a.add(m)

    def conversation_ended(self, conv: Any) -> None:
        for a in self.analyzers:
            a.conversation_ended(conv)

    def finish(self) -> Result:
        findings = [f for a in self.analyzers for f in a.finish()]
        findings.sort(key=Finding.sort_key)
        charts: dict[str, Any] = {"time": self.clock.to_json()}
        for a in self.analyzers:
            charts.update(a.charts())
        return Result(findings, charts, self.messages, self.first_ts, self.last_ts)
