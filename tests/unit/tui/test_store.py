"""Store on the project's real captures: list rows are `kdissect read`'s lines, messages are
those of a fresh decode (held or decoded again after eviction), filter views, marks written as
`read -Y ... -w` writes them, streams, peers, statistics; and a live capture on loopback."""

from __future__ import annotations

import functools
import socket
import threading
import time
from collections import OrderedDict
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from support import CAPTURES, capture_args, sidecar_decode_as, sidecar_keylog

from kdissect.analysis.report import to_json
from kdissect.analysis.stats import Stats
from kdissect.capture.pcapfile import open_capture
from kdissect.cli import cli
from kdissect.dissect.base import Options
from kdissect.filter import FilterError, compile_filter
from kdissect.model import STRUCT, Field, Message, Pdu
from kdissect.pipeline import dissect_file
from kdissect.protocols import DissectorRegistry
from kdissect.render.jsonout import message_dict
from kdissect.render.timecol import seconds
from kdissect.tui import columns
from kdissect.tui import store as store_mod
from kdissect.tui.columns import Columns, ListRow
from kdissect.tui.redecode import MessageCache, message_size
from kdissect.tui.store import Store

TXN = CAPTURES / "kafka" / "mock_ck_transactions.pcap"
SASL = CAPTURES / "kafka" / "scripted_ck_sasl.pcap"
ZK = CAPTURES / "zookeeper" / "zk_session.pcap"
PULSAR = CAPTURES / "pulsar" / "gen__pulsar_chunks_auth_errors.pcap"
ROCKETMQ = CAPTURES / "rocketmq" / "gen_cpp_produce_pull.pcap"
TLS = CAPTURES / "tls" / "kafka_tls13_aes128gcm.pcap"
SEVERAL = [TXN, SASL, ZK, PULSAR, ROCKETMQ, TLS]


def setup(path: Path) -> tuple[DissectorRegistry, Options]:
    return (DissectorRegistry(decode_as=sidecar_decode_as(path, path.parent.name)),
            Options(tls_keylog=sidecar_keylog(path)))


@functools.cache
def fresh(path: Path) -> tuple[Message, ...]:
    return tuple(dissect_file(str(path), *setup(path)))


def loaded(path: Path) -> Store:
    store = Store([str(path)], *setup(path))
    store.start()
    assert store.wait(60)
    return store


def read_line(store: Store, r: ListRow) -> str:
    """The row in `kdissect read`'s plain layout (render/text.py summary_plain)."""
    assert store.first_ts is not None
    return (f"{r.frame:>6} {seconds(r.ts - store.first_ts):>11} {r.src:>21} → {r.dst:<21} "
            f"{r.protocol.upper():<9} {r.summary}")


@pytest.mark.parametrize("path", SEVERAL, ids=lambda p: p.name)
def test_rows_are_read_lines(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "BLOCK", 7)  # summaries in many compressed blocks
    store = loaded(path)
    out = CliRunner().invoke(cli, ["read", "--no-color", str(path), *capture_args(path)])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert len(store) == len(lines) == len(fresh(path)) > 0
    assert [read_line(store, r) for r in store.rows(0, len(store))] == lines
    assert store.progress.done and store.progress.error is None and store.progress.messages == len(store)
    assert store.progress.bytes_read == store.progress.bytes_total == path.stat().st_size


@pytest.mark.parametrize("path", SEVERAL, ids=lambda p: p.name)
def test_row_columns_are_the_messages(path: Path) -> None:
    store = loaded(path)
    msgs = fresh(path)
    index = {id(m): i for i, m in enumerate(msgs)}
    for i, m in enumerate(msgs):
        r = store.row(i)
        assert (r.index, r.number, r.frame, r.stream, r.src, r.dst, r.protocol, r.kind) == \
               (i, m.number, m.frame, m.stream, m.src, m.dst, m.protocol, m.kind)
        assert r.ts == m.ts and r.severity == (m.worst.value if m.worst else None)
        assert r.error == (m.kind == "response" and bool(m.info.get("error") or m.info.get("error_code")))
        if m.peer is not None:
            assert r.peer == index[id(m.peer)] and store.row(r.peer).peer == i


