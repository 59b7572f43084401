"""The report's charts as Plotly figures (plain dicts: `data` and `layout`, JSON-ready), built
from the expert's chart data (`Result.to_json()["charts"]`, docs/report.md). Every text that
comes from the capture goes in through `data.label`; every number through `data.num`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kdissect.report.data import (
    MAX_SERIES,
    MAX_VALUES,
    as_dict,
    as_list,
    entries,
    label,
    num,
    nums,
    rate,
    short,
    text,
)

Figure = dict[str, Any]

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"
# One colour per protocol, in every chart that draws protocols.
PROTOCOL_COLOURS = {"kafka": "#1f5fbf", "zookeeper": "#2e8b3a", "pulsar": "#8e3fb0", "rocketmq": "#d9770b"}
# Everything else (topics, operations, partitions, event kinds) takes the next of these.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#393b79", "#ad494a", "#637939", "#8c6d31", "#7b4173", "#3182bd",
           "#e6550d", "#31a354", "#756bb1", "#636363")
SECONDS = "seconds since the first message"
HEAT_CLEAR, HEAT_LOW, HEAT_HIGH = "rgba(255,255,255,0)", "#c6dbef", "#08306b"
MAX_HEATMAPS = 10  # latency heatmaps drawn: the busiest operations
MAX_POINTS = 10000  # points of one chart: past it every trace keeps every n-th point
MAX_GROUPS = 20  # rebalance timelines drawn; one per group
MAX_MEMBERS = 60  # rows of one rebalance timeline
MAX_BARS = 30  # bars of one top-talkers chart


@dataclass(frozen=True, slots=True)
class TimeAxis:
    """The bins every binned series shares: bins of `bin_s` seconds from the first message."""

    bin_s: float



def time_axis(charts: dict[str, Any]) -> TimeAxis:
    width = num(as_dict(charts.get("time")).get("bin_s"))
    return TimeAxis(width if width and width > 0 else 1.0)


def colour(key: str, i: int) -> str:
    return PROTOCOL_COLOURS.get(key) or PALETTE[i % len(PALETTE)]


def figure(traces: list[dict[str, Any]], title: str, ytitle: str, *, height: int = 320,
           xtitle: str = SECONDS, **layout: Any) -> Figure:
    """A figure in the report's style: `title` and the axis titles are already Plotly text."""
    axis = {"gridcolor": "#e6e6e6", "zeroline": False, "showline": True, "linecolor": "#9a9a9a",
            "automargin": True}
    base: dict[str, Any] = {
        "height": height, "margin": {"l": 70, "r": 20, "t": 44, "b": 50},
        "title": {"text": title, "x": 0.01, "font": {"size": 15}},
        "font": {"family": FONT, "size": 12, "color": "#222"},
        "paper_bgcolor": "white", "plot_bgcolor": "white", "hovermode": "closest",
        "xaxis": {**axis, "title": {"text": xtitle}}, "yaxis": {**axis, "title": {"text": ytitle}},
        "legend": {"font": {"size": 11}},
    }
    for k, v in layout.items():
        base[k] = {**base[k], **v} if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return {"data": traces, "layout": base}


def _legend_height(n: int, base: int = 320) -> int:
    return min(max(base, 20 * n + 110), 900)


def binned(series: Any, axis: TimeAxis, title: str, ytitle: str, per_second: bool = True) -> Figure | None:
    """Lines of per-bin counts ({name: [count per bin]}), as rates when `per_second`."""
    traces = []
    for i, (name, values) in enumerate(entries(series)):
        v = nums(values)
        if not any(v):
            continue
        traces.append({"type": "scatter", "mode": "lines", "name": label(name), "x0": 0, "dx": axis.bin_s,
                       "y": rate(v, axis.bin_s) if per_second else v,
                       "line": {"shape": "hv", "width": 1.5, "color": colour(name, i)},
                       "hovertemplate": "%{x:.3f} s: %{y:.4g}"})
    if not traces:
        return None
    return figure(traces, title, ytitle, height=_legend_height(len(traces)), showlegend=True)


