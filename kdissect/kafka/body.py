"""Kafka message bodies (the schema-driven decoder plugs in here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kdissect.dissect.base import Options
from kdissect.model import Diagnostic, Field
from kdissect.wire.reader import WireReader


@dataclass(slots=True)
class Body:
    """A decoded body: its fields, a summary fragment and facts for msg.info."""

    fields: list[Field] = field(default_factory=list)
    summary: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)


def decode_body(api_key: int, version: int, is_request: bool, r: WireReader, opts: Options) -> Body | None:
    """Decode the body that follows the header; None when no decoder is available."""
    return None
