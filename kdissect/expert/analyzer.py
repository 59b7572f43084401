"""The Analyzer protocol: what the expert's engine asks of each analyzer."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from kdissect.expert.catalogue import Finding, Kind
from kdissect.expert.series import Clock
from kdissect.model import Message


class Analyzer(Protocol):
    """One concern of the expert: its kinds of finding, bounded state, its findings and charts."""

    KINDS: ClassVar[tuple[Kind, ...]]

    def __init__(self, clock: Clock) -> None: ...

    def add(self, m: Message) -> None:
        """One decoded message, in output order (a response after its request)."""

    def conversation_ended(self, conv: Any) -> None:
        """A TCP conversation's end (stream.flow.Conversation): its transport facts."""

    def finish(self) -> list[Finding]:
        """The findings, once every message was added."""

    def charts(self) -> dict[str, Any]:
        """Its charts' numbers (JSON-ready), under names no other analyzer uses."""
