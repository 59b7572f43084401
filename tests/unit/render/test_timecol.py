"""The time column (tshark's -t): each format on a real capture against tshark, the origin at
the capture's first packet whatever -Y shows, and the deltas d and dd."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import CAPTURES, capture_args

from kdissect.cli import cli
from kdissect.render.timecol import TIME_FORMATS, seconds, stamp

CAPTURE = CAPTURES / "kafka" / "mock_ck_transactions.pcap"  # microsecond timestamps; starts with a SYN
PRODUCE = "kafka.api_key == 0"
DATED = ("ad", "ud")


@pytest.fixture
def zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A local time zone that is not UTC, at a half-hour offset."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield "Asia/Kolkata"
    monkeypatch.undo()
    time.tzset()


def read(*args: str, path: Path = CAPTURE, command: str = "read") -> dict[int, str]:
    """frame -> time column of `kdissect read` (or follow)."""
    res = CliRunner().invoke(cli, [command, str(path), *capture_args(path), "--no-color", *args])
    assert res.exit_code == 0, res.output
    fmt = args[args.index("-t") + 1] if "-t" in args else "r"
    out: dict[int, str] = {}
    for line in res.stdout.splitlines():
        parts = line.split()
        if "→" not in parts:
            continue  # follow's heading and closing lines
        out[int(parts[0])] = " ".join(parts[1:3]) if fmt in DATED else parts[1]
    assert out
    return out


def tshark_times(fmt: str, tz: str) -> dict[int, str]:
    res = subprocess.run(["tshark", "-r", str(CAPTURE), "-t", fmt, "-T", "fields", "-e", "frame.number",
                          "-e", "_ws.col.Time"], capture_output=True, text=True, timeout=60, check=True,
                         env={"TZ": tz, "PATH": "/usr/bin:/bin"})
    return {int(n): t for n, t in (line.split("\t") for line in res.stdout.splitlines())}


def micros(text: str) -> int:
    whole, frac = text.split(".")
    return int(whole) * 1_000_000 + int(frac) if not whole.startswith("-") else -micros(text[1:])


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
@pytest.mark.parametrize("fmt", ["r", "a", "ad", "u", "ud", "e"])
def test_each_format_is_tsharks(fmt: str, zone: str) -> None:
    ours = read("-t", fmt)
    theirs = tshark_times(fmt, zone)
    assert {n: theirs[n] for n in ours} == ours


def test_the_origin_is_the_first_packet_and_a_filter_does_not_move_it() -> None:
    every = read()
    produce = read("-t", "r", "-Y", PRODUCE)
    assert set(produce) < set(every)
    assert {n: every[n] for n in produce} == produce
    # the capture starts with the handshake: the first message is not at 0
    assert micros(every[min(every)]) > 0
    epoch = read("-t", "e")
    first_packet = micros(epoch[min(epoch)]) - micros(every[min(every)])
    assert all(micros(epoch[n]) - micros(every[n]) == first_packet for n in every)


def test_delta_from_the_previous_message_decoded_or_shown() -> None:
    epoch = read("-t", "e")
    order = list(epoch)  # in the order printed
    shown = list(read("-t", "e", "-Y", PRODUCE))
    d = read("-t", "d", "-Y", PRODUCE)
    dd = read("-t", "dd", "-Y", PRODUCE)
    assert list(d) == list(dd) == shown
    for i, n in enumerate(shown):
        before = order[order.index(n) - 1] if order.index(n) else n
        assert micros(d[n]) == micros(epoch[n]) - micros(epoch[before])
        assert micros(dd[n]) == (micros(epoch[n]) - micros(epoch[shown[i - 1]]) if i else 0)
    # unfiltered, both are the gap to the message printed before
    assert read("-t", "d") == read("-t", "dd")


def test_follow_takes_the_same_column() -> None:
    stream = read("-t", "r", "-Y", "kdissect.stream == 1")
    assert read("-s", "1", "-t", "r", command="follow") == stream
    assert len(read("-s", "1", "-t", "d", command="follow")) == len(stream)


def test_formats() -> None:
    assert seconds(0.0) == "0.000000"
    assert seconds(12.3456784) == "12.345678"
    assert seconds(-0.0000125) == "-0.000012"
    assert seconds(1633413658.052149) == "1633413658.052149"
    ts = 1633413658.052149
    assert stamp(ts, "ud") == "2021-10-05 06:00:58.052149"
    assert stamp(ts, "u") == "06:00:58.052149"
    assert stamp(ts, "e") == "1633413658.052149"
    assert stamp(1e300, "ad") == seconds(1e300)  # past what the calendar takes: epoch seconds
    assert set(TIME_FORMATS) == {"ad", "a", "r", "d", "dd", "e", "u", "ud"}


def test_an_unknown_format_is_a_usage_error() -> None:
    res = CliRunner().invoke(cli, ["read", str(CAPTURE), "-t", "x"])
    assert res.exit_code == 2 and "-t" in res.output