def test_rows_range_is_clipped_and_row_checks() -> None:
    store = loaded(ZK)
    n = len(store)
    assert [r.index for r in store.rows(n - 2, n + 50)] == [n - 2, n - 1]
    assert store.rows(-5, 2) == store.rows(0, 2)
    with pytest.raises(IndexError):
        store.row(n)


@pytest.mark.parametrize("path", SEVERAL, ids=lambda p: p.name)
def test_held_messages_are_a_fresh_decode(path: Path) -> None:
    store = loaded(path)
    assert store.keeps_all
    for i, m in enumerate(fresh(path)):
        assert store.cached(i) is not None
        assert message_dict(store.message(i)) == message_dict(m)


@pytest.mark.parametrize("path", [TXN, SASL, ZK, PULSAR, ROCKETMQ], ids=lambda p: p.name)
def test_evicted_messages_decode_again_the_same(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_mod, "KEEP_ALL", 5)
    monkeypatch.setattr(store_mod, "WINDOW", 3)
    store = Store([str(path)], *setup(path))
    store._cache = MessageCache(max_messages=4)
    store.start()
    assert store.wait(60) and not store.keeps_all
    msgs = fresh(path)
    for i in reversed(range(len(msgs))):  # backwards: each is evicted by the time it is asked for
        assert message_dict(store.message(i)) == message_dict(msgs[i]), i
    assert len(store._cache) <= 4


def test_stream_indices_and_frames() -> None:
    store = loaded(TXN)
    msgs = fresh(TXN)
    for s in {m.stream for m in msgs}:
        assert store.stream_indices(s) == [i for i, m in enumerate(msgs) if m.stream == s]
    assert store.stream_indices(10_000) == []
    for m in msgs:
        found = store.index_of_frame(m.frame)
        assert found is not None and msgs[found].frame == m.frame
    assert store.index_of_frame(0) is None
    gap = next(f for f in range(msgs[0].frame, msgs[-1].frame) if all(m.frame != f for m in msgs))
    before = store.index_of_frame(gap)
    assert before is not None and msgs[before].frame < gap


FILTERS = ["kafka.header.api_key == 0", "kdissect.kind == response and kdissect.rtt_ms > 1",
           "kafka.topics.name", "not kafka"]


