"""Root test configuration: puts tests/ on the import path (support.py, pcapgen.py), makes
hypothesis deterministic in CI, and adds the golden-file switch."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
# A key log named by the environment would decrypt TLS in every command: the tests name theirs.
os.environ.pop("SSLKEYLOGFILE", None)

# CI=true: every property test draws the same examples on every run and machine (and keeps no
# example database); elsewhere they are random, so each local run explores new inputs.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "dev")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="Rewrite the golden files.")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))
