"""Helpers shared by the CLI commands: the decoding options, building the registry and options,
streaming a capture with a progress bar, and the console."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

from kdissect.dissect.base import MAX_DECOMPRESSED, Options
from kdissect.errors import KdissectError, UsageError
from kdissect.model import Message
from kdissect.protocols import DissectorRegistry, parse_decode_as

if TYPE_CHECKING:
    from kdissect.pipeline.packets import PacketSelection

F = TypeVar("F", bound=Callable[..., Any])
PROGRESS_MIN_BYTES = 8 * 1024 * 1024


@contextlib.contextmanager
def writing(path: str) -> Iterator[None]:
    """An OSError inside (opening, writing or renaming `path`) as the one-line CLI error."""
    try:
        yield
    except OSError as e:
        raise KdissectError(f"cannot write {path}: {e.strerror or e}") from None
FILTER_META = "kdissect.display_filter"  # click context meta: the compiled -Y filter
FILTER_TEXT_META = "kdissect.display_filter_text"  # ... and its text (for code that ships it elsewhere)
KEYLOG_META = "kdissect.tls_keylog"  # click context meta: the key log given on the command line
# Wireshark preferences that `-o NAME:VALUE` sets, as tshark's -o does -> the meta key they fill.
PREFERENCES = {"tls.keylog_file": KEYLOG_META, "ssl.keylog_file": KEYLOG_META}
# A capture argument: any path, "-" for standard input; CaptureFile says, in one line, why one
# cannot be read (missing, a directory, not a capture).
CAPTURE_PATH = click.Path(allow_dash=True, readable=False)
# tshark's `-d tcp.port==9092,kafka` (or a range, `tcp.port==9092-9094,kafka`).
TSHARK_DECODE_AS = re.compile(r"tcp\.port\s*==\s*([0-9]{1,6})(?:\s*-\s*([0-9]{1,6}))?\s*,\s*([A-Za-z0-9_.-]+)")


def capture_inputs(f: F) -> F:
    """The capture arguments of a command: CAPTURE... and tshark's `-r FILE` (both repeatable;
    several captures are merged in time order, as mergecap does). The command receives them as
    `captures`, a tuple of paths; without any it is a usage error."""

    @functools.wraps(f)
    def wrapper(*args: Any, capture_args: tuple[str, ...] = (), read_files: tuple[str, ...] = (),
                **kwargs: Any) -> Any:
        captures = (*read_files, *capture_args)
        if not captures:
            raise click.UsageError("no capture given: name one (CAPTURE or -r FILE; - for standard input)")
        return f(*args, captures=captures, **kwargs)

    wrapped: Any = click.argument("capture_args", nargs=-1, type=CAPTURE_PATH, metavar="[CAPTURE]...")(wrapper)
    wrapped = click.option("-r", "--read-file", "read_files", multiple=True, type=CAPTURE_PATH, metavar="FILE",
                           help="A capture to read, as tshark's -r (the same as naming it; repeatable: "
                                "several captures are merged in time order, like mergecap).")(wrapped)
    return wrapped


def tshark_decode_as(spec: str) -> list[str]:
    """tshark's `tcp.port==9092,kafka` or `tcp.port==9092-9094,kafka` as --decode-as specs
    (`9092=kafka`...); raises UsageError on anything else."""
    m = TSHARK_DECODE_AS.fullmatch(spec.strip())
    if m is None:
        raise UsageError(f"-d takes tcp.port==PORT,PROTOCOL or tcp.port==PORT-PORT,PROTOCOL, not {spec!r}")
    first, last, proto = int(m[1]), int(m[2] or m[1]), m[3]
    if not 0 < first <= last < 65536:
        raise UsageError(f"-d: port range {first}-{last} out of range (1-65535, low to high)")
    return [f"{p}={proto}" for p in range(first, last + 1)]


def _store_filter(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """-Y: compiled once while the options are parsed, so a bad filter fails before any output."""
    if value:
        from kdissect.filter import compile_filter

        ctx.meta[FILTER_META] = compile_filter(value)
        ctx.meta[FILTER_TEXT_META] = value


def current_filter() -> Callable[[Message], bool] | None:
    """The -Y filter of the running command, if any (for commands that run the Pipeline
    themselves, such as sniff)."""
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(FILTER_META)


def current_filter_text() -> str | None:
    """The -Y expression as typed (already checked): Spark executors compile it themselves,
    since a compiled filter does not pickle."""
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(FILTER_TEXT_META)


def _store_keylog(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value:
        ctx.meta[KEYLOG_META] = _readable(value, "--tls-keylog")


def _readable(path: str, what: str) -> str:
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise click.BadParameter(f"{path}: not a readable file", param_hint=what)
    return path


def preference(ctx: click.Context, text: str) -> bool:
    """A tshark-style preference `NAME:VALUE` (`tls.keylog_file:keys.log`): stored for the command
    if NAME is one kdissect knows; False if text does not name a preference at all."""
    name, sep, value = text.partition(":")
    if not sep or "." not in name or "/" in name or os.sep in name:
        return False
    meta = PREFERENCES.get(name)
    if meta is None:
        raise click.BadParameter(f"unknown preference {name!r} (known: {', '.join(sorted(PREFERENCES))})",
                                 param_hint="-o")
    ctx.meta.setdefault(meta, _readable(value, f"-o {name}"))
    return True


def _store_preferences(ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> None:
    for text in values:
        if not preference(ctx, text):
            raise click.BadParameter(f"{text!r} is not NAME:VALUE (e.g. tls.keylog_file:keys.log)",
                                     param_hint="-o")


def preference_option(f: F) -> F:
    """tshark's `-o NAME:VALUE`, for the commands whose -o is not an output file."""
    return click.option("-o", "preferences", multiple=True, metavar="NAME:VALUE", expose_value=False,
                        callback=_store_preferences,
                        help="A Wireshark preference, as tshark's -o: tls.keylog_file:FILE.")(f)