@pytest.mark.parametrize("expr", FILTERS)
@pytest.mark.parametrize("held", [True, False], ids=["held", "decoded-again"])
def test_filter_views(expr: str, held: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not held:
        monkeypatch.setattr(store_mod, "KEEP_ALL", 5)
    store = loaded(TXN)
    assert store.keeps_all == held
    view = store.filtered(expr)
    assert view.wait(60) and view.progress.done and view.progress.error is None
    pred = compile_filter(expr)
    msgs = fresh(TXN)
    expected = [i for i, m in enumerate(msgs) if pred(m)]
    assert [view.index(p) for p in range(len(view))] == expected
    assert all(view.position(i) == p for p, i in enumerate(expected))
    outside = next((i for i in range(len(msgs)) if i not in expected), None)
    assert outside is None or view.position(outside) is None
    assert store.stats(view) == to_json(Stats().add_all(msgs[i] for i in expected))


def test_unfiltered_view_and_stats_are_the_store() -> None:
    store = loaded(TXN)
    view = store.filtered("  ")
    assert view.expr is None and len(view) == len(store) and view.index(3) == 3 and view.position(3) == 3
    assert store.stats() == store.stats(view) == to_json(Stats().add_all(fresh(TXN)))
    sketches = store.response_times()
    assert set(sketches) == {"kafka"} and sketches["kafka"].count > 0


def test_bad_filters() -> None:
    store = loaded(ZK)
    with pytest.raises(FilterError) as e:
        store.filtered("zookeeper.path == ")
    assert e.value.pos == len("zookeeper.path == ")
    problem = Store.check_filter("kafka.topics.nmae == x")
    assert problem is not None and problem.pos == 0 and problem.suggestion == "kafka.topics.name"
    assert Store.check_filter('zookeeper.path == "/a') is not None
    assert Store.check_filter("zookeeper.path") is None and Store.check_filter("") is None


def packets(path: Path) -> list[tuple[bytes, float]]:
    with open_capture(str(path)) as cap:
        return [(f.data, f.ts) for f in cap]


@pytest.mark.parametrize("with_peer", [False, True])
@pytest.mark.parametrize("held", [True, False], ids=["held", "decoded-again"])
def test_marks_written_as_read_w(tmp_path: Path, with_peer: bool, held: bool,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if not held:
        monkeypatch.setattr(store_mod, "KEEP_ALL", 5)
    store = loaded(TXN)
    chosen = [3, 10, 11, 40, len(store) - 1]
    for i in chosen:
        store.mark(i)
    store.mark(7)
    store.unmark(7)
    assert store.marked() == chosen
    ours = tmp_path / "ours.pcapng"
    n = store.write_marked(str(ours), with_peer)
    theirs = tmp_path / "theirs.pcapng"
    numbers = ", ".join(str(i + 1) for i in chosen)
    args = ["read", str(TXN), *capture_args(TXN), "-Y", f"kdissect.number in {{{numbers}}}", "-w", str(theirs)]
    out = CliRunner().invoke(cli, args + (["--with-peer"] if with_peer else []))
    assert out.exit_code == 0, out.output
    assert n == len(packets(ours)) >= len(chosen) + (3 if with_peer else 0)
    assert packets(ours) == packets(theirs)


def test_a_broken_capture_reports_its_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a capture at all")
    store = Store([str(bad)], DissectorRegistry(), Options())
    store.start()
    assert store.wait(10)
    assert len(store) == 0 and store.progress.error is not None and "bad.pcap" in store.progress.error


def test_stop_ends_decoding_early() -> None:
    store = Store([str(TXN)], *setup(TXN))
    store.start()
    store.stop()
    assert store.wait(10) and len(store) <= len(fresh(TXN))


# -- the columns, from any messages ---------------------------------------------------------


messages_st = st.lists(st.tuples(st.integers(0, 5), st.booleans(), st.sampled_from(["kafka", "pulsar", "x"]),
                                 st.sampled_from(["request", "response", "event", "other"]),
                                 st.text(max_size=30), st.integers(1, 1000)), max_size=40)


@settings(max_examples=100, deadline=None)
@given(messages_st)
def test_columns_give_back_what_was_added(specs: list[tuple[int, bool, str, str, str, int]]) -> None:
    cols = Columns()
    made: list[Message] = []
    for stream, to_server, proto, kind, summary, frame in specs:
        a, b = f"10.0.0.1:{1000 + stream}", f"10.0.0.2:{9092 + stream}"
        m = Message(Pdu(b"", [frame], frame / 10, frame / 10, to_server), stream, *((a, b) if to_server else (b, a)),
                    proto)
        m.kind, m.summary, m.number = kind, summary, len(made) + 1
        cols.add(m)
        made.append(m)
    for i, m in enumerate(made):
        r = cols.row(i)
        assert (r.frame, r.ts, r.stream, r.src, r.dst, r.protocol, r.kind, r.summary) == \
               (m.frame, m.ts, m.stream, m.src, m.dst, m.protocol, m.kind, m.summary)
    for s in range(6):
        assert cols.stream_indices(s) == [i for i, m in enumerate(made) if m.stream == s]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 5000)), max_size=200))
def test_message_cache_stays_bounded(puts: list[tuple[int, int]]) -> None:
    cache = MessageCache(max_messages=8, max_bytes=20_000)
    for i, size in puts:
        cache.put(i, Message(Pdu(b"x" * size, [1], 0.0, 0.0, True), 0, "a:1", "b:2", "kafka"))
        assert cache.get(i) is not None
        assert len(cache) <= 8 and (len(cache) == 1 or cache.bytes <= 20_000)


