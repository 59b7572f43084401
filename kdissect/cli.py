"""The kdissect command line: wiring and options only.

Exit codes: 0 success (decoding diagnostics are data, not failures), 2 bad use or unreadable
input (one line on stderr), 1 an unexpected internal error (one line; KDISSECT_DEBUG=1 shows the
traceback), 130 interrupted.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any, TypeVar

import click

from kdissect import __version__
from kdissect.dissect.base import Options
from kdissect.dissect.registry import DissectorRegistry, parse_decode_as
from kdissect.errors import KdissectError
from kdissect.model import Message

F = TypeVar("F", bound=Callable[..., Any])
PROGRESS_MIN_BYTES = 8 * 1024 * 1024


def decode_options(f: F) -> F:
    """Options shared by every command that decodes traffic."""
    decorators = [
        click.option("--decode-as", "decode_as", multiple=True, metavar="PORT=PROTO",
                     help="Decode TCP port PORT as PROTO (kafka, zookeeper, pulsar, rocketmq); repeatable."),
        click.option("--max-bytes", type=click.IntRange(0), default=256, show_default=True,
                     help="Cut byte and text values longer than this in the output (0: never)."),
        click.option("--max-decompressed", type=click.IntRange(1024), default=64 * 1024 * 1024,
                     show_default=True, help="Cap on the output of any one decompression (bytes)."),
        click.option("--show-secrets", is_flag=True,
                     help="Show SASL passwords, proofs and auth tokens instead of redacting them."),
    ]
    for dec in reversed(decorators):
        f = dec(f)
    return f


def build(decode_as: tuple[str, ...], max_bytes: int, max_decompressed: int,
          show_secrets: bool) -> tuple[DissectorRegistry, Options]:
    registry = DissectorRegistry(decode_as=parse_decode_as(decode_as))
    opts = Options(max_bytes=max_bytes, max_decompressed=max_decompressed, show_secrets=show_secrets)
    return registry, opts


def iter_capture(path: str, registry: DissectorRegistry, opts: Options) -> Iterator[Message]:
    """Messages of a capture file, with a progress bar on a terminal and file warnings at the end."""
    from kdissect.pipeline import dissect_file

    warnings: list[str] = []
    size = os.path.getsize(path) if os.path.exists(path) else 0
    if sys.stderr.isatty() and size >= PROGRESS_MIN_BYTES:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                      TimeRemainingColumn(), console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(os.path.basename(path), total=size)
            yield from dissect_file(path, registry, opts, lambda pos: bar.update(task, completed=pos),
                                    warnings)
    else:
        yield from dissect_file(path, registry, opts, None, warnings)
    for w in warnings:
        click.echo(f"kdissect: warning: {w}", err=True)


def make_console(no_color: bool, file: IO[str] | None = None) -> Any:
    from rich.console import Console

    if no_color:
        return Console(file=file, color_system=None, no_color=True, highlight=False, width=10_000)
    return Console(file=file, highlight=False, soft_wrap=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="kdissect")
def cli() -> None:
    """Protocol analyzer for Kafka, ZooKeeper, Pulsar and RocketMQ traffic.

    Read captures (pcap, pcapng, .gz), decode every message down to individual records, match
    responses to requests, and print them or export them as JSON.
    """


@cli.command()
@click.argument("capture", type=click.Path(dir_okay=False))
@click.option("-c", "--count", type=click.IntRange(1), help="Stop after this many messages.")
@click.option("-V", "--verbose", is_flag=True, help="Show the decoded field tree under each message.")
@click.option("-x", "--hex", "hexdump", is_flag=True, help="Show a hex dump of each message's bytes.")
@click.option("--no-color", is_flag=True, help="Plain text even on a terminal (NO_COLOR is honoured too).")
@decode_options
def read(capture: str, count: int | None, verbose: bool, hexdump: bool, no_color: bool,
         decode_as: tuple[str, ...], max_bytes: int, max_decompressed: int, show_secrets: bool) -> None:
    """Print one line per message of CAPTURE, like Wireshark's packet list."""
    from kdissect.render.text import TextRenderer

    registry, opts = build(decode_as, max_bytes, max_decompressed, show_secrets)
    renderer = TextRenderer(make_console(no_color), verbose, hexdump, max_bytes)
    for n, m in enumerate(iter_capture(capture, registry, opts), 1):
        renderer.render(m)
        if count is not None and n >= count:
            break


@cli.command()
@click.argument("capture", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True),
              help="Write to this file instead of standard output.")
@click.option("-F", "--format", "fmt", type=click.Choice(["json", "jsonl"]), default="json",
              show_default=True, help="A JSON array, or JSON Lines (one object per line).")
@click.option("-c", "--count", type=click.IntRange(1), help="Stop after this many messages.")
@decode_options
def export(capture: str, output: str | None, fmt: str, count: int | None, decode_as: tuple[str, ...],
           max_bytes: int, max_decompressed: int, show_secrets: bool) -> None:
    """Export the decoded messages of CAPTURE as JSON (schema: docs/json.md)."""
    from kdissect.render.jsonout import dumps, message_dict

    registry, opts = build(decode_as, max_bytes, max_decompressed, show_secrets)
    with _open_output(output) as out:
        first = True
        if fmt == "json":
            out.write("[")
        for n, m in enumerate(iter_capture(capture, registry, opts), 1):
            line = dumps(message_dict(m, max_bytes))
            if fmt == "json":
                out.write(("\n" if first else ",\n") + line)
            else:
                out.write(line + "\n")
            first = False
            if count is not None and n >= count:
                break
        if fmt == "json":
            out.write("\n]\n" if not first else "]\n")


@contextlib.contextmanager
def _open_output(path: str | None) -> Iterator[IO[str]]:
    if path is None:
        yield sys.stdout
        return
    try:
        f = open(path, "w", encoding="utf-8")  # noqa: SIM115
    except OSError as e:
        raise KdissectError(f"cannot write {path}: {e.strerror or e}") from None
    with f:
        yield f


def main() -> None:
    try:
        cli.main(standalone_mode=False, prog_name="kdissect")
    except click.exceptions.Abort:
        click.echo("kdissect: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(2 if e.exit_code in (1, 2) else e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        click.echo("kdissect: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        _quiet_broken_pipe()
    except KdissectError as e:
        click.echo(f"kdissect: error: {e}", err=True)
        sys.exit(2)
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
    except BrokenPipeError:
        _quiet_broken_pipe()


def _quiet_broken_pipe() -> None:
    """`kdissect read big.pcap | head` ends quietly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)
