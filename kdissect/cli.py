"""The kdissect command line: wiring and options only.

Exit codes: 0 success (decoding diagnostics are data, not failures), 2 bad use or unreadable
input (one line on stderr), 1 an unexpected internal error (one line; KDISSECT_DEBUG=1 shows the
traceback), 130 interrupted.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import itertools
import os
import sys
from collections.abc import Iterable, Iterator
from typing import IO, Any

import click

from kdissect.cliutil import (
    build,
    capture_inputs,
    current_filter,
    decode_options,
    finish_packets,
    flush_option,
    iter_capture,
    output_option,
    packet_selection,
    preference_option,
    text_renderer,
    write_options,
    writing,
)
from kdissect.commands.timeopt import observed, time_column, time_option
from kdissect.errors import KdissectError, UsageError
from kdissect.model import Message

# Commands defined in their own modules, imported only when run (or listed by --help): `read`
# loads neither Spark nor the statistics tables.
COMMANDS: dict[str, str] = {
    "sniff": "kdissect.commands.sniff:sniff",
    "interfaces": "kdissect.commands.sniff:interfaces",
    "stats": "kdissect.commands.stats:stats",
    "conversations": "kdissect.commands.conversations:conversations",
    "follow": "kdissect.commands.conversations:follow",
    "protocols": "kdissect.commands.catalog:protocols",
    "fields": "kdissect.commands.catalog:fields",
    "spark": "kdissect.commands.spark:spark",
    "expert": "kdissect.commands.expert:expert",
    "report": "kdissect.commands.expert:report",
    "tui": "kdissect.commands.tui:tui",
}


class PipeClosed(Exception):
    """Standard output was closed by its reader (`| head`)."""


class KdissectGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *COMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return super().get_command(ctx, cmd_name)
        module, attr = where.split(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command

    def invoke(self, ctx: click.Context) -> object:
        # click turns EPIPE into exit status 1; a reader that stops early is not an error.
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise PipeClosed() from None


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """--version: kdissect's version and the protocol specifications its tables come from."""
    if not value or ctx.resilient_parsing:
        return
    from kdissect.versions import version_text

    click.echo(version_text())
    ctx.exit()


@click.group(cls=KdissectGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and the protocol specifications the decoding tables come from, "
                   "and exit.")
def cli() -> None:
    """Protocol analyzer for Kafka, ZooKeeper, Pulsar and RocketMQ traffic.

    Read captures (pcap, pcapng, .gz), decode every message down to individual records, match
    responses to requests, and print them or export them as JSON.
    """


@cli.command()
@capture_inputs
@click.option("-c", "--count", type=click.IntRange(1), help="Stop after this many messages.")
@click.option("-V", "--verbose", is_flag=True, help="Show the decoded field tree under each message.")
@click.option("-x", "--hex", "hexdump", is_flag=True, help="Show a hex dump of each message's bytes.")
@click.option("--no-color", is_flag=True, help="Plain text even on a terminal (NO_COLOR is honoured too).")
@time_option
@flush_option
@write_options
@decode_options
@preference_option
def read(captures: tuple[str, ...], count: int | None, verbose: bool, hexdump: bool, no_color: bool,
         time_format: str, flush_each: bool, write_path: str | None, with_peer: bool, print_too: bool,
         decode_as: tuple[str, ...], max_bytes: int, max_decompressed: int, show_secrets: bool) -> None:
    """Print one line per message of CAPTURE, like Wireshark's packet list. Several captures
    are merged in time order, as mergecap merges them."""
    from kdissect.pipeline import Counters

    selection = packet_selection(captures, write_path, with_peer, print_too)
    registry, opts = build(decode_as, max_bytes, max_decompressed, show_secrets, summary_only=not verbose)
    renderer = text_renderer(no_color, verbose, hexdump, max_bytes) if selection is None or print_too else None
    counters = Counters()
    clock = time_column(time_format, counters)
    if renderer is not None:
        renderer.clock = clock
    messages = iter_capture(captures, registry, opts, observed(clock, current_filter()), selection,
                            counters=counters)
    for m in _counted(messages, count):
        if renderer is not None:
            renderer.render(m)
            if flush_each:
                sys.stdout.flush()
    finish_packets(captures, selection, write_path)


