"""`kdissect stats` as tables for people (the TUI's statistics screen shows the same): the
JSON statistics (analysis.report.to_json) as rich tables fitted to the console's width, and
response-time histograms."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from rich.console import Console

from kdissect.analysis.sketch import QuantileSketch
from kdissect.render.fitted import ADDRESS, Col, fitted_table
from kdissect.text import size_text

BAR_WIDTH = 40  # the longest histogram bar, narrower when the console is
HISTOGRAM_LABELS = 36  # the width of a histogram line without its bar

# The columns of each table: (header, priority, text). On a narrow console the lowest priority
# goes first (render/fitted.py); None is always shown; text columns are left-aligned and wrap.
OPS_COLUMNS = [Col("protocol", 2, True), Col("operation", None, True), Col("ver", 9), Col("req", 8),
               Col("resp", 6), Col("events", 1), Col("unanswered", 5), Col("errors by name", 13, True),
               Col("expected", 12), Col("long polls", 7), Col("min ms", 0), Col("p50", 11), Col("p90", 3),
               Col("p99", 10), Col("max ms", 4)]
TOPIC_COLUMNS = [Col("topic", None, True), Col("partition", 5), Col("produced", 4), Col("produced bytes", 2),
                 Col("fetched", 3), Col("fetched bytes", 1)]
TOPIC_MESSAGE_COLUMNS = [Col("protocol", 1, True), Col("topic", None, True), Col("requests", 6),
                         Col("responses", 5), Col("events", 2), Col("errors", 7), Col("bytes", 3)]
CLIENT_COLUMNS = [Col("protocol", 2, True), Col("client id", None, True), Col("requests", 7), Col("sent", 5),
                  Col("received", 4), Col("errors", 6), Col("produced records", 3), Col("produced bytes", 1)]
PATH_COLUMNS = [Col("protocol", 1, True), Col("operation", 6, True), Col("path", None, True), Col("count", 5),
                Col("errors by name", 4, True), Col("expected", 3), Col("mean ms", 2)]
CONVERSATION_COLUMNS = [Col("stream", None), Col("protocol", 4, True), Col("client", 10, True, ADDRESS),
                        Col("server", 10, True, ADDRESS), Col("messages", 6), Col("bytes", 2), Col("errors", 9),
                        Col("expected", 5), Col("long polls", 1), Col("mean ms", 3), Col("max ms", 0)]
DIAGNOSTIC_COLUMNS = [Col("severity", 1, True), Col("key", None, True), Col("count", None)]
R = TypeVar("R")


def top_rows(rows: list[R], n: int, weight: Callable[[R], int]) -> list[R]:
    """The n heaviest rows (ties: the earlier), in their order."""
    if len(rows) <= n:
        return rows
    chosen = set(sorted(range(len(rows)), key=lambda i: (-weight(rows[i]), i))[:n])
    return [r for i, r in enumerate(rows) if i in chosen]


def _ms(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}"


def _errors(errors: dict[str, int], limit: int = 3) -> str:
    items = list(errors.items())
    text = ", ".join(f"{k}×{n}" for k, n in items[:limit])
    return text + (f", +{len(items) - limit}" if len(items) > limit else "")


class StatsView:
    def __init__(self, console: Console, top: int) -> None:
        self.c = console
        self.top = top

    def show(self, d: dict[str, Any], capture: str, sketches: dict[str, QuantileSketch]) -> None:
        protos = ", ".join(f"{p} {n}" for p, n in d["protocols"].items()) or "none"
        self.c.print(f"{capture}: {d['messages']} messages, {size_text(d['bytes'])}, {d['duration_s']:.3f} s "
                     f"({protos})", highlight=False, markup=False)
        self.ops(d["operations"])
        for proto, sketch in sorted(sketches.items()):
            polls = sum(r["long_polls"] for r in d["operations"] if r["protocol"] == proto)
            self.histogram(f"{proto} response time", sketch, polls)
        self.topics(d["topics"])
        self.topic_messages(d["topic_messages"])
        self.clients(d["clients"])
        self.paths(d["paths"])
        self.conversations(d["conversations"])
        self.diagnostics(d["diagnostics"])

    def table(self, title: str, cols: list[Col], rows: list[list[str]], total: int) -> None:
        """Rows under a title, the columns that fit the console's width (render/fitted.py)."""
        if not rows:
            return
        more = f" (top {len(rows)} of {total})" if total > len(rows) else ""
        fit = fitted_table(cols, rows, self.c.width, title=title + more, title_justify="left")
        self.c.print()
        self.c.print(fit.table)
        if fit.dropped:
            self.c.print(f"(too narrow for: {', '.join(fit.dropped)}; -F json has every column)", style="dim",
                         highlight=False, markup=False)

    def ops(self, rows: list[dict[str, Any]]) -> None:
        out = []
        for r in top_rows(rows, self.top, lambda r: r["requests"] + r["responses"] + r["events"]):
            rt = r["response_time_ms"]
            out.append([r["protocol"], r["op"], "" if r["version"] is None else str(r["version"]),
                        str(r["requests"]), str(r["responses"]), str(r["events"]), str(r["unanswered"]),
                        _errors(r["errors"]), str(r["expected_count"]), str(r["long_polls"]), _ms(rt["min"]),
                        _ms(rt["p50"]), _ms(rt["p90"]), _ms(rt["p99"]), _ms(rt["max"])])
        self.table("Service response time", OPS_COLUMNS, out, len(rows))

    def histogram(self, title: str, sketch: QuantileSketch, long_polls: int = 0) -> None:
        bins = sketch.histogram()
        peak = max((n for _, _, n in bins), default=0)
        if not peak:
            return
        self.c.print()
        polls = f"; {long_polls} long polls left out" if long_polls else ""
        self.c.print(f"{title} (ms, {sketch.count} responses{polls})", style="bold", highlight=False)
        most = max(8, min(BAR_WIDTH, self.c.width - HISTOGRAM_LABELS))
        for lo, hi, n in bins:
            bar = "█" * max(1 if n else 0, round(most * n / peak))
            self.c.print(f"  {lo:>10.3f} – {hi:<10.3f} {bar:<{most}} {n}", highlight=False, markup=False)

    def topics(self, rows: list[dict[str, Any]]) -> None:
        out = [[r["topic"], "" if r["partition"] is None else str(r["partition"]),
                str(r["produced"]["records"]), size_text(r["produced"]["bytes"]),
                str(r["fetched"]["records"]), size_text(r["fetched"]["bytes"])]
               for r in top_rows(rows, self.top, lambda r: r["produced"]["bytes"] + r["fetched"]["bytes"])]
        self.table("Records per topic and partition", TOPIC_COLUMNS, out, len(rows))

    def topic_messages(self, rows: list[dict[str, Any]]) -> None:
        out = [[r["protocol"], r["topic"], str(r["requests"]), str(r["responses"]), str(r["events"]),
                str(r["errors"]), size_text(r["bytes"])] for r in top_rows(rows, self.top, lambda r: r["bytes"])]
        self.table("Messages per topic", TOPIC_MESSAGE_COLUMNS, out, len(rows))

    def clients(self, rows: list[dict[str, Any]]) -> None:
        out = [[r["protocol"], r["client_id"] or '""', str(r["requests"]), size_text(r["bytes_sent"]),
                size_text(r["bytes_received"]), str(r["errors"]), str(r["produced"]["records"]),
                size_text(r["produced"]["bytes"])] for r in top_rows(rows, self.top, lambda r: r["requests"])]
        self.table("Clients", CLIENT_COLUMNS, out, len(rows))

    def paths(self, rows: list[dict[str, Any]]) -> None:
        out = [[r["protocol"], r["op"], r["path"], str(r["count"]), _errors(r["errors"]),
                str(sum(r["expected"].values())), _ms(r["mean_response_time_ms"])]
               for r in top_rows(rows, self.top, lambda r: r["count"])]
        self.table("Paths", PATH_COLUMNS, out, len(rows))

    def conversations(self, rows: list[dict[str, Any]]) -> None:
        out = [[str(r["stream"]), r["protocol"], r["client"], r["server"], str(r["messages"]),
                size_text(r["bytes"]), str(r["errors"]), str(r["expected"]), str(r["long_polls"]),
                _ms(r["mean_response_time_ms"]), _ms(r["max_response_time_ms"])]
               for r in top_rows(rows, self.top, lambda r: r["messages"])]
        self.table("Conversations", CONVERSATION_COLUMNS, out, len(rows))

    def diagnostics(self, rows: list[dict[str, Any]]) -> None:
        out = [[r["severity"], r["key"], str(r["count"])] for r in top_rows(rows, self.top, lambda r: r["count"])]
        self.table("Diagnostics", DIAGNOSTIC_COLUMNS, out, len(rows))
