"""Shared test fixtures: where the shared captures are, and the golden-file switch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CAPTURES = ROOT / "captures"
sys.path.insert(0, str(Path(__file__).resolve().parent))


def shared_captures(proto: str) -> list[Path]:
    """The shared real captures of a protocol; skips the test when ../shared is absent."""
    d = SHARED / "captures" / proto
    if not d.is_dir():
        pytest.skip("../shared/captures is not present")
    return sorted(p for p in d.iterdir() if ".pcap" in p.name)


def sidecar_decode_as(path: Path, proto: str) -> dict[int, str]:
    """--decode-as ports from a capture's .json sidecar (the mock cluster's random ports)."""
    import json

    side = path.with_name(path.name.split(".pcap")[0] + ".json")
    if not side.exists():
        return {}
    return {int(p): proto for p in json.loads(side.read_text()).get("ports") or []}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="Rewrite the golden files.")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))
