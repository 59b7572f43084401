"""The compiled core against the pure-Python path: byte-identical `read -V` and `export` on
every capture (the project's and, when present, ../shared's), and KDISSECT_PURE=1 obeyed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("accel_outputs.py")


def _outputs(pure: bool) -> dict:
    env = {**os.environ, "KDISSECT_PURE": "1" if pure else "0"}
    r = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def both() -> tuple[dict, dict]:
    return _outputs(pure=True), _outputs(pure=False)


def test_pure_path_loads_no_compiled_module(both: tuple[dict, dict]) -> None:
    assert both[0]["compiled"] == []


def test_compiled_path_is_byte_identical(both: tuple[dict, dict]) -> None:
    pure, compiled = both
    if not compiled["compiled"]:
        pytest.skip("the compiled core is not built (no C compiler at install time): nothing to compare")
    assert len(pure["captures"]) >= 3
    differ = [f"{path} ({cmd})" for path, digests in pure["captures"].items()
              for cmd, digest in digests.items() if compiled["captures"][path][cmd] != digest]
    assert not differ, "the compiled core changes the output of:\n" + "\n".join(differ)
