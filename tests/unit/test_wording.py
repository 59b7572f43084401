"""The shared text helpers."""

from __future__ import annotations

from kdissect.text import plural


def test_plural() -> None:
    assert plural(1, "record") == "1 record"
    assert plural(0, "record") == "0 records"
    assert plural(2, "batch") == "2 batches"
    assert plural(1, "batch") == "1 batch"
    assert plural(3, "TCP segment") == "3 TCP segments"
    assert plural(2, "address") == "2 addresses"
    assert plural(2, "entry", "entries") == "2 entries"
    assert plural(1, "entry", "entries") == "1 entry"
