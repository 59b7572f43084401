"""Locating and decoding the shared Kafka captures in tests (skipped when absent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import SHARED_CAPTURES

from kdissect.dissect.base import Options
from kdissect.model import Message
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry

CAPTURES = SHARED_CAPTURES / "kafka"


def capture(name: str) -> Path:
    path = CAPTURES / name
    if not path.exists():
        pytest.skip(f"{name} not available")
    return path


def ports(path: Path) -> dict[int, str]:
    side = path.with_suffix(".json")
    if not side.exists():
        return {}
    return {int(p): "kafka" for p in json.loads(side.read_text()).get("ports") or []}


def messages(name: str, opts: Options | None = None) -> list[Message]:
    path = capture(name)
    registry = DissectorRegistry(decode_as=ports(path))
    return [m for m in dissect_file(str(path), registry, opts) if m.protocol == "kafka"]


def all_captures() -> list[str]:
    if not CAPTURES.exists():
        return []
    return sorted(p.name for p in CAPTURES.iterdir() if ".pcap" in p.name)
