"""Helpers for the analyst-command tests: shared captures and the CLI run in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support import SHARED

from kdissect.cli import cli

CAPTURES = SHARED / "captures"


def capture(rel: str) -> Path:
    p = CAPTURES / rel
    if not p.exists():
        pytest.skip(f"{p} not available")
    return p


def run(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def export(path: Path, *args: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in run("export", str(path), "-F", "jsonl", *args).splitlines() if x.startswith("{")]
