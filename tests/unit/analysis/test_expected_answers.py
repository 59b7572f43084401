"""Expected answers and long polls in `kdissect stats` and `conversations`, table fitting on a
narrow console, --top on every table, and `follow` of streams with nothing to show."""

from __future__ import annotations

import gc
import io
import json
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest
from analysis_support import capture, run
from click.testing import CliRunner
from rich.console import Console
from support import CAPTURES, capture_args

from kdissect.analysis.expected import EXPECTED_ERRORS, LONG_POLLS, ErrorClassifier
from kdissect.analysis.report import to_json
from kdissect.analysis.stats import Stats
from kdissect.analysis.statstext import StatsView
from kdissect.cli import cli
from kdissect.model import ARRAY, Field, Message, Pdu
from kdissect.render.fitted import Col, choose

KDISSECT = [sys.executable, "-m", "kdissect"]
HEALTHY = ["kafka/gen__mock_ck_produce_basic.pcap", "kafka/segmentio__kafka-go__v2-v2.pcapng",
           "zookeeper/gen__zk_kazoo_basic.pcap", "rocketmq/deepflowio__deepflow__rocketmq-pull-message.pcap"]
FAULTY = {"kafka/gen__mock_ck_errors.pcap": {"NOT_LEADER_OR_FOLLOWER", "COORDINATOR_NOT_AVAILABLE"},
          "zookeeper/gen__zk_kazoo_errors.pcap": {"NodeExists", "NoNode", "BadVersion"}}


def stats(path: Path, *args: str) -> dict[str, Any]:
    return json.loads(run("stats", str(path), "-F", "json", *capture_args(path), *args))


def totals(d: dict[str, Any]) -> tuple[int, int]:
    ops = d["operations"]
    return sum(r["error_count"] for r in ops), sum(r["expected_count"] for r in ops)


@pytest.mark.parametrize("rel", HEALTHY)
def test_a_healthy_client_shows_no_errors(rel: str) -> None:
    path = capture(rel)
    d = stats(path)
    errors, expected = totals(d)
    assert (errors, expected > 0) == (0, True)
    assert all(r["errors"] == 0 for t in ("conversations", "clients", "topic_messages") for r in d[t])
    for r in d["operations"]:
        for name in r["expected"]:
            assert (r["protocol"], r["op"], name) in EXPECTED_ERRORS
    conv = json.loads(run("conversations", str(path), "-F", "json", *capture_args(path)))
    assert sum(r["errors"] for r in conv) == 0 and sum(r["expected"] for r in conv) == expected


def test_the_project_captures_of_healthy_clients() -> None:
    for rel in ("kafka/mock_ck_transactions.pcap", "kafka/mock_ck_large_values.pcap", "rocketmq/gen_cpp_produce_pull.pcap"):
        errors, expected = totals(stats(CAPTURES / rel))
        assert (errors, expected > 0) == (0, True), rel


@pytest.mark.parametrize("rel", sorted(FAULTY))
def test_real_errors_still_show(rel: str) -> None:
    d = stats(capture(rel))
    names = {n for r in d["operations"] for n in r["errors"]}
    assert FAULTY[rel] <= names
    # NoNode is expected on exists only: on getData, create, delete it stays an error.
    for r in d["operations"]:
        assert not (set(r["expected"]) & set(r["errors"])), r
    sasl = stats(CAPTURES / "kafka/scripted_ck_sasl.pcap")
    assert totals(sasl)[0] == 1


def _pair(stream: int, op: str, version: int, error: str | None, ts: float) -> tuple[Message, Message]:
    req = Message(Pdu(b"q", [1], ts, ts, True), stream, "10.0.0.1:5000", "10.0.0.2:9092", "kafka")
    req.kind, req.info = "request", {"op": op, "version": version}
    resp = Message(Pdu(b"r", [2], ts + 0.001, ts + 0.001, False), stream, "10.0.0.2:9092", "10.0.0.1:5000", "kafka")
    resp.kind, resp.peer = "response", req
    resp.info = {"op": op, "version": version, **({"error": error} if error else {})}
    return req, resp