def points(series: Any, title: str, ytitle: str, *, log: bool = False, mode: str = "lines+markers") -> Figure | None:
    """Points over time ({name: {t, v, sampled}}), a trace each; past MAX_POINTS in all, every
    trace keeps every n-th point (and says it is sampled)."""
    found = []
    for name, p in entries(series):
        p = as_dict(p)
        t, v = nums(p.get("t")), nums(p.get("v"))
        n = min(len(t), len(v))
        if any(x is not None for x in v[:n]):
            found.append((name, t[:n], v[:n], p.get("sampled") is True))
    stride = -(-sum(len(f[1]) for f in found) // MAX_POINTS)
    traces = []
    for i, (name, t, v, sampled) in enumerate(found):
        shown = name + (" (sampled)" if sampled or stride > 1 else "")
        traces.append({"type": "scatter", "mode": mode, "name": label(shown), "x": t[::stride], "y": v[::stride],
                       "marker": {"size": 5, "color": colour(name, i)}, "line": {"width": 1.5},
                       "hovertemplate": "%{x:.3f} s: %{y:.4g}"})
    if not traces:
        return None
    return figure(traces, title, ytitle, height=_legend_height(len(traces)), showlegend=True,
                  yaxis={"type": "log"} if log else {})


def io_figures(charts: dict[str, Any], axis: TimeAxis) -> list[Figure]:
    io = as_dict(charts.get("io"))
    specs = (("messages", "Messages per second, per protocol", "messages/s"),
             ("bytes", "Bytes per second, per protocol", "bytes/s"),
             ("topic_messages", "Messages per second, per topic", "messages/s"),
             ("topic_bytes", "Bytes per second, per topic", "bytes/s"))
    return [f for key, title, unit in specs if (f := binned(io.get(key), axis, title, unit))]


def response_time(charts: dict[str, Any]) -> list[Figure]:
    f = points(charts.get("response_time"), "Response time per operation", "ms (log)", log=True, mode="markers")
    if f is None:
        return []
    ms = [v for t in f["data"] for v in t["y"] if v is not None and v > 0]
    if ms:
        lo, hi = math.log10(min(ms)) - 0.1, math.log10(max(ms)) + 0.1
        f["layout"]["yaxis"].update(range=[lo, hi], **log_ticks(lo, hi))
    return [f]


def _heat_edges(edges: list[Any]) -> list[float] | None:
    """Row edges for a log axis: a first edge of 0 and a last of None (no bound) become the
    next bucket's width away (a quarter decade), as the buckets are spaced."""
    e = [short(x) for x in edges]
    step = 10 ** 0.25
    if len(e) >= 2 and e[0] == 0 and e[1]:
        e[0] = e[1] / step
    if len(e) >= 2 and e[-1] is None and e[-2]:
        e[-1] = e[-2] * step
    out = [x for x in e if x is not None and x > 0]
    if len(out) != len(e) or any(b <= a for a, b in zip(out, out[1:], strict=False)):
        return None
    return out


def log_ticks(lo: float, hi: float) -> dict[str, Any]:
    """Ticks of a log axis from 10**lo to 10**hi as plain numbers: 1, 2 and 5 of each decade,
    or only the 1s when that would be too many."""
    decades = range(math.floor(lo), math.ceil(hi) + 1)
    for steps in ((1, 2, 5), (1,)):
        vals = [m * 10.0 ** d for d in decades for m in steps if lo - 1e-9 <= math.log10(m) + d <= hi + 1e-9]
        if len(vals) <= 8:
            break
    return {"tickmode": "array", "tickvals": vals, "ticktext": [f"{v:g}" for v in vals]}


def latency_heatmap(op: str, data: Any, axis: TimeAxis) -> Figure | None:
    d = as_dict(data)
    rows = [nums(r) for r in as_list(d.get("counts"))[:64]]
    edges = _heat_edges(as_list(d.get("edges_ms")))
    if not rows or edges is None or len(edges) != len(rows) + 1:
        return None
    width = max(len(r) for r in rows)
    z = [[v or 0 for v in r + [None] * (width - len(r))] for r in rows]
    if not any(v for r in z for v in r):
        return None
    top = max(v or 0 for r in z for v in r)
    # an empty cell (0) is see-through; 1 response and up go from light to dark
    scale = [[0, HEAT_CLEAR], [min(0.5 / top, 0.5), HEAT_CLEAR], [min(1 / top, 0.75), HEAT_LOW], [1, HEAT_HIGH]]
    trace = {"type": "heatmap", "x0": axis.bin_s / 2, "dx": axis.bin_s, "y": edges, "z": z, "colorscale": scale,
             "zmin": 0, "zmax": top,
             "colorbar": {"title": {"text": "responses"}, "thickness": 12, "dtick": max(1, math.ceil(top / 5))},
             "hovertemplate": "%{x:.3f} s, about %{y:.3g} ms: %{z} responses<extra></extra>"}
    lo, hi = math.log10(edges[0]), math.log10(edges[-1])
    pad = max(0.0, (1.0 - (hi - lo)) / 2)  # at least a decade shown
    span = [lo - pad, hi + pad]
    return figure([trace], f"Latency heatmap: {label(op)}", "ms (log)", height=240,
                  yaxis={"type": "log", "range": span, **log_ticks(span[0], span[1])})


def busiest(heatmaps: Any) -> tuple[list[tuple[str, Any]], list[str]]:
    """The MAX_HEATMAPS operations with the most responses (in their order), and the others."""
    ops = entries(heatmaps, MAX_VALUES)
    weight = {op: sum(v or 0 for r in as_list(as_dict(d).get("counts")) for v in nums(r)) for op, d in ops}
    chosen = set(sorted(weight, key=lambda op: -weight[op])[:MAX_HEATMAPS])
    return [(op, d) for op, d in ops if op in chosen], [op for op, _ in ops if op not in chosen]


def latency_heatmaps(charts: dict[str, Any], axis: TimeAxis) -> list[Figure]:
    drawn, _ = busiest(charts.get("latency_heatmap"))
    return [f for op, d in drawn if (f := latency_heatmap(op, d, axis))]


def lag(charts: dict[str, Any]) -> list[Figure]:
    f = points(charts.get("lag"), "Consumer lag per partition", "records behind")
    return [f] if f else []


def throttle(charts: dict[str, Any]) -> list[Figure]:
    f = points(charts.get("throttle"), "Throttle time", "ms")
    return [f] if f else []


def errors(charts: dict[str, Any], axis: TimeAxis) -> list[Figure]:
    f = binned(charts.get("errors"), axis, "Error responses per second", "errors/s")
    return [f] if f else []


def _event_kinds(groups: list[tuple[str, Any]]) -> dict[str, str]:
    """A colour per kind of event, the same in every timeline."""
    kinds: dict[str, str] = {}
    for _, events in groups:
        for e in as_list(events)[:MAX_VALUES]:
            k = text(as_dict(e).get("event")) or "?"
            if k not in kinds and len(kinds) < MAX_SERIES:
                kinds[k] = PALETTE[len(kinds) % len(PALETTE)]
    return kinds


def rebalances(charts: dict[str, Any]) -> list[Figure]:
    groups = entries(charts.get("rebalances"), MAX_GROUPS)
    kinds = _event_kinds(groups)
    return [f for g, events in groups
            if (f := timeline(as_list(events), kinds, "member", f"Rebalances of group {label(g)}"))]


def zookeeper_sessions(charts: dict[str, Any]) -> list[Figure]:
    events = as_list(charts.get("zookeeper_sessions"))
    f = timeline(events, _event_kinds([("", events)]), "session", "ZooKeeper session events")
    return [f] if f else []


def _details(e: dict[str, Any], row: str) -> str:
    """An event's kind and its other facts, for its hover text."""
    facts = [f"{text(k)} {text(v)}" for k, v in list(e.items())[:MAX_SERIES]
             if k not in ("t", "event", row) and v not in (None, "")]
    return label(", ".join([text(e.get("event")) or "?", *facts]))


def timeline(events: list[Any], kinds: dict[str, str], row: str, title: str) -> Figure | None:
    """Events ({t, event, <row>, ...}) on a row per value of `row` (a member, a session), a
    marker each, a colour (and a legend entry) per kind of event; each kind has its own lane
    in a row, so events a moment apart do not hide each other."""
    by_kind: dict[str, dict[str, list[Any]]] = {}
    rows: dict[str, int] = {}
    lanes = {k: (i / (len(kinds) - 1) - 0.5) * 0.6 if len(kinds) > 1 else 0.0 for i, k in enumerate(kinds)}
    for e in events[:MAX_VALUES]:
        e = as_dict(e)
        t, kind, who = short(e.get("t")), text(e.get("event")) or "?", text(e.get(row)) or "(none)"
        if t is None or kind not in kinds or (who not in rows and len(rows) >= MAX_MEMBERS):
            continue
        y = rows.setdefault(who, len(rows))
        cols = by_kind.setdefault(kind, {"x": [], "y": [], "text": []})
        cols["x"].append(t)
        cols["y"].append(round(y + lanes[kind], 3))
        cols["text"].append(label(who) + "<br>" + _details(e, row))
    if not by_kind:
        return None
    traces = [{"type": "scatter", "mode": "markers", "name": label(k), **cols,
               "marker": {"size": 10, "color": kinds[k], "symbol": "diamond", "line": {"width": 1, "color": "#333"}},
               "hovertemplate": "%{x:.3f} s %{text}<extra></extra>"} for k, cols in by_kind.items()]
    height = min(max(200, 34 * len(rows) + 120), 900)
    return figure(traces, title, row, height=height,
                  yaxis={"tickmode": "array", "tickvals": list(rows.values()), "ticktext": [label(r) for r in rows],
                         "range": [len(rows) - 0.5, -0.5], "showgrid": False, "zeroline": False})


def _bars(rows: list[dict[str, Any]], name: Any, ways: tuple[tuple[str, Any], ...], title: str) -> Figure | None:
    """Horizontal stacked bars, heaviest on top: a row per bar, a trace per way (name, value of a row)."""
    rows = [as_dict(r) for r in rows[:MAX_BARS]]
    if not rows:
        return None
    y = [label(name(r)) for r in rows]
    traces = [{"type": "bar", "orientation": "h", "name": way, "y": y, "x": [num(value(r)) or 0 for r in rows],
               "marker": {"color": PALETTE[i]}, "hovertemplate": "%{y}: %{x:,} bytes"}
              for i, (way, value) in enumerate(ways)]
    return figure(traces, title, "", xtitle="bytes", height=min(max(220, 26 * len(rows) + 110), 900),
                  barmode="stack", yaxis={"type": "category", "autorange": "reversed"}, margin={"l": 160})


def _flow(way: str) -> Any:
    return lambda r: as_dict(r.get(way)).get("bytes")


def top_talkers(charts: dict[str, Any]) -> list[Figure]:
    top = as_dict(charts.get("top_talkers"))
    figs = (
        _bars(as_list(top.get("clients")), lambda r: f"{text(r.get('protocol'))} {text(r.get('client_id'))}",
              (("sent", lambda r: r.get("bytes_sent")), ("received", lambda r: r.get("bytes_received"))),
              "Top clients by bytes"),
        _bars(as_list(top.get("topics")), lambda r: text(r.get("topic")),
              (("produced", _flow("produced")), ("fetched", _flow("fetched"))), "Top topics by record bytes"),
        _bars(as_list(top.get("partitions")), lambda r: f"{text(r.get('topic'))}/{text(r.get('partition'))}",
              (("produced", _flow("produced")), ("fetched", _flow("fetched"))), "Top partitions by record bytes"),
    )
    return [f for f in figs if f]


def compression(charts: dict[str, Any]) -> list[Figure]:
    codecs = [(c, as_dict(v)) for c, v in entries(charts.get("compression"))]
    if not codecs:
        return []
    names = [label(c) for c, _ in codecs]
    traces = [{"type": "bar", "name": way, "x": names, "y": [num(v.get(key)) or 0 for _, v in codecs],
               "marker": {"color": PALETTE[i]}, "hovertemplate": "%{x}: %{y:,} bytes"}
              for i, (way, key) in enumerate((("on the wire", "wire_bytes"), ("uncompressed", "uncompressed_bytes")))]
    return [figure(traces, "Record batch bytes per codec", "bytes", xtitle="codec", barmode="group",
                   xaxis={"type": "category"})]
