"""Prints, as JSON, a digest of `read --no-color -V` and of `export --format jsonl` for every
capture under captures/ and ../shared/captures, and the compiled modules that were in use.
tests/test_accel.py runs it twice, with and without KDISSECT_PURE=1, and compares."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support import CAPTURES, SHARED_CAPTURES, capture_args  # noqa: E402

from kdissect import accel  # noqa: E402
from kdissect.cli import cli  # noqa: E402

COMMANDS = {"read": ["read", "--no-color", "-V", "--max-bytes", "0"],
            "export": ["export", "--format", "jsonl", "--max-bytes", "0"]}


def captures() -> list[Path]:
    roots = [r for r in (CAPTURES, SHARED_CAPTURES) if r.is_dir()]
    return sorted(p for r in roots for p in r.rglob("*") if ".pcap" in p.name and p.is_file())


def main() -> None:
    runner = CliRunner()
    out: dict[str, object] = {}
    for path in captures():
        ports = capture_args(path)
        digests = {}
        for name, args in COMMANDS.items():
            r = runner.invoke(cli, [args[0], str(path), *args[1:], *ports])
            digests[name] = hashlib.sha256(f"{r.exit_code}\n{r.stdout}".encode()).hexdigest()
        out[str(path)] = digests
    print(json.dumps({"compiled": accel.loaded(), "captures": out}))


if __name__ == "__main__":
    main()
