"""The report page (kdissect.report.html.render): a section per kind of data present, in order;
everything from the capture escaped; nothing loaded from the network; a bounded size; every
figure valid for Plotly; broken chart data drawn as what it can be, never a crash."""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from report_support import (
    HOSTILE,
    HOSTILE_IMG,
    HOSTILE_LINK,
    figures,
    full_result,
    section_ids,
    without_plotly,
)

from kdissect.report.figures import PROTOCOL_COLOURS
from kdissect.report.html import SECTIONS, render

MB = 1024 * 1024


def _titles(page: str) -> list[str]:
    return [f["layout"]["title"]["text"] for f in figures(page)]


def test_every_section_in_order_when_all_data_is_there() -> None:
    page = render(full_result(), "all")
    assert section_ids(page) == [s.anchor for s in SECTIONS]
    assert page.count('<div class="chart"') == len(figures(page))
    assert "a_key_nobody_knows" not in page


def test_no_data_no_sections_and_no_plotly() -> None:
    page = render({"messages": 0, "first_ts": None, "last_ts": None, "findings": [], "charts": {}}, "empty")
    assert section_ids(page) == []
    assert "<script" not in page and "no messages" in page and "Findings: none" in page
    assert len(page) < 10_000


def test_sections_follow_the_data() -> None:
    result = full_result()
    charts = result["charts"]
    only_io = {"time": charts["time"], "io": charts["io"]}
    page = render({**result, "findings": [], "charts": only_io}, "io only")
    assert section_ids(page) == ["io"]
    assert _titles(page) == ["Messages per second, per protocol", "Bytes per second, per protocol",
                             "Messages per second, per topic", "Bytes per second, per topic"]
    page = render({**result, "charts": {}}, "findings only")
    assert section_ids(page) == ["findings"]


def test_header_counts_messages_span_and_findings() -> None:
    page = render(full_result(), "capture <1>.pcap")
    assert "<h1>capture &lt;1&gt;.pcap</h1>" in page
    assert "<title>capture &lt;1&gt;.pcap · kdissect report</title>" in page
    assert "2026-11-23 06:29:17.250 – 2026-11-23 06:29:21.250 UTC (4.000 s) · 1,234 messages" in page
    tally = re.search(r"Findings: (.*?)</p>", page)
    assert tally and re.sub(r"<[^>]+>", "", tally.group(1)) == "error&nbsp;1 warning&nbsp;1 note&nbsp;1"


def test_findings_grouped_by_severity_worst_first() -> None:
    page = render(full_result(), "f")
    headings = re.findall(r'<h3><span class="badge (\w+)">\w+</span> (\w+) \((\d+)\)</h3>', page)
    assert headings == [("error", "Errors", "1"), ("warning", "Warnings", "1"), ("note", "Notes", "1")]
    assert "frames " + ", ".join(map(str, range(1, 21))) + "…<br>streams 1<br>25 times" in page
    assert "+0.500 s" in page and "check the consumer" in page


def test_hostile_names_are_text_never_markup_nor_code() -> None:
    page = without_plotly(render(full_result(), HOSTILE))
    for bad in (HOSTILE, HOSTILE_IMG, HOSTILE_LINK, "<img", "href=\"javascript"):
        assert page.count(bad) == 0, bad
    # past plotly.js, the figures' JSON and the script that draws them: no other script
    assert re.findall(r"<script\b[^>]*>", page) == ['<script type="application/json" id="kd-figures">', "<script>"]
    assert "&lt;/script&gt;&lt;script&gt;window.kdPwned=true&lt;/script&gt;" in page
    labels = json.dumps(figures(page))
    assert "&lt;/script&gt;" in labels and "&lt;img src=x" in labels and "&lt;a href=" in labels
    assert "</script>" not in labels and "<img" not in labels and "<a " not in labels


def test_nothing_is_loaded_from_the_network() -> None:
    page = render(full_result(), "net")
    tags = re.findall(r"<(?:script|link|img|iframe)\b[^>]*>", page)
    assert all(not re.search(r"\b(?:src|href)\s*=", t) for t in tags), tags
    assert not re.search(r"@import|url\(\s*['\"]?https?:", page)
    assert "default-src 'none'" in page
    assert len(re.findall(r"plotly\.js v\d", page)) == 1


