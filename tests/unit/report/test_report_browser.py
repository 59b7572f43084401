"""`kdissect report` on real captures, opened in headless Chromium with no network: the page
loads without a console error or a page error, asks for nothing outside the file, and Plotly
drew every chart (an SVG with traces, or a heatmap image, in each chart's div)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from report_support import HOSTILE, HOSTILE_IMG, figures, full_result
from support import CAPTURES, capture_args, shared_path

from kdissect.cli import cli
from kdissect.report.html import SECTIONS, render

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# What each drawn chart holds: its div, Plotly's root SVG, and the marks of its traces.
DRAWN = """() => Array.from(document.querySelectorAll("div.chart")).map(div => ({
  id: div.id,
  plotly: div.classList.contains("js-plotly-plot"),
  svg: div.querySelectorAll("svg.main-svg").length,
  marks: div.querySelectorAll("g.trace path, g.trace rect, g.point path, g.hm image, g.points path").length,
  heatmap: div.querySelectorAll("g.hm image").length,
  title: (div.querySelector(".gtitle") || {}).textContent,
}))"""
TEXTS = """() => Array.from(document.querySelectorAll("g.legendtext, g.ytick text, .gtitle"))
  .map(e => e.textContent).join("\\n")"""


def _report(capture: Path, out: Path) -> None:
    result = CliRunner().invoke(cli, ["report", str(capture), *capture_args(capture), "-o", str(out)])
    assert result.exit_code == 0, result.output


def open_report(page_path: Path, shot: Path, profile: Path) -> dict[str, Any]:
    """Open the page in Chromium (no network: any request not for the file is refused and
    recorded); its console messages, page errors, outside requests, charts, and a full-page
    screenshot in `shot`."""
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    seen: dict[str, Any] = {"console": [], "errors": [], "requests": []}

    def route(r: Any) -> None:
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            seen["requests"].append(r.request.url)
            r.abort()

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=FLAGS,
            viewport={"width": 1200, "height": 900})
        try:
            context.route("**/*", route)
            page = context.new_page()
            page.on("console", lambda m: seen["console"].append((m.type, m.text)))
            page.on("pageerror", lambda e: seen["errors"].append(str(e)))
            page.goto(page_path.as_uri(), wait_until="load")
            page.wait_for_function("() => document.querySelectorAll('div.chart:not(.js-plotly-plot)').length === 0",
                                   timeout=30000)
            seen["charts"] = page.evaluate(DRAWN)
            seen["sections"] = page.evaluate("() => Array.from(document.querySelectorAll('section')).map(s => s.id)")
            seen["alert"] = page.evaluate("() => window.kdPwned === true")
            seen["legends"] = page.evaluate(TEXTS)
            seen["title"] = page.title()
            page.screenshot(path=str(shot), full_page=True)
        finally:
            context.close()
    return seen


def _check(seen: dict[str, Any], page: str) -> None:
    """No error, no request, and every figure of the page drawn by Plotly in its div."""
    assert seen["errors"] == []
    assert [m for m in seen["console"] if m[0] in ("error", "warning")] == []
    assert seen["requests"] == []
    assert seen["alert"] is False
    wanted = figures(page)
    assert wanted, "no chart on the page"
    drawn = {c["id"]: c for c in seen["charts"]}
    assert sorted(drawn) == sorted(f["id"] for f in wanted)
    for f in wanted:
        c = drawn[f["id"]]
        assert c["plotly"] and c["svg"] >= 1 and c["marks"] >= 1, (f["layout"]["title"]["text"], c)
        assert bool(c["heatmap"]) == (f["data"][0]["type"] == "heatmap"), c


needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install chromium)")


@needs_chromium
def test_project_capture_draws_every_chart(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    _report(CAPTURES / "kafka" / "mock_ck_transactions.pcap", out)
    page = out.read_text()
    seen = open_report(out, tmp_path / "report.png", tmp_path / "profile")
    _check(seen, page)
    assert {"io", "response-time", "top-talkers"} <= set(seen["sections"])
    titles = {c["title"] for c in seen["charts"]}
    assert {"Messages per second, per protocol", "Bytes per second, per topic", "Response time per operation",
            "Latency heatmap: kafka EndTxn", "Latency heatmap: kafka AddPartitionsToTxn",
            "Top topics by record bytes"} <= titles
    assert (tmp_path / "report.png").stat().st_size > 50_000


@needs_chromium
def test_shared_consumer_group_capture_draws_every_chart(tmp_path: Path) -> None:
    capture = shared_path("captures", "kafka", "gen__mock_ck_consumer_group.pcap")
    out = tmp_path / "report.html"
    _report(capture, out)
    seen = open_report(out, tmp_path / "report.png", tmp_path / "profile")
    _check(seen, out.read_text())
    titles = {c["title"] for c in seen["charts"]}
    assert {"Latency heatmap: kafka Heartbeat", "Latency heatmap: kafka OffsetCommit",
            "Latency heatmap: kafka Fetch", "Top partitions by record bytes"} <= titles


@needs_chromium
def test_hostile_names_show_as_text_and_run_nothing(tmp_path: Path) -> None:
    out = tmp_path / "hostile.html"
    page = render(full_result(), HOSTILE)
    out.write_text(page)
    seen = open_report(out, tmp_path / "hostile.png", tmp_path / "profile")
    _check(seen, page)
    assert seen["sections"] == [s.anchor for s in SECTIONS]
    assert HOSTILE in seen["legends"] and HOSTILE_IMG in seen["legends"]  # shown as typed
    assert seen["title"] == f"{HOSTILE} · kdissect report"