def test_messages_are_held_by_their_decoded_fields_too() -> None:
    """A message of 300 bytes may hold 100,000 fields (a Pulsar command of unknown fields): the
    messages a small capture keeps and the LRU count them (100 AUTH_CHALLENGEs of 100,000
    unknown fields, 30 MB, were all kept: 2 GB)."""
    cache = MessageCache(max_messages=100, max_bytes=1024 * 1024)
    for i in range(10):
        m = Message(Pdu(b"x" * 300, [i + 1], 0.0, 0.0, False), 0, "a:1", "b:2", "pulsar")
        m.fields = [Field("auth_challenge", None, 0, 300, [Field("unknown", 1)] * 2_000, STRUCT)]
        cache.put(i, m)
        assert message_size(m) > 2_000 * 100
    assert 1 < len(cache) < 10 and cache.bytes <= 1024 * 1024
    assert cache.get(9) is not None and cache.get(0) is None


def test_a_live_capture_keeps_its_latest_messages_within_a_byte_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """The latest KEEP_LIVE messages of a live capture, but no more than KEEP_ALL_BYTES of them
    (20,000 messages of 100,000 fields each would be tens of GB)."""
    monkeypatch.setattr(store_mod, "KEEP_ALL_BYTES", 1024 * 1024)
    store = Store((), DissectorRegistry(), Options())
    store._kept, store._keeps_all = OrderedDict(), False
    for i in range(10):
        m = Message(Pdu(b"x" * 300, [i + 1], 0.0, 0.0, False), 0, "a:1", "b:2", "pulsar")
        m.fields = [Field("auth_challenge", None, 0, 300, [Field("unknown", 1)] * 2_000, STRUCT)]
        store._keep(i, m)
    assert 1 < len(store._kept) < 10 and list(store._kept)[-1] == 9
    assert store._kept_bytes == sum(message_size(m) for m in store._kept.values()) <= 1024 * 1024


# -- live ----------------------------------------------------------------------------------------


def require_live() -> None:
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0).close()
    except (PermissionError, AttributeError, OSError):
        pytest.skip("live capture needs Linux and root (or CAP_NET_RAW)")


def replay(port: int, exchanges: list[tuple[bytes, bytes]]) -> None:
    """A client sends each request over loopback; the server answers each with its response."""
    with socket.create_server(("127.0.0.1", port)) as srv:
        def serve() -> None:
            conn, _ = srv.accept()
            with conn:
                for req, resp in exchanges:
                    got = b""
                    while len(got) < len(req):
                        got += conn.recv(65536)
                    conn.sendall(resp)

        t = threading.Thread(target=serve)
        t.start()
        with socket.create_connection(("127.0.0.1", port)) as c:
            for req, resp in exchanges:
                c.sendall(req)
                got = b""
                while len(got) < len(resp):
                    got += c.recv(65536)
        t.join(10)


@pytest.mark.live
def test_live_store_follows_loopback_traffic() -> None:
    require_live()
    msgs = fresh(SASL)
    pairs = [(m.peer, m) for m in msgs if m.peer is not None and m.stream == msgs[0].stream][:4]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = Store.live("lo", DissectorRegistry(decode_as={port: "kafka"}), Options(), f"tcp port {port}")
    store.start()
    view = store.filtered("kdissect.kind == response")
    try:
        time.sleep(0.3)
        replay(port, [(req.data, resp.data) for req, resp in pairs])
        deadline = time.monotonic() + 15
        while len(store) < 2 * len(pairs) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        store.stop_capture()
        store.wait(10)
        store.stop()
    rows = store.rows(0, len(store))
    assert [r.summary.split(" (")[0] for r in rows] == [m.summary for p in pairs for m in p]
    assert [r.kind for r in rows] == ["request", "response"] * len(pairs)
    assert all(r.peer == r.index + (1 if r.kind == "request" else -1) for r in rows)
    assert message_dict(store.message(1))["fields"] == message_dict(pairs[0][1])["fields"]
    assert [view.index(p) for p in range(len(view))] == [1, 3, 5, 7][: len(pairs)]
    assert store.progress.done and view.progress.done