def _counted(messages: Iterable[Message], count: int | None) -> Iterator[Message]:
    """The first `count` messages (all when None, or when more than islice can count), without
    reading past the last one."""
    return itertools.islice(messages, count if count is not None and count <= sys.maxsize else None)


@cli.command()
@capture_inputs
@output_option("Write to this file instead of standard output.")
@click.option("-F", "-T", "--format", "fmt", type=click.Choice(["json", "jsonl", "fields"]), default="json",
              show_default=True,
              help="A JSON array, JSON Lines (one object per line), or tab-separated field values (-e); "
                   "-T is tshark's spelling.")
@click.option("-e", "--field", "field_keys", multiple=True, metavar="FIELD",
              help="With --format fields: a field key to print (repeatable; see `kdissect fields`).")
@click.option("-E", "field_options", multiple=True, metavar="NAME=VALUE",
              help="With --format fields: header=y, separator=/t|/s|C, aggregator=C, quote=d|s|n, "
                   "occurrence=f|l|a.")
@click.option("--positions", is_flag=True,
              help="With --format json or jsonl: add each message's `positions`, the [offset, length] of "
                   "every decoded field in its bytes (tshark's -x).")
@click.option("-c", "--count", type=click.IntRange(1), help="Stop after this many messages.")
@flush_option
@write_options
@decode_options
def export(captures: tuple[str, ...], outputs: tuple[str, ...], fmt: str, field_keys: tuple[str, ...],
           field_options: tuple[str, ...], positions: bool, count: int | None, flush_each: bool,
           write_path: str | None, with_peer: bool, print_too: bool, decode_as: tuple[str, ...], max_bytes: int,
           max_decompressed: int, show_secrets: bool) -> None:
    """Export the decoded messages of CAPTURE as JSON (schema: docs/json.md) or field values.
    Several captures are merged in time order, as mergecap merges them."""
    output = outputs[0] if outputs else None
    registry, opts = build(decode_as, max_bytes, max_decompressed, show_secrets)
    if (field_keys or field_options) and fmt != "fields":
        raise UsageError("-e and -E go with --format fields")
    if positions and fmt == "fields":
        raise UsageError("--positions goes with --format json or jsonl")
    selection = packet_selection(captures, write_path, with_peer, print_too)
    messages = _counted(iter_capture(captures, registry, opts, selection=selection), count)
    if flush_each:
        messages = _flushed(messages)
    if selection is not None and output is None and not print_too:
        for _ in messages:  # -w alone: the packets only
            pass
    elif fmt == "fields":
        from kdissect.commands.fieldsout import FieldsWriter, parse_format

        fields_fmt = parse_format(field_options)
        with _open_output(output) as out:
            writer = FieldsWriter(field_keys, fields_fmt, max_bytes, out)
            for m in messages:
                writer.write(m)
    else:
        _write_json(messages, fmt, output, max_bytes, positions)
    finish_packets(captures, selection, write_path)


def _flushed(messages: Iterable[Message]) -> Iterator[Message]:
    """The messages, standard output flushed after each is written (before the next is asked
    for) and after the last: -l."""
    for m in messages:
        yield m
        _flush_all()
    _flush_all()


def _flush_all() -> None:
    sys.stdout.flush()
    sys.stdout.buffer.flush()


