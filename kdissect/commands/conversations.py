"""`kdissect conversations` (the TCP streams of a capture) and `kdissect follow --stream N` (one
stream decoded, requests and responses in order: Wireshark's Follow TCP Stream, decoded)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import click

from kdissect.analysis.conversations import conversations as collect
from kdissect.analysis.conversations import describe
from kdissect.cliutil import (
    build,
    capture_inputs,
    current_filter,
    decode_options,
    finish_packets,
    iter_capture,
    make_console,
    packet_selection,
    preference_option,
    text_renderer,
    write_options,
)
from kdissect.commands.timeopt import observed, time_column, time_option
from kdissect.errors import UsageError
from kdissect.model import Message
from kdissect.pipeline import Counters, Decoding
from kdissect.pipeline.detect import first_bytes
from kdissect.render.fitted import ADDRESS, Col, fitted_table, plain_lines
from kdissect.stream.flow import Conversation
from kdissect.text import size_text


@click.command("conversations")
@capture_inputs
@click.option("-F", "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="A table for people, or JSON for scripts.")
@click.option("-a", "--all", "show_all", is_flag=True,
              help="Also list conversations that carried no payload (a lone FIN or ACK).")
@click.option("--no-color", is_flag=True, help="Plain text even on a terminal.")
@decode_options
@preference_option
def conversations(captures: tuple[str, ...], fmt: str, show_all: bool, no_color: bool, decode_as: tuple[str, ...], max_bytes: int,
                  max_decompressed: int, show_secrets: bool) -> None:
    """List the TCP conversations of CAPTURE: protocol, endpoints, packets, bytes and messages.
    With -Y, only conversations with matching messages, and only those are counted."""
    registry, opts = build(decode_as, max_bytes, max_decompressed, show_secrets)
    keep = current_filter()
    table = collect(captures, registry, opts, keep)
    table.finish()
    for w in table.warnings:
        click.echo(f"kdissect: warning: {w}", err=True)
    for n in table.notes:
        click.echo(f"kdissect: {n}", err=True)

    def rows() -> Iterator[dict[str, Any]]:  # made as they are read, not kept
        return table.iter_rows(filtered=keep is not None, empty=show_all)

    if fmt == "json":
        for text in json_rows(rows()):
            click.echo(text, nl=False)
        click.echo()
        return
    _print_table(rows, no_color)


def json_rows(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """The text of json.dumps(list(rows), indent=1), a row at a time: with an indent, json builds
    the whole document from small pieces (1.8 GB for 400,000 rows of 144 MB)."""
    i = -1
    for i, row in enumerate(rows):
        yield ("[\n " if i == 0 else ",\n ") + json.dumps(row, indent=1).replace("\n", "\n ")
    yield "[]" if i < 0 else "\n]"


def _tls_text(tls: dict[str, Any] | None) -> str:
    """A TLS conversation's version, cipher suite and SNI, and why it was not decrypted."""
    if tls is None:
        return ""
    text = " ".join(str(tls[k]) for k in ("version", "cipher") if tls[k]) or "TLS"
    if tls["sni"]:
        text += f" SNI {tls['sni']}"
    problems = [d["key"] for d in tls["diagnostics"] if d["key"] != "tls.alert"]
    if not tls["decrypted"]:
        text += " (not decrypted" + (f": {problems[0]})" if problems else ")")
    elif problems:
        text += f" ({problems[0]})"
    return text


# The table's columns: (header, priority, text). On a narrow console the lowest priority goes
# first (render/fitted.py); None is always shown.
COLUMNS = [Col("stream", None), Col("protocol", 7, True), Col("client", 10, True, ADDRESS),
           Col("server", 10, True, ADDRESS), Col("packets", 2), Col("→ server", 3), Col("→ client", 3),
           Col("messages", 6), Col("req", 1), Col("resp", 1), Col("errors", 9), Col("expected", 5),
           Col("duration s", 0)]
TLS_COLUMN = Col("tls", 2, True)


def _print_table(rows: Callable[[], Iterator[dict[str, Any]]], no_color: bool) -> None:
    with_tls = any(r["tls"] for r in rows())

    def cells() -> Iterator[list[str]]:  # made as they are read, twice, rather than kept (2.7 KB a row)
        for r in rows():
            dur = r["duration_s"]
            yield [str(r["stream"]), r["protocol"] or "(not decoded)", r["client"], r["server"],
                   str(r["packets"]), size_text(r["bytes_to_server"]), size_text(r["bytes_to_client"]),
                   str(r["matched_messages"]), str(r["requests"]), str(r["responses"]), str(r["errors"]),
                   str(r["expected"]), "" if dur is None else f"{dur:.3f}",
                   *((_tls_text(r["tls"]),) if with_tls else ())]

    console = make_console(no_color)
    cols = [*COLUMNS, *((TLS_COLUMN,) if with_tls else ())]
    lines = plain_lines(cols, cells, console.width) if console.no_color or console.color_system is None else None
    if lines is not None:  # the same text, written a line at a time
        out = console.file
        for line in lines:
            out.write(line + "\n")
        return
    fit = fitted_table(cols, list(cells()), console.width)
    console.print(fit.table)
    if fit.dropped:
        console.print(f"(too narrow for: {', '.join(fit.dropped)}; -F json has every column)", style="dim",
                      highlight=False, markup=False)


