"""Test support shared across the suite: where the shared captures are, and sidecar ports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
    """--decode-as ports from a capture's .json sidecar (the mock cluster's random ports), as
    the sidecar's protocol (default: proto, the capture's folder)."""
    side = path.with_name(path.name.split(".pcap")[0] + ".json")
    if not side.exists():
        return {}
    meta = json.loads(side.read_text())
    return {int(p): meta.get("protocol") or proto for p in meta.get("ports") or []}


def sidecar_keylog(path: Path) -> str | None:
    """The TLS key log recorded with a capture (NAME.keys beside NAME.pcap), if any."""
    keys = path.with_name(path.name.split(".pcap")[0] + ".keys")
    return str(keys) if keys.exists() else None


def capture_args(path: Path) -> list[str]:
    """The decoding options of a capture from its sidecars: --decode-as and --tls-keylog."""
    out: list[str] = []
    for port, name in sidecar_decode_as(path, path.parent.name).items():
        out += ["--decode-as", f"{port}={name}"]
    keylog = sidecar_keylog(path)
    return out + (["--tls-keylog", keylog] if keylog else [])


def own_captures() -> list[Path]:
    """The project's own captures (captures/), sorted."""
    return sorted(p for p in CAPTURES.rglob("*") if ".pcap" in p.name and p.is_file())


def decode_capture(path: Path) -> list[Any]:
    """Every message of a capture, decoded with its sidecar's ports and TLS key log."""
    from kdissect.dissect.base import Options
    from kdissect.pipeline import dissect_file
    from kdissect.protocols import DissectorRegistry

    registry = DissectorRegistry(decode_as=sidecar_decode_as(path, path.parent.name))
    return list(dissect_file(str(path), registry, Options(tls_keylog=sidecar_keylog(path))))