@pytest.mark.parametrize(("retry", "want"), [(None, (1, 0)), (3, (1, 0)), (0, (0, 1))])
def test_a_version_answer_is_expected_only_when_the_client_downgrades(retry: int | None,
                                                                   want: tuple[int, int]) -> None:
    st = Stats()
    msgs = list(_pair(0, "ApiVersions", 3, "UNSUPPORTED_VERSION", 1.0))
    if retry is not None:
        msgs += _pair(0, "ApiVersions", retry, None if retry == 0 else "UNSUPPORTED_VERSION", 2.0)[:1]
    st.add_all(msgs)
    row = next(r for r in to_json(st)["operations"] if r["version"] == 3)
    assert (row["error_count"], row["expected_count"]) == want
    assert (to_json(st)["conversations"][0]["errors"], to_json(st)["conversations"][0]["expected"]) == want


def test_a_retry_on_another_conversation_does_not_confirm() -> None:
    c = ErrorClassifier()
    _, resp = _pair(0, "JoinGroup", 4, "MEMBER_ID_REQUIRED", 1.0)
    assert c.classify(resp, "MEMBER_ID_REQUIRED") == "expected"
    c.on_request(_pair(1, "JoinGroup", 4, None, 2.0)[0])
    assert [p.error for p in c.unconfirmed()] == ["MEMBER_ID_REQUIRED"]
    c.classify(resp, "MEMBER_ID_REQUIRED")
    c.on_request(_pair(0, "JoinGroup", 4, None, 2.0)[0])
    assert c.unconfirmed() == []


def test_answers_held_for_a_retry_keep_neither_their_tree_nor_their_request() -> None:
    """An answer that is expected only once the client retries is held to the end of the run:
    not its decoded tree nor its bytes (a JoinGroup response may list 100,000 members, and
    10,000 answers are held: 60 such answers took 2.9 GB), only what it is counted by."""
    c = ErrorClassifier()
    held = []
    for stream in range(3):
        req, resp = _pair(stream, "JoinGroup", 5, "MEMBER_ID_REQUIRED", 1.0)
        resp.fields = [Field("members", None, 0, 1, [Field("member", None, 0, 1)] * 1000, ARRAY)]
        req.fields = [Field("group_id", "g", 0, 1)]
        assert c.classify(resp, "MEMBER_ID_REQUIRED") == "expected"
        held.append((weakref.ref(req), weakref.ref(resp)))
        del req, resp
    gc.collect()
    assert all(r() is None and m() is None for r, m in held)
    answers = c.unconfirmed()
    assert [(p.response.stream, p.response.kind, p.response.info["error"], p.response.peer.info["op"])
            for p in answers if p.response.peer is not None] == [
        (s, "response", "MEMBER_ID_REQUIRED", "JoinGroup") for s in range(3)]
    assert all(not p.response.fields and not p.response.data and p.response.peer is not None
               and not p.response.peer.fields for p in answers)
    st = Stats()
    for stream in range(2):
        st.add(_pair(stream, "JoinGroup", 5, "MEMBER_ID_REQUIRED", 1.0)[1])
    st.finish()
    row = to_json(st)["operations"][0]
    assert (row["error_count"], row["expected_count"]) == (2, 0)


def test_long_polls_are_left_out_of_the_response_times() -> None:
    path = capture("kafka/segmentio__kafka-go__v2-v2.pcapng")
    d = stats(path)
    fetch = next(r for r in d["operations"] if r["op"] == "Fetch")
    assert fetch["long_polls"] == 2 and fetch["long_poll_time_ms"]["min"] >= 0.9 * 500
    assert fetch["response_time_ms"]["count"] == fetch["responses"] - 2
    assert fetch["response_time_ms"]["max"] < 450  # the fetch that returned records stays
    assert ("kafka", "Fetch") in LONG_POLLS
    rmq = stats(capture("rocketmq/deepflowio__deepflow__rocketmq-pull-message.pcap"))
    pull = next(r for r in rmq["operations"] if r["op"] == "PULL_MESSAGE")
    assert pull["long_polls"] == 2 and pull["response_time_ms"]["count"] == pull["responses"] - 2
    text = run("stats", str(path), "--no-color")
    assert "kafka response time (ms, " in text and "long polls left out)" in text


