"""`kdissect tui`'s command line: help, and the one-line errors before any screen is drawn."""

from __future__ import annotations

import pytest
from app_support import TRANSACTIONS
from click.testing import CliRunner

from kdissect import cli
from kdissect.commands.tui import tui


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(tui, list(args))
    return res.exit_code, res.output


def run_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """The program as run from the shell (kdissect.cli.main): exit status and standard error."""
    monkeypatch.setitem(cli.COMMANDS, "tui", "kdissect.commands.tui:tui")
    monkeypatch.setattr("sys.argv", ["kdissect", "tui", *args])
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    return int(exit_.value.code or 0), capsys.readouterr().err


def test_help_names_the_panes_and_the_options() -> None:
    code, out = run("--help")
    assert code == 0
    for text in ("three panes", "-Y, --display-filter", "-i, --interface", "-f, --filter", "--decode-as",
                 "-r, --read-file", "docs/tui.md"):
        assert text in out


@pytest.mark.parametrize(("args", "message"), [
    ((), "no capture given"),
    (("-i", "lo", str(TRANSACTIONS)), "give captures or -i IFACE, not both"),
    (("-f", "tcp port 9092", str(TRANSACTIONS)), "-f (a capture filter) goes with -i"),
    (("-",), "cannot read a capture from standard input"),
    ((str(TRANSACTIONS),), "kdissect tui needs a terminal"),
    (("no-such.pcap",), "cannot open no-such.pcap"),
    ((__file__,), "not a pcap or pcapng capture"),
    (("-Y", "kafka.api_key ==", str(TRANSACTIONS)), "filter:"),
])
def test_bad_use_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                       args: tuple[str, ...], message: str) -> None:
    code, err = run_main(monkeypatch, capsys, *args)
    assert code == 2
    assert message in err
    assert "Traceback" not in err