def _outputs(ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    """-o of a command that writes a file: the file, and tshark preferences (`-o tls.keylog_file:FILE`)."""
    files = tuple(v for v in values if not preference(ctx, v))
    if len(files) > 1:
        raise click.BadParameter("one output file at most", param_hint="-o")
    return files


def output_option(help_text: str) -> Callable[[F], F]:
    """-o FILE, the command's output (`outputs`: a tuple of at most one); as in tshark,
    -o tls.keylog_file:FILE sets a preference instead."""
    return click.option("-o", "--output", "outputs", multiple=True, metavar="FILE", callback=_outputs,
                        help=help_text + " As in tshark, -o tls.keylog_file:FILE sets a preference instead.")


def current_keylog() -> str | None:
    """The key log of the running command: --tls-keylog, else -o tls.keylog_file, else the
    SSLKEYLOGFILE variable (which may name a file a client has not written yet)."""
    ctx = click.get_current_context(silent=True)
    given = None if ctx is None else ctx.meta.get(KEYLOG_META)
    return given or os.environ.get("SSLKEYLOGFILE") or None


TEXT_MAX_BYTES = 256  # --max-bytes of the commands that print text
WHOLE_VALUES = frozenset({"export", "spark"})  # commands that keep whole values unless told


def _max_bytes(ctx: click.Context, _param: click.Parameter, value: int | None) -> int:
    if value is not None:
        return value
    return 0 if ctx.info_name in WHOLE_VALUES else TEXT_MAX_BYTES


def _with_tshark_decode_as(f: F) -> F:
    """The command sees -d's ports in its `decode_as`, after those of --decode-as."""

    @functools.wraps(f)
    def wrapper(*args: Any, decode_as: tuple[str, ...] = (), tshark_decode_as_specs: tuple[str, ...] = (),
                **kwargs: Any) -> Any:
        extra = [s for spec in tshark_decode_as_specs for s in tshark_decode_as(spec)]
        return f(*args, decode_as=(*decode_as, *extra), **kwargs)

    return wrapper  # type: ignore[return-value]


def decode_options(f: F) -> F:
    """Options shared by every command that decodes traffic."""
    decorators = [
        click.option("--decode-as", "decode_as", multiple=True, metavar="PORT=PROTO",
                     help="Decode TCP port PORT as PROTO (kafka, zookeeper, pulsar, rocketmq); repeatable."),
        click.option("-d", "tshark_decode_as_specs", multiple=True, metavar="tcp.port==PORT[-PORT],PROTO",
                     help="tshark's spelling of --decode-as: -d tcp.port==9092,kafka, or a range "
                          "tcp.port==9092-9094,kafka; repeatable."),
        click.option("--max-bytes", type=click.IntRange(0), default=None, callback=_max_bytes,
                     help="Cut byte and text values longer than this in the output (0: never). Default: "
                          f"{TEXT_MAX_BYTES} in text output; whole values in export and spark."),
        click.option("--max-decompressed", type=click.IntRange(1024, MAX_DECOMPRESSED), default=64 * 1024 * 1024,
                     show_default=True,
                     help="Cap on the decompressed bytes of one message, all its payloads together. A "
                          "capture's messages together may decompress four times this, plus 100 bytes "
                          "for every byte they carry."),
        click.option("--show-secrets", is_flag=True,
                     help="Show SASL passwords, proofs, auth tokens and ACL signatures instead of redacting "
                          "them (and masking their bytes in hex dumps)."),
        click.option("-Y", "--display-filter", metavar="EXPR", expose_value=False, callback=_store_filter,
                     help="Only messages matching this display filter (Wireshark syntax; docs/filters.md)."),
        click.option("--tls-keylog", metavar="FILE", expose_value=False, callback=_store_keylog,
                     help="Decrypt TLS with this NSS key log (as written through SSLKEYLOGFILE; that "
                          "variable is the default)."),
    ]
    f = _with_tshark_decode_as(f)
    for dec in reversed(decorators):
        f = dec(f)
    return f


def flush_option(f: F) -> F:
    """-l, tshark's: standard output flushed after each message (off a terminal it is written
    in blocks otherwise: `main` makes it so even under PYTHONUNBUFFERED)."""
    return click.option("-l", "flush_each", is_flag=True,
                        help="Flush standard output after each message, as tshark's -l (for a "
                             "reader of a live pipe).")(f)


def write_options(f: F) -> F:
    """-w FILE (the packets of the shown messages, as pcapng), --with-peer and -P."""
    decorators = [
        click.option("-w", "--write", "write_path", type=click.Path(dir_okay=False, allow_dash=False),
                     metavar="FILE",
                     help="Write the packets (all the frames) of the messages that pass -Y to FILE, as "
                          "pcapng. As with tshark -w, nothing is printed unless -P. Reads the capture "
                          "twice: not for standard input."),
        click.option("--with-peer", is_flag=True,
                     help="With -w: also the packets of each written message's request or response."),
        click.option("-P", "--print", "print_too", is_flag=True,
                     help="With -w: print the messages as well, as tshark's -P."),
    ]
    for dec in reversed(decorators):
        f = dec(f)
    return f


def packet_selection(captures: Sequence[str], write_path: str | None, with_peer: bool,
                     print_too: bool) -> PacketSelection | None:
    """The frames -w will write (None without -w), after checking that it can."""
    if write_path is None:
        if with_peer or print_too:
            raise UsageError("--with-peer and -P go with -w FILE")
        return None
    from kdissect.pipeline.packets import PacketSelection, check_writable

    check_writable(captures, write_path)
    return PacketSelection(with_peer)


def finish_packets(captures: Sequence[str], selection: PacketSelection | None, write_path: str | None,
                   stream: int | None = None) -> None:
    """The second pass of -w: the selected frames copied to the pcapng file; with `stream`, every
    frame of that TCP stream instead."""
    if selection is None or write_path is None:
        return
    from kdissect.pipeline.packets import StreamFrames, write_packets

    selection.complete()
    n = write_packets(captures, selection.frames if stream is None else StreamFrames(stream), write_path)
    click.echo(f"kdissect: {n} packets written to {write_path}", err=True)


def build(decode_as: tuple[str, ...], max_bytes: int, max_decompressed: int,
          show_secrets: bool, summary_only: bool = False) -> tuple[DissectorRegistry, Options]:
    """The registry and options of a decoding command. `summary_only`: nothing but summary
    lines is shown, so bulk records are counted rather than decoded (unless -Y needs them)."""
    registry = DissectorRegistry(decode_as=parse_decode_as(decode_as))
    opts = Options(max_bytes=max_bytes, max_decompressed=max_decompressed, show_secrets=show_secrets,
                   record_detail=not summary_only or current_filter() is not None, tls_keylog=current_keylog())
    return registry, opts


def iter_capture(path: str | Sequence[str], registry: DissectorRegistry, opts: Options,
                 display_filter: Callable[[Message], bool] | None = None,
                 selection: PacketSelection | None = None, observers: Sequence[Any] = (),
                 counters: Any = None) -> Iterator[Message]:
    """Messages of a capture file (or of several, merged in time order) that pass the display
    filter (the argument, else the command's -Y), with a progress bar on a terminal and file
    warnings at the end. `selection` (-w) marks the frames of the messages it passes; `observers`
    are told of each conversation's end (pipeline.ConversationObserver); `counters`
    (pipeline.Counters), if given, receives the run's counts as it goes."""
    keep = display_filter if display_filter is not None else current_filter()
    messages = _iter_all(path, registry, opts, observers, counters)
    if selection is not None:
        yield from selection.select(messages, keep)
    elif keep is None:
        yield from messages
    else:
        yield from filter(keep, messages)


def _iter_all(path: str | Sequence[str], registry: DissectorRegistry, opts: Options,
              observers: Sequence[Any] = (), counters: Any = None) -> Iterator[Message]:
    from kdissect.analysis.coverage import notes
    from kdissect.capture.pcapfile import captures_name, captures_size
    from kdissect.pipeline import Counters, dissect_file

    warnings: list[str] = []
    counters = counters if counters is not None else Counters()
    size = captures_size(path)
    if sys.stderr.isatty() and size >= PROGRESS_MIN_BYTES:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                      TimeRemainingColumn(), console=Console(stderr=True), transient=True) as bar:
            label = os.path.basename(path) if isinstance(path, str) else ", ".join(map(os.path.basename, path))
            task = bar.add_task(label, total=size)
            yield from dissect_file(path, registry, opts, lambda pos: bar.update(task, completed=pos),
                                    warnings, counters=counters, observers=observers)
    else:
        yield from dissect_file(path, registry, opts, None, warnings, counters=counters, observers=observers)
    for w in warnings:
        click.echo(f"kdissect: warning: {w}", err=True)
    for n in notes(counters, captures_name(path)):
        click.echo(f"kdissect: {n}", err=True)