def _lines_fit(out: str, width: int) -> list[str]:
    lines = out.splitlines()
    assert all(len(line.rstrip()) <= width for line in lines), [x for x in lines if len(x.rstrip()) > width]
    return lines


def test_tables_fit_sixty_columns() -> None:
    path = capture("kafka/gen__mock_ck_consumer_group.pcap")
    st = Stats().add_all([])
    out = CliRunner().invoke(cli, ["stats", str(path), *capture_args(path), "--no-color"], env={"COLUMNS": "60"})
    assert out.exit_code == 0, out.output
    lines = _lines_fit(out.output, 60)
    head = next(i for i, x in enumerate(lines) if x.startswith("Service response time"))
    header = " ".join(lines[head + 1: head + 3])
    for col in ("operation", "ver", "expected", "p50", "p99"):
        assert col in header
    assert any("too narrow for:" in x for x in lines)
    buf = io.StringIO()
    d = json.loads(run("stats", str(path), "-F", "json", *capture_args(path)))
    StatsView(Console(file=buf, width=60, color_system=None), 20).show(d, path.name, st.rtt)
    _lines_fit(buf.getvalue(), 60)
    conv = CliRunner().invoke(cli, ["conversations", str(path), *capture_args(path), "--no-color"],
                              env={"COLUMNS": "60"})
    assert "127.0.0.1:" in _lines_fit(conv.output, 60)[2]


def test_fitting_never_squeezes_a_column_to_a_letter() -> None:
    cols = [Col("name", None, True), Col("count", 2), Col("errors by name", 3, True), Col("mean ms", 1)]
    rows = [["ApiVersions", "12", "UNSUPPORTED_VERSION×3", "0.051"]]
    keep, widths = choose(cols, rows, 200)
    assert (keep, widths) == ([0, 1, 2, 3], None)
    keep, widths = choose(cols, rows, 34)  # "mean ms" (priority 1) does not fit
    assert (keep, widths) == ([0, 1, 2], [len("ApiVersions"), len("count"), 12])
    keep, widths = choose(cols, rows, 40)  # room to spare goes to the wrapped text column first
    assert (keep, widths) == ([0, 1, 2], [11, 5, 18])
    keep, widths = choose(cols, rows, 20)  # what fits whole, never a letter a column
    assert (keep, widths) == ([0, 1], [11, 5])


def test_top_applies_to_every_table() -> None:
    path = capture("kafka/gen__mock_ck_consumer_group.pcap")
    d = stats(path)
    out = run("stats", str(path), *capture_args(path), "--no-color", "--top", "1")
    titles = {"Service response time": "operations", "Records per topic and partition": "topics",
              "Clients": "clients", "Conversations": "conversations", "Diagnostics": "diagnostics"}
    for title, key in titles.items():
        assert len(d[key]) > 1, key
        assert f"{title} (top 1 of {len(d[key])})" in out
    # the busiest operation is the one shown
    busiest = max(d["operations"], key=lambda r: r["requests"] + r["responses"] + r["events"])
    block = out.split("Service response time")[1].split("\n\n")[0]
    assert busiest["op"] in block and sum(r["op"] in block for r in d["operations"] if r is not busiest) == 0


def test_follow_a_stream_with_nothing_decoded_and_one_that_does_not_exist() -> None:
    path = CAPTURES / "tls/kafka_tls13_aes128gcm.pcap"
    res = subprocess.run([*KDISSECT, "follow", str(path), "-s", "0"], capture_output=True, text=True, check=False)
    assert res.returncode == 0 and res.stdout == ""
    assert "kdissect: stream 0 (127.0.0.1:50974 → 127.0.0.1:35377): nothing decoded (TLS 1.3 " in res.stderr
    assert "not decrypted: tls.no_keylog" in res.stderr
    res = subprocess.run([*KDISSECT, "follow", str(path), "-s", "12"], capture_output=True, text=True, check=False)
    assert res.returncode == 2
    assert "stream 12 does not exist: the capture has streams 0–11" in res.stderr
    res = subprocess.run([*KDISSECT, "follow", str(path), "-s", "1"], capture_output=True, text=True, check=False)
    assert res.returncode == 0 and res.stdout.startswith("Stream 1: kafka ")