def _write_json(messages: Iterable[Message], fmt: str, output: str | None, max_bytes: int,
                positions: bool) -> None:
    """The messages as a JSON array (`json`) or JSON Lines (`jsonl`); `positions`: with the
    place of each field in the message's bytes."""
    from kdissect.render.jsonout import export_json, export_line

    with _open_output(output, binary=True) as out:
        first = True
        if fmt == "json":
            out.write(b"[")
        for m in messages:
            if fmt == "json":
                out.write((b"\n" if first else b",\n") + export_json(m, max_bytes, positions))
            else:
                out.write(export_line(m, max_bytes, positions))
            first = False
        if fmt == "json":
            out.write(b"\n]\n" if not first else b"]\n")


@contextlib.contextmanager
def _open_output(path: str | None, binary: bool = False) -> Iterator[IO[Any]]:
    """The file at path, or standard output; `binary` for bytes (JSON from the encoder)."""
    if path is None:
        if binary:
            sys.stdout.flush()
            yield sys.stdout.buffer
            sys.stdout.buffer.flush()
        else:
            yield sys.stdout
        return
    with writing(path):
        f = open(path, "wb") if binary else open(path, "w", encoding="utf-8")  # noqa: SIM115
    with f:
        yield f


def _tune_gc() -> None:
    """Decoding allocates millions of short-lived, acyclic objects (fields): collect cycles
    rarely, and never scan the objects that exist at start-up."""
    import gc

    gc.freeze()
    gc.set_threshold(200_000, 20, 100)


_UNBUFFERED: IO[str] | None = None


def _buffered_stdout() -> None:
    """Standard output off a terminal written in blocks, as tshark writes it (its -l, and ours,
    flush after each message), even under PYTHONUNBUFFERED, which many container images set:
    it would cost a system call per output line (a sixth of `read`'s CPU time)."""
    global _UNBUFFERED
    out = sys.stdout
    if not isinstance(out, io.TextIOWrapper) or isinstance(out.buffer, io.BufferedIOBase) or out.isatty():
        return
    _UNBUFFERED = out  # kept: it closes the file it wraps when collected
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(out.buffer), encoding=out.encoding, errors=out.errors)


def main() -> None:
    _tune_gc()
    _buffered_stdout()
    try:
        cli.main(standalone_mode=False, prog_name="kdissect")
    except click.exceptions.Abort:
        click.echo("kdissect: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        # One line, as every error of the CLI: click's own usage text is what --help shows.
        ctx = getattr(e, "ctx", None)
        hint = f" (see {ctx.command_path} --help)" if isinstance(e, click.UsageError) and ctx is not None else ""
        click.echo(f"kdissect: error: {' '.join(e.format_message().split())}{hint}", err=True)
        sys.exit(2 if e.exit_code in (1, 2) else e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        click.echo("kdissect: interrupted", err=True)
        sys.exit(130)
    except (BrokenPipeError, PipeClosed):
        _quiet_broken_pipe()
    except KdissectError as e:
        click.echo(f"kdissect: error: {e}", err=True)
        sys.exit(2)
    except OSError as e:  # the system's refusal (a full disk, a device that takes no more), not a bug
        _system_error(e)
    except Exception as e:  # noqa: BLE001 - the CLI boundary: one line, never a traceback
        if os.environ.get("KDISSECT_DEBUG"):
            raise
        click.echo(f"kdissect: internal error: {type(e).__name__}: {e} (KDISSECT_DEBUG=1 for details)",
                   err=True)
        sys.exit(1)
    _flush_stdout()


def _flush_stdout() -> None:
    try:
        sys.stdout.flush()
    except (BrokenPipeError, PipeClosed):
        _quiet_broken_pipe()
    except OSError as e:
        _system_error(e)


def _system_error(e: OSError) -> None:
    """An input/output error as the one-line CLI error (exit 2). What standard output still
    holds is dropped, so that the interpreter does not fail again writing it at exit."""
    where = f"{e.filename}: " if e.filename else ""
    click.echo(f"kdissect: error: {where}{e.strerror or e}", err=True)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(2)


def _quiet_broken_pipe() -> None:
    """`kdissect read big.pcap | head` ends quietly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)
