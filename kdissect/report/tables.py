"""HTML tables of the report: the findings, and any list of rows the analyzers send (producers,
TCP conversations...), every cell escaped."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from kdissect.report.data import as_dict, as_list, num, text

SEVERITIES = ("error", "warning", "note", "chat")
SEVERITY_NAMES = {"error": "Errors", "warning": "Warnings", "note": "Notes", "chat": "Chat"}
MAX_ROWS = 200  # rows of one table
MAX_COLUMNS = 12
MAX_FINDINGS = 500  # findings listed per severity
LONG_TEXT = 1000  # characters of a summary or a hint


def cell(v: Any) -> str:
    """A value as escaped table text: numbers grouped, nested values as compact JSON."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    n = num(v)
    if n is not None:
        if isinstance(n, int):
            return f"{n:,}"
        return f"{n:,.3f}".rstrip("0").rstrip(".") if abs(n) >= 1 else f"{n:.4g}"
    if isinstance(v, (dict, list)):
        v = json.dumps(v, ensure_ascii=False, default=str, separators=(", ", ": "))
    return escape(text(v))


def columns(rows: list[dict[str, Any]]) -> list[str]:
    """The keys of the rows, in the order they first come, at most MAX_COLUMNS."""
    out: list[str] = []
    for r in rows[:50]:
        for k in r:
            if k not in out and len(out) < MAX_COLUMNS:
                out.append(k)
    return out


def table(rows: Any, lead: str | None = None) -> str:
    """A table of dict rows ("" when there is none); `lead` names a first column taken from
    each row's "_key"."""
    dict_rows = [r for r in as_list(rows) if isinstance(r, dict)]
    if not dict_rows:
        return ""
    cols = [c for c in columns(dict_rows) if c != "_key"]
    head = ([escape(lead)] if lead else []) + [escape(text(c).replace("_", " ")) for c in cols]
    body = []
    for r in dict_rows[:MAX_ROWS]:
        cells = ([cell(r.get("_key"))] if lead else []) + [cell(r.get(c)) for c in cols]
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    more = len(dict_rows) - MAX_ROWS
    note = f'<p class="more">{more:,} more rows not shown</p>' if more > 0 else ""
    return ('<table class="rows"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head)
            + "</tr></thead><tbody>" + "".join(body) + "</tbody></table>" + note)


def keyed_table(data: Any, lead: str) -> str:
    """A table of {key: {column: value}}, or {key: [rows]}: a row per value, its key first
    (in a column named `lead`)."""
    rows: list[dict[str, Any]] = []
    for k, v in list(as_dict(data).items())[:MAX_ROWS]:
        for r in (as_list(v) if isinstance(v, list) else [v])[:MAX_ROWS]:
            if isinstance(r, dict):
                rows.append({"_key": k, **r})
    return table(rows, lead=lead)


def badge(severity: str) -> str:
    s = severity if severity in SEVERITIES else "chat"
    return f'<span class="badge {s}">{escape(s)}</span>'


def _seconds(ts: Any, origin: float | None) -> str:
    t = num(ts)
    return "" if t is None or origin is None else f"+{t - origin:.3f} s"


def _evidence(f: dict[str, Any]) -> str:
    frames = [n for n in as_list(f.get("frames")) if num(n) is not None]
    streams = [n for n in as_list(f.get("streams")) if num(n) is not None]
    count = num(f.get("count")) or 0
    parts = []
    if frames:
        more = "…" if count > len(frames) > 1 else ""
        parts.append("frames " + ", ".join(cell(n) for n in frames) + more)
    if streams:
        parts.append("streams " + ", ".join(cell(n) for n in streams))
    if count > 1:
        parts.append(f"{int(count):,} times")
    return "<br>".join(parts)


def finding_row(f: dict[str, Any], origin: float | None) -> str:
    title = escape(text(f.get("title")))
    summary = escape(text(f.get("summary"), LONG_TEXT))
    return ("<tr>"
            f"<td>{badge(text(f.get('severity')))}</td>"
            f"<td>{escape(text(f.get('category')))}<br><span class=\"muted\">{escape(text(f.get('protocol')))}</span></td>"
            f"<td>{summary}<br><span class=\"muted\">{title}</span></td>"
            f"<td class=\"when\">{_seconds(f.get('first_ts'), origin)}</td>"
            f"<td>{_evidence(f)}</td>"
            f"<td class=\"hint\">{escape(text(f.get('hint'), LONG_TEXT))}</td>"
            "</tr>")


def findings(items: Any, origin: float | None) -> list[str]:
    """A heading and a table per severity, worst first."""
    by_severity: dict[str, list[dict[str, Any]]] = {s: [] for s in SEVERITIES}
    for f in as_list(items):
        f = as_dict(f)
        s = text(f.get("severity"))
        by_severity.get(s, by_severity["chat"]).append(f)
    out = []
    for s, group in by_severity.items():
        if not group:
            continue
        rows = "".join(finding_row(f, origin) for f in group[:MAX_FINDINGS])
        more = len(group) - MAX_FINDINGS
        note = f'<p class="more">{more:,} more not shown</p>' if more > 0 else ""
        out.append(f'<h3>{badge(s)} {SEVERITY_NAMES[s]} ({len(group):,})</h3>'
                   '<table class="findings"><colgroup><col class="sev"><col class="cat"><col><col class="when">'
                   '<col class="ev"><col class="hint"></colgroup><thead><tr><th>severity</th><th>category</th><th>summary</th>'
                   '<th>when</th><th>evidence</th><th>hint</th></tr></thead>'
                   f"<tbody>{rows}</tbody></table>{note}")
    return out
