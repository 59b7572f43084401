"""`kdissect tui` run for real in a terminal (tmux): the list, a display filter, the field tree,
read back from the screen as the user sees it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kdissect import cli

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = "captures/kafka/mock_ck_transactions.pcap"
WAIT_S = 30.0


def _tmux() -> str:
    tmux = shutil.which("tmux") or ("/usr/bin/tmux" if os.path.exists("/usr/bin/tmux") else None)
    if tmux is None:
        pytest.skip("tmux is not installed: the terminal test needs it")
    return tmux


def _command() -> str:
    """`kdissect tui CAPTURE` (through the command itself while the CLI does not list it)."""
    if "tui" in cli.COMMANDS:
        argv = [str(Path(sys.executable).with_name("kdissect")), "tui", CAPTURE]
    else:
        argv = [sys.executable, "-c", "from kdissect.commands.tui import tui; tui()", CAPTURE]
    # COLUMNS and LINES, when set around the tests, would override the terminal's own size.
    return f"cd {shlex.quote(str(ROOT))} && exec env -u COLUMNS -u LINES {shlex.join(argv)}"


class Terminal:
    def __init__(self, tmux: str, name: str) -> None:
        self.tmux = tmux
        self.name = name

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.tmux, *args], capture_output=True, text=True, timeout=WAIT_S)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.name).stdout

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.name, *keys)

    def text(self, text: str) -> None:
        self.run("send-keys", "-t", self.name, "-l", text)

    def wait_for(self, test: Callable[[str], bool], what: str) -> str:
        deadline = time.monotonic() + WAIT_S
        while True:
            screen = self.screen()
            if test(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} did not appear; the screen:\n{screen}")
            time.sleep(0.2)

    def alive(self) -> bool:
        return self.run("has-session", "-t", self.name).returncode == 0


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    term = Terminal(_tmux(), f"kdissect-tui-test-{os.getpid()}")
    started = term.run("new-session", "-d", "-s", term.name, "-x", "120", "-y", "40", _command())
    if started.returncode != 0:
        pytest.skip(f"tmux cannot start a session here: {started.stderr.strip()}")
    try:
        yield term
    finally:
        if term.alive():
            term.run("kill-session", "-t", term.name)


def test_list_filter_and_tree_on_a_real_terminal(terminal: Terminal) -> None:
    screen = terminal.wait_for(lambda s: "86 messages" in s and "done" in s and "q Quit" in s, "the decoded capture")
    assert "No." in screen and "Destination" in screen and "Info" in screen
    assert "ApiVersions v3 request corr=1 client=kd-ge" in screen  # cut to the width left
    first = next(line for line in screen.splitlines() if "0.000160" in line)
    assert "127.0.0.1:36594" in first and "127.0.0.1:43973" in first and "KAFKA" in first
    assert "frames: 4  stream: 0  length: 67" in screen  # the tree of the first message

    terminal.keys("/")
    # the filter bar has the focus once the footer drops the keys that typing takes
    terminal.wait_for(lambda s: "q Quit" not in s, "the focused filter bar")
    terminal.text("kafka.api_key == 1")
    terminal.keys("Enter")
    screen = terminal.wait_for(lambda s: "filter: 8 shown" in s, "the filtered list")
    listed = [line for line in screen.splitlines() if "KAFKA" in line]
    assert len(listed) == 8 and all("Fetch v16" in line for line in listed)

    terminal.keys("Tab")
    screen = terminal.wait_for(lambda s: "api_key: Fetch (1)" in s, "the field tree")
    assert "correlation_id: 6" in screen

    terminal.keys("q")
    deadline = time.monotonic() + WAIT_S
    while terminal.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not terminal.alive(), "q did not quit"
