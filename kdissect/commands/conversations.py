"""`kdissect conversations` (the TCP streams of a capture) and `kdissect follow --stream N` (one
stream decoded, requests and responses in order: Wireshark's Follow TCP Stream, decoded)."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.table import Table

from kdissect.analysis.conversations import conversations as collect
from kdissect.cliutil import (
    CAPTURE_PATH,
    build,
    current_filter,
    decode_options,
    iter_capture,
    make_console,
    preference_option,
    text_renderer,
)


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB" if n < 1024 * 1024 else f"{n / 1048576:.1f} MiB"


@click.command("conversations")
@click.argument("capture", type=CAPTURE_PATH)
@click.option("-F", "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="A table for people, or JSON for scripts.")
@click.option("-a", "--all", "show_all", is_flag=True,
              help="Also list conversations that carried no payload (a lone FIN or ACK).")
@click.option("--no-color", is_flag=True, help="Plain text even on a terminal.")
@decode_options
@preference_option
def conversations(capture: str, fmt: str, show_all: bool, no_color: bool, decode_as: tuple[str, ...], max_bytes: int,
                  max_decompressed: int, show_secrets: bool) -> None:
    """List the TCP conversations of CAPTURE: protocol, endpoints, packets, bytes and messages.
    With -Y, only conversations with matching messages, and only those are counted."""
    registry, opts = build(decode_as, max_bytes, max_decompressed, show_secrets)
    keep = current_filter()
    table = collect(capture, registry, opts, keep)
    rows = table.rows(filtered=keep is not None, empty=show_all)
    for w in table.warnings:
        click.echo(f"kdissect: warning: {w}", err=True)
    for n in table.notes:
        click.echo(f"kdissect: {n}", err=True)
    if fmt == "json":
        click.echo(json.dumps(rows, indent=1))
        return
    _print_table(rows, no_color)


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


def _print_table(rows: list[dict[str, Any]], no_color: bool) -> None:
    t = Table(show_edge=False, pad_edge=False)
    with_tls = any(r["tls"] for r in rows)
    for col in ("stream", "protocol", "client", "server", "packets", "→ server", "→ client", "messages",
                "req", "resp", "errors", "duration s", *(("tls",) if with_tls else ())):
        t.add_column(col, justify="left" if col in ("protocol", "client", "server", "tls") else "right")
    for r in rows:
        dur = r["duration_s"]
        t.add_row(str(r["stream"]), r["protocol"] or "(not decoded)", r["client"], r["server"],
                  str(r["packets"]), _size(r["bytes_to_server"]), _size(r["bytes_to_client"]),
                  str(r["matched_messages"]), str(r["requests"]), str(r["responses"]), str(r["errors"]),
                  "" if dur is None else f"{dur:.3f}", *((_tls_text(r["tls"]),) if with_tls else ()))
    make_console(no_color).print(t)


@click.command("follow")
@click.argument("capture", type=CAPTURE_PATH)
@click.option("-s", "--stream", "stream", type=click.IntRange(0), required=True,
              help="The conversation to follow (the stream column of `kdissect conversations`).")
@click.option("-V", "--verbose", is_flag=True, help="Show the decoded field tree under each message.")
@click.option("-x", "--hex", "hexdump", is_flag=True, help="Show a hex dump of each message's bytes.")
@click.option("--no-color", is_flag=True, help="Plain text even on a terminal.")
@decode_options
@preference_option
def follow(capture: str, stream: int, verbose: bool, hexdump: bool, no_color: bool, decode_as: tuple[str, ...],
           max_bytes: int, max_decompressed: int, show_secrets: bool) -> None:
    """Print one conversation of CAPTURE decoded, requests and responses interleaved in order."""
    registry, opts = build(decode_as, max_bytes, max_decompressed, show_secrets)
    console = make_console(no_color)
    renderer = text_renderer(no_color, verbose, hexdump, max_bytes, console)
    n = 0
    sent = [0, 0]
    for m in iter_capture(capture, registry, opts):
        if m.stream != stream:
            continue
        if n == 0:
            client, server = (m.src, m.dst) if m.to_server else (m.dst, m.src)
            console.print(f"Stream {stream}: {m.protocol} {client} ⇄ {server}", style="bold", highlight=False,
                          markup=False)
        n += 1
        sent[0 if m.to_server else 1] += len(m.data)
        renderer.render(m)
    if n == 0:
        click.echo(f"kdissect: no decoded messages in stream {stream} (see `kdissect conversations`)", err=True)
        return
    console.print(f"{n} messages: {_size(sent[0])} to the server, {_size(sent[1])} to the client",
                  style="dim", highlight=False, markup=False)
