"""`kdissect sniff`: decode live traffic as it arrives; `kdissect interfaces`: what can be sniffed."""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from kdissect.cliutil import build, current_filter, decode_options, preference_option, text_renderer
from kdissect.commands.timeopt import time_column, time_option
from kdissect.errors import UsageError
from kdissect.model import Message

if TYPE_CHECKING:
    from kdissect.capture.ring import CaptureWriter, RingSpec
    from kdissect.render.timecol import TimeColumn


class _StopFlag:
    """Counts SIGINT/SIGTERM: the first stops capturing (what the kernel holds is still
    decoded), a second one stops at once. Checked at least every poll interval."""

    def __init__(self) -> None:
        self.count = 0
        self._saved: dict[int, Any] = {}

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1

    def __enter__(self) -> _StopFlag:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._saved[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._saved.items():
            signal.signal(sig, old)


def _emitter(fmt: str, verbose: bool, hexdump: bool, no_color: bool, max_bytes: int,
             clock: TimeColumn) -> Callable[[Message], None]:
    if fmt == "jsonl":
        from kdissect.render.jsonout import message_json

        out = sys.stdout

        def emit(m: Message) -> None:
            out.write(message_json(m, max_bytes).decode("utf-8") + "\n")

        return emit
    renderer = text_renderer(no_color, verbose, hexdump, max_bytes)
    renderer.clock = clock
    return renderer.render


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A number of seconds that ends: nan and inf pass FloatRange (nan compares false with its
    bounds) and would never stop the capture."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of seconds", ctx=ctx, param=param)
    return value


@click.command()
@click.option("-i", "--interface", required=True, help="Interface to capture on (`any`: all of them).")
@click.option("-f", "--filter", "bpf_filter", default="", metavar="BPF",
              help="Capture filter in tcpdump syntax, run in the kernel (e.g. 'tcp port 9092').")
@click.option("-c", "--count", type=click.IntRange(1), help="Stop after this many messages (shown ones, with -Y).")
@click.option("--duration", type=click.FloatRange(0, min_open=True), callback=_finite, metavar="SECONDS",
              help="Stop after this many seconds.")
@click.option("-w", "--write", "write_path", type=click.Path(dir_okay=False),
              help="Also write the captured packets to this pcapng file (readable by `kdissect read`).")
@click.option("-P", "--pcap", "pcap_format", is_flag=True, help="Write -w as classic pcap, not pcapng.")
@click.option("-b", "--ring-buffer", "ring", multiple=True, metavar="KEY:VALUE",
              help="Write -w as a ring buffer of files, as dumpcap: filesize:KB (1 kB = 1000 bytes), "
                   "duration:SECONDS, packets:N switch files; files:N keeps the last N. Repeatable.")
@click.option("--backend", type=click.Choice(["tpacket", "pcap"]), default=None,
              help="How to capture: tpacket (AF_PACKET TPACKET_V3 ring, Linux; the default there) "
                   "or pcap (the system libpcap; the default elsewhere).")
@click.option("-F", "--format", "fmt", type=click.Choice(["text", "jsonl"]), default="text",
              show_default=True, help="One line per message, or JSON Lines (schema: docs/json.md).")
@click.option("-V", "--verbose", is_flag=True, help="Show the decoded field tree under each message.")
@click.option("-x", "--hex", "hexdump", is_flag=True, help="Show a hex dump of each message's bytes.")
@click.option("--no-color", is_flag=True, help="Plain text even on a terminal (NO_COLOR is honoured too).")
@time_option
@click.option("-B", "--buffer-size", type=click.IntRange(4, 4096), default=64, show_default=True,
              metavar="MIB", help="Kernel capture ring size in MiB (absorbs bursts while decoding).")
@decode_options
@preference_option
def sniff(interface: str, bpf_filter: str, count: int | None, duration: float | None, write_path: str | None,
          pcap_format: bool, ring: tuple[str, ...], backend: str | None,
          fmt: str, verbose: bool, hexdump: bool, no_color: bool, time_format: str, buffer_size: int,
          decode_as: tuple[str, ...], max_bytes: int, max_decompressed: int, show_secrets: bool) -> None:
    """Capture on INTERFACE and print each message as soon as it is complete, each response
    with its response time. Ctrl-C or SIGTERM stops; one summary line goes to stderr."""
    from kdissect.capture.live import default_backend, open_live
    from kdissect.capture.ring import parse_ring
    from kdissect.pipeline import Pipeline
    from kdissect.pipeline.live import LiveSession

    spec = parse_ring(ring)
    if spec is not None and not write_path:
        raise UsageError("a ring buffer (-b) needs a file to write (-w FILE)")
    registry, opts = build(decode_as, max_bytes, max_decompressed, show_secrets)
    pipe = Pipeline(registry, opts, hold=False, capture=f"live:{interface}")
    clock = time_column(time_format, pipe.counters)
    emit = _emitter(fmt, verbose, hexdump, no_color, max_bytes, clock)
    cap = open_live(backend or default_backend(), interface, bpf_filter, buffer_size)
    with cap, _StopFlag() as stop:
        writer = _writer(write_path, pcap_format, spec, cap.linktype, interface, bpf_filter)
        session = LiveSession(emit, count, writer, current_filter(), clock)
        shown = f", filter {bpf_filter!r}" if bpf_filter else ""
        click.echo(f"kdissect: capturing on {interface}{shown} (link type {cap.linktype}); "
                   "Ctrl-C to stop", err=True)
        deadline = time.monotonic() + duration if duration else None
        try:
            session.run(cap, pipe, stop, deadline)
        finally:
            if writer is not None:
                writer.close()
            _flush_quietly()
            error = getattr(cap, "error", None)
            if error:
                click.echo(f"kdissect: capture stopped: {error}", err=True)
            click.echo(session.summary(cap.read_stats().dropped, write_path), err=True)


def _writer(path: str | None, pcap: bool, spec: RingSpec | None, linktype: int, interface: str,
            bpf_filter: str) -> CaptureWriter | None:
    from kdissect.capture.ring import CaptureWriter, opener

    if not path:
        return None
    return CaptureWriter(path, opener(pcap, linktype, interface, bpf_filter), spec)


def _flush_quietly() -> None:
    with contextlib.suppress(BrokenPipeError, ValueError):
        sys.stdout.flush()


@click.command()
def interfaces() -> None:
    """List the interfaces that can be sniffed: index, name, link type, state, addresses."""
    from kdissect.capture.ifaces import list_interfaces

    rows = [(str(i.index), i.name, i.link, i.state, ", ".join(i.addresses) or "-") for i in list_interfaces()]
    rows.append(("", "any", "raw IP", "up", "(every interface; IPv4 and IPv6 packets)"))
    widths = [max(len(r[c]) for r in rows) for c in range(4)]
    for r in rows:
        click.echo("  ".join(r[c].ljust(widths[c]) if c else r[c].rjust(widths[c]) for c in range(4))
                   + "  " + r[4])