def test_size_is_bounded_with_the_largest_data() -> None:
    """The analyzers' caps (512 bins, 31 topics, 41 operations, 2000 points a series), every
    series full: the page still stays under 6 MB, plotly.js included."""
    bins = 512
    series = {f"t{i}": [i * 1000 + j for j in range(bins)] for i in range(31)}
    points = {f"kafka op{i}": {"t": [j * 0.0123457 for j in range(2000)], "v": [1.234 + j for j in range(2000)],
                               "sampled": True} for i in range(41)}
    heat = {k: {"edges_ms": [0.0] + [10 ** (e / 4) for e in range(-8, 21)] + [None],
                "counts": [[j % 7 for j in range(bins)] for _ in range(30)]} for k in points}
    result = full_result()
    result["charts"].update({
        "time": {"origin": 0.0, "bin_s": 0.32, "bins": bins},
        "io": {"messages": series, "bytes": series, "topic_messages": series, "topic_bytes": series},
        "response_time": points, "latency_heatmap": heat, "lag": points, "throttle": points, "errors": series})
    page = render(result, "big")
    assert 4.5 * MB < len(page.encode()) < 6 * MB
    figs = figures(page)
    assert sum(1 for f in figs if f["data"][0]["type"] == "heatmap") == 10
    assert "No heatmap for 31 quieter operations" in page
    scatter = next(f for f in figs if f["layout"]["title"]["text"] == "Response time per operation")
    assert sum(len(t["x"]) for t in scatter["data"]) <= 10000
    assert all(t["name"].endswith(" (sampled)") for t in scatter["data"])


def test_rates_are_counts_over_the_bin_width() -> None:
    page = render(full_result(), "r")
    msgs = figures(page)[0]["data"]
    kafka = next(t for t in msgs if t["name"] == "kafka")
    assert (kafka["x0"], kafka["dx"]) == (0, 0.5)
    assert kafka["y"] == [4, 8, 0, 0, 12, 0, 0, 4]


def test_protocol_colours_agree_across_charts() -> None:
    figs = figures(render(full_result(), "c"))
    colours = {(t["name"], t["line"]["color"]) for f in figs[:2] for t in f["data"]}
    assert colours == {("kafka", PROTOCOL_COLOURS["kafka"]), ("zookeeper", PROTOCOL_COLOURS["zookeeper"])}


def test_latency_heatmap_rows_on_a_log_axis() -> None:
    figs = {f["layout"]["title"]["text"]: f for f in figures(render(full_result(), "h"))}
    fetch = figs["Latency heatmap: kafka Fetch"]
    y = fetch["data"][0]["y"]
    assert y[1:] == [0.01, 0.017783] and math.isclose(y[0], 0.01 / 10 ** 0.25)
    assert fetch["layout"]["yaxis"]["type"] == "log"
    assert fetch["data"][0]["z"] == [[1, 0, 0, 0, 0, 0, 0, 0], [0, 0, 2, 0, 0, 0, 0, 1]]
    assert (fetch["data"][0]["x0"], fetch["data"][0]["dx"]) == (0.25, 0.5)  # cells centred on their bins
    assert fetch["data"][0]["colorscale"][1] == [0.25, "rgba(255,255,255,0)"]  # no response: see-through
    produce = figs["Latency heatmap: kafka Produce"]["data"][0]
    assert math.isclose(produce["y"][-1], 100000 * 10 ** 0.25)


def test_rebalance_timeline_rows_per_member_lanes_and_colours_per_event() -> None:
    figs = {f["layout"]["title"]["text"]: f for f in figures(render(full_result(), "rb"))}
    g1 = figs["Rebalances of group g1"]
    img = HOSTILE_IMG.replace("<", "&lt;").replace(">", "&gt;")
    assert g1["layout"]["yaxis"]["ticktext"] == ["c-1", img]
    # join, sync and leave each have a lane in their member's row
    assert [(t["name"], t["x"], t["y"]) for t in g1["data"]] == [
        ("join", [0.2], [-0.3]), ("sync", [0.3], [0]), ("leave", [2.0], [1.3])]
    assert g1["data"][2]["text"] == [f"{img}<br>leave, generation 2, detail session timeout"]
    other = next(f for k, f in figs.items() if k.startswith("Rebalances of group &lt;/script&gt;"))
    assert other["data"][0]["name"] == "join"
    assert other["data"][0]["marker"]["color"] == g1["data"][0]["marker"]["color"]


