"""The report page: a header, then a section per kind of chart data present, in a fixed order
(SECTIONS), on one self-contained HTML page. plotly.js is inlined once; the figures go in as
one JSON document that a fixed script hands to Plotly, so nothing from the capture is ever
written as code, and every text from it is escaped."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from html import escape
from typing import Any

from kdissect.report import figures as fig
from kdissect.report import tables
from kdissect.report.data import MAX_SERIES, as_dict, as_list, num, text
from kdissect.report.figures import Figure, TimeAxis

Block = str | Figure  # safe HTML, or a figure to draw
Builder = Callable[[dict[str, Any], dict[str, Any], TimeAxis], list[Block]]

# No network at all: inline scripts and styles, images only from data: and blob: (Plotly draws
# heatmaps as images); plotly.js compiles a few functions at load, hence 'unsafe-eval'.
CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
       "img-src data: blob:; font-src data:")
PLOTLY_CONFIG = {"responsive": True, "displaylogo": False, "scrollZoom": False,
                 "modeBarButtonsToRemove": ["select2d", "lasso2d"]}
# Hands each figure of the JSON document to Plotly; fixed text, no data in it.
BOOT = """(function () {
  "use strict";
  var doc = JSON.parse(document.getElementById("kd-figures").textContent);
  doc.figures.forEach(function (f) { Plotly.newPlot(f.id, f.data, f.layout, doc.config); });
})();"""
STYLE = """
body { margin: 0; background: #fff; color: #1a1a1a;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
main { max-width: 1100px; margin: 0 auto; padding: 16px 24px 48px; }
h1 { font-size: 24px; margin: 8px 0 4px; word-break: break-all; }
h2 { font-size: 19px; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 2px solid #d0d7de; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.meta { color: #444; margin: 0 0 6px; }
nav a { margin-right: 14px; color: #0b57b0; text-decoration: none; }
.chart { width: 100%; margin: 10px 0; border: 1px solid #e3e3e3; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 12px; font-size: 13px; }
th, td { border: 1px solid #d8dee4; padding: 4px 6px; text-align: left; vertical-align: top;
  overflow-wrap: anywhere; }
th { background: #f3f5f7; font-weight: 600; }
table.rows td { font-variant-numeric: tabular-nums; }
table.findings { table-layout: fixed; }
col.sev { width: 84px; } col.cat { width: 96px; } col.when { width: 84px; } col.ev { width: 120px; }
col.hint { width: 34%; }
td.when { white-space: nowrap; }
td.hint, .muted { color: #555; }
.muted { font-size: 12px; }
.more { color: #555; font-style: italic; }
.badge { display: inline-block; min-width: 56px; padding: 1px 6px; border-radius: 3px;
  font-size: 12px; font-weight: 600; text-align: center; color: #fff; }
.badge.error { background: #c62828; } .badge.warning { background: #e0a100; color: #1a1a1a; }
.badge.note { background: #0b6fb0; } .badge.chat { background: #6e7781; }
footer { margin-top: 40px; color: #777; font-size: 12px; }
"""


@dataclass(frozen=True, slots=True)
class Section:
    anchor: str
    heading: str
    build: Builder


def _charts(pick: Callable[[dict[str, Any], TimeAxis], list[Figure]]) -> Builder:
    return lambda doc, charts, axis: list(pick(charts, axis))


def _findings(doc: dict[str, Any], charts: dict[str, Any], axis: TimeAxis) -> list[Block]:
    return list(tables.findings(doc.get("findings"), num(doc.get("first_ts"))))


def _response_time(doc: dict[str, Any], charts: dict[str, Any], axis: TimeAxis) -> list[Block]:
    _, quiet = fig.busiest(charts.get("latency_heatmap"))
    note = (f'<p class="more">No heatmap for {len(quiet)} quieter operations: '
            f'{escape(", ".join(quiet[:MAX_SERIES]))}</p>') if quiet else ""
    return [*fig.response_time(charts), *fig.latency_heatmaps(charts, axis), *([note] if note else [])]


def _compression(doc: dict[str, Any], charts: dict[str, Any], axis: TimeAxis) -> list[Block]:
    table = tables.keyed_table(charts.get("compression"), "codec")
    return [*fig.compression(charts), *([table] if table else [])]


def _any(key: str, title: str, unit: str) -> Builder:
    """Data whose shape decides its form: rows -> a table; {name: {t, v}} -> lines of points;
    {name: [value per bin]} -> lines over the bins; {name: {column: value}} -> a keyed table."""
    def build(doc: dict[str, Any], charts: dict[str, Any], axis: TimeAxis) -> list[Block]:
        value = charts.get(key)
        if isinstance(value, list):
            return [t] if (t := tables.table(value)) else []
        values = list(as_dict(value).values())
        if not values:
            return []
        if all(isinstance(v, dict) and "t" in v and "v" in v for v in values):
            f = fig.points(value, title, unit)
        elif all(isinstance(v, list) and all(num(x) is not None or x is None for x in v[:50]) for v in values):
            f = fig.binned(value, axis, title, f"{unit} per bin", per_second=False)
        else:
            return [t] if (t := tables.keyed_table(value, "key")) else []
        return [f] if f else []
    return build


SECTIONS: tuple[Section, ...] = (
    Section("findings", "Findings", _findings),
    Section("io", "I/O graphs", _charts(fig.io_figures)),
    Section("response-time", "Response time", _response_time),
    Section("lag", "Consumer lag", _charts(lambda c, a: fig.lag(c))),
    Section("rebalances", "Rebalance timeline", _charts(lambda c, a: fig.rebalances(c))),
    Section("top-talkers", "Top talkers", _charts(lambda c, a: fig.top_talkers(c))),
    Section("compression", "Compression", _compression),
    Section("producers", "Producers", _any("producers", "Producers", "value")),
    Section("errors", "Errors over time", _charts(fig.errors)),
    Section("throttle", "Throttling", _charts(lambda c, a: fig.throttle(c))),
    Section("tcp", "TCP conversations", _any("tcp", "TCP", "value")),
    Section("zookeeper-sessions", "ZooKeeper sessions", _charts(lambda c, a: fig.zookeeper_sessions(c))),
    Section("pulsar-permits", "Pulsar flow control", _any("pulsar_permits", "Flow permits per consumer", "permits")),
    Section("rocketmq-codes", "RocketMQ response codes", _any("rocketmq_codes", "RocketMQ response codes", "value")),
)


def _when(ts: float | None) -> str:
    if ts is None:
        return "?"
    try:
        return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    except (OverflowError, OSError, ValueError):
        return f"{ts:.6f}"


def header(doc: dict[str, Any], title: str) -> str:
    first, last = num(doc.get("first_ts")), num(doc.get("last_ts"))
    span = "no messages" if first is None else (
        f"{_when(first)} – {_when(last)} UTC ({(last or first) - first:.3f} s)")
    messages = num(doc.get("messages")) or 0
    counts = {s: 0 for s in tables.SEVERITIES}
    for f in as_list(doc.get("findings")):
        s = text(as_dict(f).get("severity"))
        counts[s if s in counts else "chat"] += 1
    tally = " ".join(f"{tables.badge(s)}&nbsp;{n:,}" for s, n in counts.items() if n) or "none"
    return (f"<h1>{escape(text(title, 300))}</h1>"
            f'<p class="meta">{span} · {int(messages):,} messages</p>'
            f'<p class="meta">Findings: {tally}</p>')


def _json_script(doc: Any) -> str:
    """JSON that can sit inside <script>: no "<", ">" or "&" that could end it or start a tag."""
    s = json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for ch, code in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"),
                     ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        s = s.replace(ch, code)
    return s


def _sections(doc: dict[str, Any]) -> tuple[list[tuple[Section, list[str]]], list[dict[str, Any]]]:
    """Each section that has something to show, with its HTML blocks; and the figures to draw."""
    charts = as_dict(doc.get("charts"))
    axis = fig.time_axis(charts)
    shown: list[tuple[Section, list[str]]] = []
    drawn: list[dict[str, Any]] = []
    for section in SECTIONS:
        html_blocks = []
        for block in section.build(doc, charts, axis):
            if isinstance(block, str):
                html_blocks.append(block)
                continue
            fid = f"fig-{len(drawn) + 1}"
            drawn.append({"id": fid, **block})
            height = int(block["layout"].get("height", 320))
            html_blocks.append(f'<div class="chart" id="{fid}" style="height:{height}px"></div>')
        if html_blocks:
            shown.append((section, html_blocks))
    return shown, drawn


def render(result: dict[str, Any], title: str) -> str:
    """The whole page for an expert result (`Result.to_json()`)."""
    from plotly.offline import get_plotlyjs

    doc = as_dict(result)
    shown, drawn = _sections(doc)
    nav = "".join(f'<a href="#{s.anchor}">{s.heading}</a>' for s, _ in shown)
    body = "".join(f'<section id="{s.anchor}"><h2>{s.heading}</h2>{"".join(blocks)}</section>'
                   for s, blocks in shown)
    scripts = ""
    if drawn:
        scripts = (f"<script>{get_plotlyjs()}</script>"
                   f'<script type="application/json" id="kd-figures">'
                   f'{_json_script({"config": PLOTLY_CONFIG, "figures": drawn})}</script>'
                   f"<script>{BOOT}</script>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(text(title, 300))} · kdissect report</title><style>{STYLE}</style></head>"
            f"<body><main>{header(doc, title)}<nav>{nav}</nav>{body}"
            "<footer>Written by kdissect report. Times are seconds since the first message "
            "unless marked UTC.</footer></main>"
            f"{scripts}</body></html>\n")