def text_renderer(no_color: bool, verbose: bool, hexdump: bool, max_bytes: int,
                  console: Any = None) -> Any:
    """The packet-list renderer, each protocol's column in that protocol's colour."""
    from kdissect import protocols
    from kdissect.render.text import TextRenderer

    if console is None and plain_stdout(no_color):
        return TextRenderer(None, verbose, hexdump, max_bytes, protocols.styles(), out=sys.stdout)
    return TextRenderer(console or make_console(no_color), verbose, hexdump, max_bytes, protocols.styles())


def plain_stdout(no_color: bool) -> bool:
    """Whether standard output takes plain text for certain, without asking rich: --no-color or
    NO_COLOR, or not a terminal with nothing that forces colours."""
    env = os.environ
    if no_color or env.get("NO_COLOR"):
        return True
    forced = any(env.get(k) for k in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS"))
    return not forced and not sys.stdout.isatty()


def make_console(no_color: bool, file: IO[str] | None = None) -> Any:
    """A rich Console: colours only on a terminal (rich honours NO_COLOR), never wrapped when
    plain; a closed pipe (`kdissect read big.pcap | head`) ends the program quietly with 0."""
    from rich.console import Console

    class QuietConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise SystemExit(0)

    out = file or sys.stdout
    # Off a terminal nothing wraps: tables take the width their content needs.
    width = None if out.isatty() else int(os.environ.get("COLUMNS") or 10_000)
    if no_color:
        return QuietConsole(file=file, color_system=None, no_color=True, highlight=False, width=width or 10_000)
    return QuietConsole(file=file, highlight=False, soft_wrap=True, width=width)
