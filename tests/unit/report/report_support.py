"""Expert results for the report tests: a synthetic one with every kind of chart data (and
hostile names in it), and helpers to read a page's figures back."""

from __future__ import annotations

import json
import re
from typing import Any

HOSTILE = "</script><script>window.kdPwned=true</script>"
HOSTILE_IMG = '<img src=x onerror="window.kdPwned=true">'
HOSTILE_LINK = '<a href="javascript:window.kdPwned=true">click</a>'
T0 = 1795415357.25  # the first message's time
FIGURES = re.compile(r'<script type="application/json" id="kd-figures">(.*?)</script>', re.S)


def figures(page: str) -> list[dict[str, Any]]:
    """The figures a page hands to Plotly."""
    m = FIGURES.search(page)
    return json.loads(m.group(1))["figures"] if m else []


def without_plotly(page: str) -> str:
    """The page less the text of plotly.js (the first script)."""
    start = page.index("<script>")
    return page[:start] + page[page.index("</script>", start):]


def section_ids(page: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)">', page)


def _finding(severity: str, summary: str, **more: Any) -> dict[str, Any]:
    return {"key": f"kafka.test.{severity}", "severity": severity, "category": "consumer", "protocol": "kafka",
            "title": "a test finding", "summary": summary, "first_ts": T0 + 0.5, "last_ts": T0 + 1.0, "count": 1,
            "frames": [3, 7], "streams": [1], "values": {}, "hint": "check the consumer", **more}


def full_result() -> dict[str, Any]:
    """A result with every section's data; names from the capture are hostile."""
    bins = 8
    return {
        "messages": 1234, "first_ts": T0, "last_ts": T0 + 4.0,
        "findings": [
            _finding("warning", f"group {HOSTILE} rebalanced 3 times in 4 s", count=25, frames=list(range(1, 21))),
            _finding("error", "producer p-1 got 12 OUT_OF_ORDER_SEQUENCE_NUMBER errors"),
            _finding("note", HOSTILE_IMG),
        ],
        "charts": {
            "time": {"origin": T0, "bin_s": 0.5, "bins": bins},
            "io": {"messages": {"kafka": [2, 4, 0, 0, 6, 0, 0, 2], "zookeeper": [1] * bins},
                   "bytes": {"kafka": [200, 400, 0, 0, 600, 0, 0, 200], "zookeeper": [50] * bins},
                   "topic_messages": {HOSTILE: [1, 2, 0, 0, 3, 0, 0, 1], "orders": [1] * bins},
                   "topic_bytes": {HOSTILE: [100, 200, 0, 0, 300, 0, 0, 100], "orders": [10] * bins}},
            "response_time": {"kafka Fetch": {"t": [0.1, 1.2, 3.9], "v": [0.5, 500.0, 12.0], "sampled": False},
                              f"kafka {HOSTILE_LINK}": {"t": [2.0], "v": [3.0], "sampled": True}},
            "latency_heatmap": {"kafka Fetch": {"edges_ms": [0.0, 0.01, 0.017783],
                                                "counts": [[1, 0, 0, 0, 0, 0, 0, 0], [0, 0, 2, 0, 0, 0, 0, 1]]},
                                "kafka Produce": {"edges_ms": [56234.132519, 100000.0, None],
                                                  "counts": [[0, 0, 0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 4]]}},
            "lag": {"g1 orders/0": {"t": [0.5, 1.5, 2.5], "v": [10, 40, 5], "sampled": False},
                    f"g1 {HOSTILE}/1": {"t": [0.7], "v": [3], "sampled": False}},
            "rebalances": {"g1": [{"t": 0.2, "event": "join", "member": "c-1", "generation": 1, "detail": ""},
                                  {"t": 0.3, "event": "sync", "member": "c-1", "generation": 1, "detail": None},
                                  {"t": 2.0, "event": "leave", "member": HOSTILE_IMG, "generation": 2,
                                   "detail": "session timeout"}],
                           HOSTILE: [{"t": 1.0, "event": "join", "member": "c-9", "generation": 5}]},
            "top_talkers": {
                "clients": [{"protocol": "kafka", "client_id": HOSTILE, "requests": 9, "bytes_sent": 900,
                             "bytes_received": 100, "errors": 0, "produced": {"records": 3, "bytes": 90}},
                            {"protocol": "kafka", "client_id": "123", "requests": 2, "bytes_sent": 20,
                             "bytes_received": 10, "errors": 0, "produced": {"records": 0, "bytes": 0}}],
                "topics": [{"topic": "orders", "produced": {"records": 7, "bytes": 300},
                            "fetched": {"records": 9, "bytes": 456}}],
                "partitions": [{"topic": "orders", "partition": 0, "produced": {"records": 7, "bytes": 300},
                                "fetched": {"records": 9, "bytes": 456}}]},
            "compression": {"zstd": {"batches": 4, "wire_bytes": 1000, "uncompressed_bytes": 4000, "ratio": 0.25},
                            HOSTILE: {"batches": 1, "wire_bytes": 10, "uncompressed_bytes": 10, "ratio": 1.0}},
            "producers": [{"producer_id": 7, "epoch": 0, "client_id": HOSTILE_IMG, "batches": 12}],
            "errors": {"kafka NOT_LEADER_OR_FOLLOWER": [0, 0, 3, 1, 0, 0, 0, 0]},
            "throttle": {"kafka Produce": {"t": [1.0, 2.0], "v": [100, 250], "sampled": False}},
            "tcp": [{"stream": 4, "protocol": "kafka", "client": "10.0.0.1:5000", "server": "10.0.0.2:9092",
                     "retransmissions": 3, "zero_windows": 0, "reset_by": HOSTILE}],
            "zookeeper_sessions": [{"t": 0.5, "event": "created", "session": "0x1", "client": "10.0.0.5:4000"},
                                   {"t": 3.5, "event": "expired", "session": "0x1", "client": HOSTILE}],
            "pulsar_permits": {"consumer 1": {"t": [0.5, 1.5, 2.0], "v": [1000, 10, 0], "sampled": False}},
            "rocketmq_codes": [{"op": "SEND_MESSAGE", "code": "SYSTEM_BUSY", "topic": HOSTILE, "broker": "b-1",
                                "count": 17}],
            "a_key_nobody_knows": {"x": 1},
        },
    }
