"""`kdissect stats CAPTURE`: service response time, errors, throughput, clients, paths and
conversations, as rich tables and a response-time histogram, or JSON (docs/stats.md)."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from kdissect.analysis.report import to_json
from kdissect.analysis.sketch import QuantileSketch
from kdissect.analysis.stats import Stats
from kdissect.capture.pcapfile import capture_name
from kdissect.cliutil import (
    CAPTURE_PATH,
    build,
    decode_options,
    iter_capture,
    make_console,
    preference_option,
)

BAR_WIDTH = 40
TEXT_COLUMNS = ("errors by name", "path", "client", "server")


@click.command()
@click.argument("capture", type=CAPTURE_PATH)
@click.option("-F", "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Tables for people, or JSON for scripts.")
@click.option("--top", type=click.IntRange(1), default=20, show_default=True,
              help="Rows shown per table in text output (JSON has them all).")
@click.option("--no-color", is_flag=True, help="Plain text even on a terminal.")
@decode_options
@preference_option
def stats(capture: str, fmt: str, top: int, no_color: bool, decode_as: tuple[str, ...], max_bytes: int,
          max_decompressed: int, show_secrets: bool) -> None:
    """Statistics of CAPTURE: per operation and version, requests, responses, errors and response
    times (min/p50/p90/p99/max); records per topic and partition; clients; paths; conversations."""
    registry, opts = build(decode_as, max_bytes, max_decompressed, show_secrets)
    st = Stats().add_all(iter_capture(capture, registry, opts))
    data = to_json(st)
    if fmt == "json":
        click.echo(json.dumps(data, indent=1, ensure_ascii=False))
        return
    StatsView(make_console(no_color), top).show(data, capture_name(capture), st.rtt)


def _ms(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}"


def _errors(errors: dict[str, int], limit: int = 3) -> str:
    items = list(errors.items())
    text = ", ".join(f"{k}×{n}" for k, n in items[:limit])
    return text + (f", +{len(items) - limit}" if len(items) > limit else "")


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


class StatsView:
    def __init__(self, console: Console, top: int) -> None:
        self.c = console
        self.top = top

    def show(self, d: dict[str, Any], capture: str, sketches: dict[str, QuantileSketch]) -> None:
        protos = ", ".join(f"{p} {n}" for p, n in d["protocols"].items()) or "none"
        self.c.print(f"{capture}: {d['messages']} messages, {_size(d['bytes'])}, {d['duration_s']:.3f} s "
                     f"({protos})", highlight=False, markup=False)
        self.ops(d["operations"])
        for proto, sketch in sorted(sketches.items()):
            self.histogram(f"{proto} response time", sketch)
        self.topics(d["topics"])
        self.topic_messages(d["topic_messages"])
        self.clients(d["clients"])
        self.paths(d["paths"])
        self.conversations(d["conversations"])
        self.diagnostics(d["diagnostics"])

    def table(self, title: str, columns: list[str], rows: list[list[str]], total: int, left: int = 2) -> None:
        """Rows under a title; the first `left` columns are text (left-aligned), the rest numbers,
        except the columns named in TEXT_COLUMNS."""
        if not rows:
            return
        more = f" (top {len(rows)} of {total})" if total > len(rows) else ""
        t = Table(title=title + more, title_justify="left", show_edge=False, pad_edge=False)
        for i, col in enumerate(columns):
            t.add_column(col, justify="left" if i < left or col in TEXT_COLUMNS else "right", overflow="fold")
        for r in rows:
            t.add_row(*r)
        self.c.print()
        self.c.print(t)

    def ops(self, rows: list[dict[str, Any]]) -> None:
        cols = ["protocol", "operation", "ver", "req", "resp", "events", "unanswered", "errors by name", "min ms",
                "p50", "p90", "p99", "max ms"]
        out = []
        for r in rows[: self.top * 5]:
            rt = r["response_time_ms"]
            out.append([r["protocol"], r["op"], "" if r["version"] is None else str(r["version"]),
                        str(r["requests"]), str(r["responses"]), str(r["events"]), str(r["unanswered"]),
                        _errors(r["errors"]), _ms(rt["min"]), _ms(rt["p50"]), _ms(rt["p90"]), _ms(rt["p99"]),
                        _ms(rt["max"])])
        self.table("Service response time", cols, out, len(rows))

    def histogram(self, title: str, sketch: QuantileSketch) -> None:
        bins = sketch.histogram()
        peak = max((n for _, _, n in bins), default=0)
        if not peak:
            return
        self.c.print()
        self.c.print(f"{title} (ms, {sketch.count} responses)", style="bold", highlight=False)
        for lo, hi, n in bins:
            bar = "█" * max(1 if n else 0, round(BAR_WIDTH * n / peak))
            self.c.print(f"  {lo:>10.3f} – {hi:<10.3f} {bar:<{BAR_WIDTH}} {n}", highlight=False, markup=False)

    def topics(self, rows: list[dict[str, Any]]) -> None:
        out = [[r["topic"], "" if r["partition"] is None else str(r["partition"]),
                str(r["produced"]["records"]), _size(r["produced"]["bytes"]),
                str(r["fetched"]["records"]), _size(r["fetched"]["bytes"])] for r in rows[: self.top]]
        self.table("Records per topic and partition", ["topic", "partition", "produced", "produced bytes",
                                                         "fetched", "fetched bytes"], out, len(rows))

    def topic_messages(self, rows: list[dict[str, Any]]) -> None:
        out = [[r["protocol"], r["topic"], str(r["requests"]), str(r["responses"]), str(r["events"]),
                str(r["errors"]), _size(r["bytes"])] for r in rows[: self.top]]
        self.table("Messages per topic", ["protocol", "topic", "requests", "responses", "events", "errors",
                                          "bytes"], out, len(rows))

    def clients(self, rows: list[dict[str, Any]]) -> None:
        out = [[r["protocol"], r["client_id"] or '""', str(r["requests"]), _size(r["bytes_sent"]),
                _size(r["bytes_received"]), str(r["errors"]), str(r["produced"]["records"]),
                _size(r["produced"]["bytes"])] for r in rows[: self.top]]
        self.table("Clients", ["protocol", "client id", "requests", "sent", "received", "errors",
                               "produced records", "produced bytes"], out, len(rows))

    def paths(self, rows: list[dict[str, Any]]) -> None:
        out = [[r["protocol"], r["op"], r["path"], str(r["count"]), _errors(r["errors"]),
                _ms(r["mean_response_time_ms"])] for r in rows[: self.top]]
        self.table("Paths", ["protocol", "operation", "path", "count", "errors by name", "mean ms"], out, len(rows))

    def conversations(self, rows: list[dict[str, Any]]) -> None:
        out = [[str(r["stream"]), r["protocol"], r["client"], r["server"], str(r["messages"]),
                _size(r["bytes"]), str(r["errors"]), _ms(r["mean_response_time_ms"]),
                _ms(r["max_response_time_ms"])] for r in rows[: self.top]]
        self.table("Conversations", ["stream", "protocol", "client", "server", "messages", "bytes", "errors",
                                     "mean ms", "max ms"], out, len(rows))

    def diagnostics(self, rows: list[dict[str, Any]]) -> None:
        out = [[r["severity"], r["key"], str(r["count"])] for r in rows[: self.top]]
        self.table("Diagnostics", ["severity", "key", "count"], out, len(rows))
