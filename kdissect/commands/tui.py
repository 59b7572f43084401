"""`kdissect tui`: browse a capture (or live traffic) in a terminal user interface."""

from __future__ import annotations

import os
import sys

import click

from kdissect.capture.pcapfile import CaptureFile
from kdissect.cliutil import CAPTURE_PATH, build, current_filter_text, decode_options, preference_option
from kdissect.errors import UsageError


@click.command()
@click.argument("capture_args", nargs=-1, type=CAPTURE_PATH, metavar="[CAPTURE]...")
@click.option("-r", "--read-file", "read_files", multiple=True, type=CAPTURE_PATH, metavar="FILE",
              help="A capture to read, as tshark's -r (the same as naming it; repeatable: several captures "
                   "are merged in time order, like mergecap).")
@click.option("-i", "--interface", metavar="IFACE",
              help="Capture live on this interface instead (`any`: all of them), as `kdissect sniff -i`.")
@click.option("-f", "--filter", "bpf_filter", metavar="BPF",
              help="With -i: a capture filter (BPF syntax, as tcpdump's), e.g. 'tcp port 9092'.")
@decode_options
@preference_option
def tui(capture_args: tuple[str, ...], read_files: tuple[str, ...], interface: str | None,
        bpf_filter: str | None, decode_as: tuple[str, ...], max_bytes: int, max_decompressed: int,
        show_secrets: bool) -> None:
    """Browse CAPTURE in a terminal user interface, in Wireshark's three panes: the message list
    (as `kdissect read` prints it), the field tree of the selected message and its bytes.
    Display filters (-Y, or `/` in the app), going to the matched request or response (m),
    following a conversation (f), statistics (s), marking messages and writing their packets (w).
    With -i, captures live and follows the newest message. `?` in the app lists every key
    (docs/tui.md)."""
    captures = (*read_files, *capture_args)
    _check_inputs(captures, interface, bpf_filter)
    from kdissect.tui.store import Store

    registry, opts = build(decode_as, max_bytes, max_decompressed, show_secrets)
    if interface is not None:
        store = Store.live(interface, registry, opts, capture_filter=bpf_filter or None)
        name = f"live: {interface}" + (f" ({bpf_filter})" if bpf_filter else "")
    else:
        store = Store(captures, registry, opts)
        name = ", ".join(os.path.basename(c) for c in captures)
    from kdissect.tui.app import run

    run(store, name, current_filter_text(), interface is not None)


def _check_inputs(captures: tuple[str, ...], interface: str | None, bpf_filter: str | None) -> None:
    if interface is not None and captures:
        raise UsageError("give captures or -i IFACE, not both")
    if interface is None and not captures:
        raise click.UsageError("no capture given: name one (CAPTURE or -r FILE), or capture live with -i IFACE")
    if bpf_filter and interface is None:
        raise UsageError("-f (a capture filter) goes with -i; -Y filters the messages of a file")
    if "-" in captures:
        raise UsageError("the user interface reads the terminal: it cannot read a capture from standard input")
    for path in captures:  # a missing file or one that is not a capture: one line, before any screen
        CaptureFile(path).close()
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("kdissect tui needs a terminal (use `kdissect read` for output to a pipe or file)")