def test_zookeeper_sessions_on_a_timeline() -> None:
    figs = {f["layout"]["title"]["text"]: f for f in figures(render(full_result(), "zk"))}
    zk = figs["ZooKeeper session events"]
    assert [(t["name"], t["x"], t["y"]) for t in zk["data"]] == [("created", [0.5], [-0.3]), ("expired", [3.5], [0.3])]
    assert zk["data"][1]["text"] == ["0x1<br>expired, client &lt;/script&gt;&lt;script&gt;window.kdPwned=true&lt;/script&gt;"]


def test_top_talkers_heaviest_on_top_with_category_axes() -> None:
    figs = {f["layout"]["title"]["text"]: f for f in figures(render(full_result(), "tt"))}
    clients = figs["Top clients by bytes"]
    assert clients["layout"]["yaxis"]["type"] == "category"  # a client id of "123" stays a name
    assert [t["name"] for t in clients["data"]] == ["sent", "received"]
    assert clients["data"][0]["x"] == [900, 20] and clients["data"][1]["x"] == [100, 10]
    assert figs["Top partitions by record bytes"]["data"][0]["y"] == ["orders/0"]


def test_tables_for_row_lists() -> None:
    page = render(full_result(), "t")
    tcp = page.split('<section id="tcp">')[1].split("</section>")[0]
    assert "<th>retransmissions</th>" in tcp and "<td>10.0.0.2:9092</td>" in tcp and "<td>3</td>" in tcp
    rocketmq = page.split('<section id="rocketmq-codes">')[1].split("</section>")[0]
    assert "<td>SEND_MESSAGE</td><td>SYSTEM_BUSY</td><td>&lt;/script&gt;" in rocketmq and "<td>17</td>" in rocketmq
    comp = page.split('<section id="compression">')[1].split("</section>")[0]
    assert "<th>codec</th><th>batches</th>" in comp
    assert "<td>zstd</td><td>4</td><td>1,000</td><td>4,000</td><td>0.25</td>" in comp


def test_every_figure_is_valid_for_plotly() -> None:
    import plotly.graph_objects as go

    for f in figures(render(full_result(), "v")):
        go.Figure(data=f["data"], layout=f["layout"])  # raises on an unknown or wrong property


def _broken_variants() -> list[dict[str, Any]]:
    out = []
    charts = full_result()["charts"]
    for key in charts:
        for junk in (None, "text", 3, [1, "x", None], {"a": "b"}, {"a": {"t": "x", "v": None}},
                     {"a": [float("nan"), float("inf"), "x"]}, [{"t": None}]):
            broken = copy.deepcopy(charts)
            broken[key] = junk
            out.append(broken)
    return out


def test_broken_chart_data_never_crashes() -> None:
    for charts in _broken_variants():
        page = render({"messages": "many", "first_ts": float("inf"), "findings": [None, 3, {"frames": "x"}],
                       "charts": charts}, "broken")
        assert page.startswith("<!DOCTYPE html>")
        figures(page)  # the JSON is valid: no NaN, no Infinity


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=30)
chart_keys = st.sampled_from(["time", "io", "response_time", "latency_heatmap", "lag", "rebalances", "top_talkers",
                              "compression", "producers", "errors", "throttle", "tcp", "zookeeper_sessions",
                              "pulsar_permits"])


@given(st.dictionaries(chart_keys, json_values, max_size=6), json_values)
def test_any_chart_data_renders(charts: dict[str, Any], findings: Any) -> None:
    page = render({"messages": 1, "first_ts": 0.0, "last_ts": 1.0, "findings": findings, "charts": charts}, "x")
    figures(page)
