"""Test support shared across the suite: where the shared captures are, and sidecar ports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "captures"  # the project's own captures, always present
# Real captures and protocol specifications from outside the project, beside the checkout when
# available. Every test that reads them goes through shared_path(), which skips visibly.
SHARED = ROOT.parent / "shared"
SHARED_CAPTURES = SHARED / "captures"


def shared_path(*parts: str) -> Path:
    """A file or folder under ../shared; skips the test, saying which, when it is absent."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"../shared/{'/'.join(parts)} is absent: the test needs real material from outside the project")
    return p


def shared_captures(proto: str) -> list[Path]:
    """The shared real captures of a protocol; skips the test when ../shared is absent."""
    d = shared_path("captures", proto)
    return sorted(p for p in d.iterdir() if ".pcap" in p.name)


def sidecar_decode_as(path: Path, proto: str) -> dict[int, str]:
    """--decode-as ports from a capture's .json sidecar (the mock cluster's random ports)."""
    side = path.with_name(path.name.split(".pcap")[0] + ".json")
    if not side.exists():
        return {}
    return {int(p): proto for p in json.loads(side.read_text()).get("ports") or []}
