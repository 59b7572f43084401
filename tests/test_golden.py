"""Golden output of `read --no-color -V`, `export --format jsonl` and `expert` for every capture the
project ships. Regenerate with `pytest tests/test_golden.py --update-golden` and review the diff."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from support import CAPTURES, ROOT, capture_args

from kdissect.cli import cli

GOLDEN = ROOT / "tests" / "golden"


def _captures() -> list[Path]:
    return sorted(p for p in CAPTURES.rglob("*") if ".pcap" in p.name and p.is_file())


def _check(name: str, text: str, update: bool) -> None:
    golden = GOLDEN / name
    if update:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}: run pytest --update-golden"
    assert text == golden.read_text()


@pytest.mark.parametrize("path", _captures(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_read_golden(path: Path, update_golden: bool) -> None:
    r = CliRunner().invoke(cli, ["read", str(path), "--no-color", "-V", *capture_args(path)])
    assert r.exit_code == 0, r.output
    _check(f"{path.parent.name}/{path.name}.read.txt", r.stdout, update_golden)


@pytest.mark.parametrize("path", _captures(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_export_golden(path: Path, update_golden: bool) -> None:
    r = CliRunner().invoke(cli, ["export", str(path), "--format", "jsonl", *capture_args(path)])
    assert r.exit_code == 0, r.output
    text = r.stdout.replace(str(path), path.name)
    _check(f"{path.parent.name}/{path.name}.export.jsonl", text, update_golden)


def test_project_ships_captures() -> None:
    assert len(_captures()) >= 3


@pytest.mark.parametrize("path", _captures(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_expert_golden(path: Path, update_golden: bool) -> None:
    r = CliRunner().invoke(cli, ["expert", str(path), "--no-color", "--severity", "chat", *capture_args(path)])
    assert r.exit_code == 0, r.output
    _check(f"{path.parent.name}/{path.name}.expert.txt", r.stdout.replace(str(path), path.name), update_golden)