@click.command("follow")
@capture_inputs
@click.option("-s", "--stream", "stream", type=click.IntRange(0), required=True,
              help="The conversation to follow (the stream column of `kdissect conversations`).")
@click.option("-V", "--verbose", is_flag=True, help="Show the decoded field tree under each message.")
@click.option("-x", "--hex", "hexdump", is_flag=True, help="Show a hex dump of each message's bytes.")
@click.option("--no-color", is_flag=True, help="Plain text even on a terminal.")
@time_option
@write_options
@decode_options
@preference_option
def follow(captures: tuple[str, ...], stream: int, verbose: bool, hexdump: bool, no_color: bool,
           time_format: str, write_path: str | None, with_peer: bool, print_too: bool, decode_as: tuple[str, ...],
           max_bytes: int, max_decompressed: int, show_secrets: bool) -> None:
    """Print one conversation of CAPTURE decoded, requests and responses interleaved in order.
    With -w, write every packet of the stream (with -Y: of its matching messages) to a pcapng file."""
    selection = packet_selection(captures, write_path, with_peer, print_too)
    registry, opts = build(decode_as, max_bytes, max_decompressed, show_secrets)
    if selection is not None and not print_too:
        for _ in iter_capture(captures, registry, opts, _in_stream(stream), selection):
            pass
        finish_packets(captures, selection, write_path, _whole(stream))
        return
    console = make_console(no_color)
    renderer = text_renderer(no_color, verbose, hexdump, max_bytes, console)
    counters = Counters()
    renderer.clock = clock = time_column(time_format, counters)
    n = 0
    sent = [0, 0]
    watch = StreamWatch(stream)
    for m in iter_capture(captures, registry, opts, observed(clock, _in_stream(stream)), selection,
                          observers=[watch], counters=counters):
        if n == 0:
            client, server = (m.src, m.dst) if m.to_server else (m.dst, m.src)
            console.print(f"Stream {stream}: {m.protocol} {client} ⇄ {server}", style="bold", highlight=False,
                          markup=False)
        n += 1
        sent[0 if m.to_server else 1] += len(m.data)
        renderer.render(m)
    if n == 0:
        click.echo(f"kdissect: {watch.nothing_shown(current_filter() is not None)}", err=True)
    else:
        console.print(f"{n} messages: {size_text(sent[0])} to the server, {size_text(sent[1])} to the client",
                      style="dim", highlight=False, markup=False)
    finish_packets(captures, selection, write_path, _whole(stream))


def _whole(stream: int) -> int | None:
    """follow -w writes every packet of the stream; with -Y, those of the matching messages."""
    return stream if current_filter() is None else None


class StreamWatch:
    """A pipeline observer that keeps the description of one conversation when it ends, and the
    highest stream index seen."""

    def __init__(self, stream: int) -> None:
        self.stream = stream
        self.last = -1
        self.row: dict[str, Any] | None = None
        self.looks_like = ""

    def conversation_ended(self, conv: Conversation[Decoding]) -> None:
        self.last = max(self.last, conv.index)
        if conv.index == self.stream:
            self.row = describe(conv)
            self.looks_like = first_bytes(conv)

    def nothing_shown(self, filtered: bool) -> str:
        """Why the stream printed nothing; a stream the capture does not have is a UsageError."""
        row = self.row
        if row is None:
            have = "no streams" if self.last < 0 else f"streams 0–{self.last}"
            raise UsageError(f"stream {self.stream} does not exist: the capture has {have} "
                             "(see `kdissect conversations`)")
        where = f"stream {self.stream} ({row['client']} → {row['server']})"
        if filtered and row["messages"]:
            return f"{where}: no message matches the display filter"
        return f"{where}: nothing decoded ({self.reason(row)})"

    def reason(self, row: dict[str, Any]) -> str:
        tls = row["tls"]
        if tls is not None and not tls["decrypted"]:
            problems = [d["key"] for d in tls["diagnostics"] if d["key"] != "tls.alert"]
            named = " ".join(str(tls[k]) for k in ("version", "cipher") if tls[k]) or "TLS"
            return f"{named}; not decrypted" + (f": {problems[0]}" if problems else "")
        if not row["bytes_to_server"] and not row["bytes_to_client"]:
            return "no payload"
        if row["protocol"] is not None:
            return f"{row['protocol']}, but no complete message"
        if self.looks_like:
            return f"looks like {self.looks_like}, which kdissect does not decode"
        return f"no protocol recognised; --decode-as {row['server'].rpartition(':')[2]}=PROTO to choose one"


def _in_stream(stream: int) -> Callable[[Message], bool]:
    """The messages of one stream that pass the command's -Y."""
    keep = current_filter()
    if keep is None:
        return lambda m: m.stream == stream
    return lambda m: m.stream == stream and keep(m)
