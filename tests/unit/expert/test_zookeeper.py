"""The ZooKeeper analyzer: on real captures (a session that expired while its client was
stopped, a refused re-attach, a genuine reconnect storm, healthy traffic) and on messages built
as the ZooKeeper dissector builds them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support import CAPTURES, SHARED_CAPTURES, shared_captures, shared_path

from kdissect.cliutil import build, iter_capture
from kdissect.expert.analyzers.zookeeper import WATCH_STORM, ZooKeeper, prefix_of
from kdissect.expert.engine import Expert, Result
from kdissect.model import Field, Message, Pdu

ZK = CAPTURES / "zookeeper"
SERVER = "10.0.0.9:2181"


def analyse(path: Path) -> Result:
    registry, opts = build((), 0, 0, False)
    expert = Expert(analyzers=[ZooKeeper])
    return expert.add_all(iter_capture((str(path),), registry, opts, observers=[expert]))


def keys(result: Result) -> list[str]:
    return [f.kind.key for f in result.findings]


def test_session_expired_while_the_client_was_stopped() -> None:
    result = analyse(ZK / "zk_session_expiry.pcap")
    assert keys(result) == ["zookeeper.session_expired", "zookeeper.server_closed"]
    expired, closed = result.findings
    assert expired.values["sessions"] == ["0x10001bd1aab0001"] and expired.values["refusals"] == 1
    assert expired.values["timeout_ms"] == 2000 and expired.values["client"] == "127.0.0.1"
    assert 5.0 < expired.values["silence_s"] < 6.0  # stopped 5 s, past its 2 s timeout
    assert expired.frames == [60, 62] and expired.severity.value == "error"
    assert expired.summary.startswith("ZooKeeper session 0x10001bd1aab0001 of 127.0.0.1 expired")
    assert closed.values["session"] == "0x10001bd1aab0001" and closed.values["client"] == "127.0.0.1:51032"
    assert closed.values["rst"] is True and closed.values["silence_s"] == expired.values["silence_s"]
    events = result.charts["zookeeper_sessions"]
    assert [e["event"] for e in events if e["session"] == "0x10001bd1aab0001"] == ["connect", "expire", "close"]
    assert {e["session"] for e in events if e["event"] == "connect"} == {
        "0x10001bd1aab0000", "0x10001bd1aab0001", "0x10001bd1aab0002", "0x10001bd1aab0003"}


def test_refused_reattach_with_a_wrong_password() -> None:
    result = analyse(ZK / "zk_session.pcap")
    assert keys(result) == ["zookeeper.session_expired"]
    f = result.findings[0]
    assert f.values["sessions"] == ["0x100000b18980000"] and f.values["refusals"] == 2 and f.count == 2
    assert f.frames == [28, 30, 38, 40]
    assert "re-attach refused 2 times" in f.summary
    events = [(e["event"], e["session"]) for e in result.charts["zookeeper_sessions"]]
    assert events[:4] == [("connect", "0x100000b18980000"), ("reattach", "0x100000b18980000"),
                          ("close", "0x100000b18980000"), ("expire", "0x100000b18980000")]


def test_real_reconnect_storm() -> None:
    result = analyse(shared_path("captures", "zookeeper", "gen__zk_kazoo_ping_session.pcap"))
    assert keys(result) == ["zookeeper.reconnect_storm"]
    f = result.findings[0]
    assert f.values["session"] == "0x100003105150000" and f.values["connects"] == 19
    assert 1.5 < f.values["span_s"] < 2.5 and f.frames[0] == 41


@pytest.mark.parametrize("name", ["zk_extended_ops.pcap", "zk_four_letter_more.pcap"])
def test_healthy_project_captures(name: str) -> None:
    assert analyse(ZK / name).findings == []


def test_healthy_shared_captures() -> None:
    storm = SHARED_CAPTURES / "zookeeper" / "gen__zk_kazoo_ping_session.pcap"
    for path in shared_captures("zookeeper"):
        if path != storm:
            assert analyse(path).findings == [], path.name


# -- messages as the dissector builds them ---------------------------------------------------


class Feed:
    def __init__(self) -> None:
        self.expert = Expert(analyzers=[ZooKeeper])
        self.frame = 0

    def msg(self, kind: str, ts: float, stream: int, client: str, info: dict[str, Any],
            fields: list[Field] | None = None, peer: Message | None = None) -> Message:
        self.frame += 1
        to_server = kind == "request"
        m = Message(Pdu(b"", [self.frame], ts, ts, to_server), stream,
                    client if to_server else SERVER, SERVER if to_server else client, "zookeeper")
        m.kind, m.info, m.fields, m.peer = kind, info, fields or [], peer
        self.expert.add(m)
        return m

    def connect(self, ts: float, stream: int, client: str, asked: int, answer: int, timeout: int = 6000) -> None:
        req = self.msg("request", ts, stream, client, {"op": "connect", "session_id": asked})
        info: dict[str, Any] = {"op": "connect", "session_id": answer}
        if not answer:
            info["error"] = "SessionExpired"
        self.msg("response", ts + 0.001, stream, client, info, [Field("time_out", timeout if answer else 0)], req)

    def end(self, stream: int, client_fin: bool, server_fin: bool, rst: bool, last: float) -> None:
        self.expert.conversation_ended(SimpleNamespace(index=stream, client=0, fin=[client_fin, server_fin],
                                                       rst=rst, last_ts=last))


def test_reconnect_storm_of_new_sessions_from_one_host() -> None:
    feed = Feed()
    for i in range(12):
        feed.connect(1.0 + i * 0.25, i, f"10.0.0.5:{5000 + i}", 0, 0x100 + i)
    feed.connect(1.0, 99, "10.0.0.6:6000", 0, 0x999)
    result = feed.expert.finish()
    assert keys(result) == ["zookeeper.reconnect_storm"]
    f = result.findings[0]
    assert f.values["host"] == "10.0.0.5" and f.values["connects"] == 12 and f.values["total"] == 12
    assert f.values["span_s"] == pytest.approx(2.75) and len(f.frames) == 12


def test_watch_storm_per_prefix_and_event() -> None:
    feed = Feed()
    for i in range(WATCH_STORM + 10):
        path = f"/brokers/ids/{i % 3}"
        feed.msg("event", 1.0 + i * 0.01, i % 30, f"10.0.1.{i % 30}:4000",
                 {"op": "notification", "event": "NodeChildrenChanged", "path": path})
    for i in range(5):
        feed.msg("event", 2.0 + i, 1, "10.0.1.1:4000", {"op": "notification", "event": "NodeDataChanged",
                                                         "path": "/config/x"})
    result = feed.expert.finish()
    assert keys(result) == ["zookeeper.watch_storm"]
    f = result.findings[0]
    assert f.values["prefix"] == "/brokers/ids" and f.values["event"] == "NodeChildrenChanged"
    assert f.values["notifications"] == WATCH_STORM + 10 and f.values["connections"] == 20
    assert "20+ connections" in f.summary


def test_watch_storm_keys_are_cut() -> None:
    """A notification's path prefix was kept whole: 3,000 notifications for paths of one 32 KB
    component (96 MB) held 33 MB of keys (expert 72 MB resident, export 38 MB; now 43 MB)."""
    feed = Feed()
    for i in range(WATCH_STORM + 1):
        feed.msg("event", 1.0 + i * 0.01, 1, "10.0.1.1:4000", {"op": "notification", "event": "NodeDataChanged",
                                                                "path": "/" + "x" * 40_000 + f"/{i}"})
    analyzer = feed.expert.analyzers[0]
    assert isinstance(analyzer, ZooKeeper)
    assert [len(prefix) for prefix, _ in analyzer.watches] == [1025]
    result = feed.expert.finish()
    assert keys(result) == ["zookeeper.watch_storm"] and len(result.findings[0].values["prefix"]) == 1025


def test_session_expired_answer_on_a_live_connection() -> None:
    feed = Feed()
    feed.connect(1.0, 0, "10.0.0.5:5000", 0, 0xABC, timeout=4000)
    feed.msg("request", 1.5, 0, "10.0.0.5:5000", {"op": "getData", "path": "/a"})
    feed.msg("response", 9.5, 0, "10.0.0.5:5000", {"op": "getData", "error": "SessionExpired", "error_code": -112})
    result = feed.expert.finish()
    assert keys(result) == ["zookeeper.session_expired"]
    f = result.findings[0]
    assert f.values["sessions"] == ["0xabc"] and f.values["timeout_ms"] == 4000
    assert f.values["silence_s"] == pytest.approx(8.0)


def test_connection_closed_by_the_server() -> None:
    feed = Feed()
    feed.connect(1.0, 0, "10.0.0.5:5000", 0, 0xABC, timeout=4000)
    feed.msg("request", 2.0, 0, "10.0.0.5:5000", {"op": "ping"})
    feed.end(0, client_fin=False, server_fin=True, rst=False, last=2.2)
    feed.connect(3.0, 1, "10.0.0.5:5001", 0, 0xABD)  # closed by the client, without closeSession
    feed.end(1, client_fin=True, server_fin=True, rst=False, last=3.5)
    feed.connect(4.0, 2, "10.0.0.5:5002", 0, 0xABE)  # a clean closeSession
    feed.msg("request", 4.5, 2, "10.0.0.5:5002", {"op": "closeSession"})
    feed.end(2, client_fin=False, server_fin=True, rst=False, last=4.6)
    result = feed.expert.finish()
    assert keys(result) == ["zookeeper.server_closed"]
    f = result.findings[0]
    assert f.values["session"] == "0xabc" and f.values["rst"] is False and f.values["timeout_ms"] == 4000
    assert f.last_ts == 2.2


def test_prefix_of() -> None:
    assert prefix_of("/brokers/ids/3") == "/brokers/ids"
    assert prefix_of("/a") == "/a" and prefix_of("/") == "/" and prefix_of("x//y/z") == "/x/y"


def test_hostile_messages_and_conversations() -> None:
    feed = Feed()
    odd: list[dict[str, Any]] = [
        {}, {"op": "connect", "session_id": "x"}, {"op": "connect", "session_id": True},
        {"op": "notification", "path": 3, "event": None}, {"op": None, "error": "SessionExpired"},
    ]
    for i, info in enumerate(odd):
        for kind in ("request", "response", "event"):
            feed.msg(kind, float(i), i, "c:1", dict(info), [Field("time_out", "soon"), Field("time_out", None, children=[])])
    feed.msg("response", 9.0, 7, "c:1", {"op": "connect", "session_id": 5}, [Field("time_out", -1)])
    for conv in (SimpleNamespace(), SimpleNamespace(index=0, client=3), SimpleNamespace(index=1, client=0, fin=None),
                 SimpleNamespace(index=2, client=1, fin=[True], rst=False, last_ts=None),
                 SimpleNamespace(index=3, client=0, fin=[False, True], rst=True, last_ts=None)):
        feed.expert.conversation_ended(conv)
    result = feed.expert.finish()
    assert all(f.kind.category == "zookeeper" for f in result.findings)
