"""Test support shared across the suite: where the shared captures are, and sidecar ports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CAPTURES = ROOT / "captures"


def shared_captures(proto: str) -> list[Path]:
    """The shared real captures of a protocol; skips the test when ../shared is absent."""
    d = SHARED / "captures" / proto
    if not d.is_dir():
        pytest.skip("../shared/captures is not present")
    return sorted(p for p in d.iterdir() if ".pcap" in p.name)


def sidecar_decode_as(path: Path, proto: str) -> dict[int, str]:
    """--decode-as ports from a capture's .json sidecar (the mock cluster's random ports)."""
    side = path.with_name(path.name.split(".pcap")[0] + ".json")
    if not side.exists():
        return {}
    return {int(p): proto for p in json.loads(side.read_text()).get("ports") or []}
