"""Fuzzing the ZooKeeper dissector, jute reader and framer: random bytes, every truncation and
random mutations of real packets yield diagnostics, never another exception."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kdissect.dissect.base import ConversationState, Options, run_dissector
from kdissect.errors import DecodeError
from kdissect.model import Message, Pdu
from kdissect.wire.reader import WireReader
from kdissect.zookeeper.dissector import DISSECTOR, conversation
from kdissect.zookeeper.framer import TextLink, ZkFramer
from kdissect.zookeeper.jute import Ctx, read_fields
from kdissect.zookeeper.records_table import RECORDS

REPO = Path(__file__).resolve().parents[2]
CAPTURES = [REPO / "captures" / "zookeeper" / n for n in
            ("zk_extended_ops.pcap", "zk_session.pcap", "zk_four_letter_more.pcap")]
FAST = settings(max_examples=200, deadline=None)


@lru_cache(maxsize=1)
def exchanges() -> tuple[tuple[bytes | None, bytes, bool], ...]:
    """(request bytes or None, packet bytes, to_server) of every message in the own captures."""
    from kdissect.pipeline import dissect_file

    out = []
    for path in CAPTURES:
        for m in dissect_file(str(path)):
            out.append((m.peer.data if m.peer is not None else None, m.data, m.to_server))
    return tuple(out)


def run(data: bytes, to_server: bool, state: ConversationState | None = None,
        request: bytes | None = None) -> Message:
    st_ = state if state is not None else DISSECTOR.new_state()
    if request is not None:
        run_dissector(DISSECTOR, Message(Pdu(request, [1], 0, 0, True), 0, "c", "s", "zookeeper"), st_, Options())
    msg = Message(Pdu(data, [2], 0, 0, to_server), 0, "c", "s", "zookeeper")
    run_dissector(DISSECTOR, msg, st_, Options())
    assert msg.summary
    return msg


def started() -> ConversationState:
    s = DISSECTOR.new_state()
    conv = conversation(s)
    conv.client_started = conv.server_started = True
    return s


def test_real_messages_exist() -> None:
    assert len(exchanges()) > 50


@FAST
@given(st.binary(max_size=300), st.booleans(), st.booleans())
def test_random_bytes(data: bytes, to_server: bool, fresh: bool) -> None:
    run(data, to_server, None if fresh else started())


@FAST
@given(st.binary(min_size=0, max_size=200), st.integers(-12, 110), st.integers(-3, 40))
def test_random_bodies_behind_valid_headers(body: bytes, opcode: int, xid: int) -> None:
    head = xid.to_bytes(4, "big", signed=True) + opcode.to_bytes(4, "big", signed=True)
    req = (len(head) + len(body)).to_bytes(4, "big") + head + body
    run(req, True, started())
    rep_head = xid.to_bytes(4, "big", signed=True) + bytes(8) + bytes(4)
    rep = (len(rep_head) + len(body)).to_bytes(4, "big") + rep_head + body
    run(rep, False, started(), req)


def test_every_truncation_of_real_messages() -> None:
    for request, data, to_server in exchanges():
        for cut in range(len(data)):
            run(data[:cut], to_server, None if request is None and not to_server else started(),
                None if to_server else request)


@FAST
@given(st.data())
def test_mutations_of_real_messages(data: st.DataObject) -> None:
    request, packet, to_server = data.draw(st.sampled_from(exchanges()))
    buf = bytearray(packet)
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, len(buf) - 1))
        buf[pos] = data.draw(st.integers(0, 255))
    run(bytes(buf), to_server, started(), None if to_server else request)


@FAST
@given(st.sampled_from(sorted(RECORDS)), st.binary(max_size=200))
def test_jute_reader_on_every_record(record: str, data: bytes) -> None:
    r = WireReader(data)
    try:
        fields = read_fields(r, record, Ctx())
    except DecodeError:
        return
    assert len(fields) == len(RECORDS[record]) and r.pos <= len(data)


@FAST
@given(st.data())
def test_framer_random_splits_give_the_same_packets(data: st.DataObject) -> None:
    packets = [p for req, p, ts in exchanges() if ts and p[:4] != b"ruok"][:20]
    stream = b"".join(packets)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(stream) - 1), max_size=12))))
    framer = ZkFramer(DISSECTOR.max_frame, True, TextLink())
    framer.set_probe(None, True)
    out = []
    prev = 0
    for i, c in enumerate([*cuts, len(stream)]):
        out += framer.feed(stream[prev:c], i, float(i))
        prev = c
    out += framer.flush()
    assert [p.data for p in out] == packets


@FAST
@given(st.binary(max_size=120), st.booleans(), st.booleans())
def test_framer_and_probes_never_raise(data: bytes, to_server: bool, synced: bool) -> None:
    DISSECTOR.probe(data)
    DISSECTOR.probe_boundary(data, to_server, started())
    framer = ZkFramer(DISSECTOR.max_frame, to_server, TextLink())
    framer.set_probe(lambda h: DISSECTOR.probe_boundary(h, to_server, started()), synced)
    framer.feed(data, 1, 0.0)
    framer.gap(10, 1, 2)
    framer.feed(data, 3, 0.0)
    for pdu in framer.flush():
        run(pdu.data, to_server)


# -- every record round-trips: values -> bytes (an encoder written here) -> the reader ---------

Encoded = tuple[bytes, object]


def _i32(v: int) -> bytes:
    return v.to_bytes(4, "big", signed=True)


def _sized(b: bytes | None) -> bytes:
    return _i32(-1) if b is None else _i32(len(b)) + b


def _vector(items: list[Encoded] | None) -> Encoded:
    if items is None:
        return _i32(-1), None
    return _i32(len(items)) + b"".join(b for b, _ in items), [v for _, v in items]


def _record(names: list[str], parts: tuple[Encoded, ...]) -> Encoded:
    return b"".join(b for b, _ in parts), dict(zip(names, (v for _, v in parts), strict=True))


def encoded(jtype: str) -> st.SearchStrategy[Encoded]:
    """Random values of a jute type with their encoding."""
    scalars: dict[str, st.SearchStrategy[Encoded]] = {
        "int": st.integers(-(2**31), 2**31 - 1).map(lambda v: (_i32(v), v)),
        "long": st.integers(-(2**63), 2**63 - 1).map(lambda v: (v.to_bytes(8, "big", signed=True), v)),
        "boolean": st.booleans().map(lambda v: (b"\1" if v else b"\0", v)),
        "buffer": st.one_of(st.none(), st.binary(max_size=12)).map(lambda v: (_sized(v), v)),
        "ustring": st.one_of(st.none(), st.text(max_size=8)).map(
            lambda v: (_sized(None if v is None else v.encode()), v)),
    }
    if jtype in scalars:
        return scalars[jtype]
    if jtype.startswith("vector<"):
        return st.one_of(st.none(), st.lists(encoded(jtype[7:-1]), max_size=3)).map(_vector)
    names = [n for n, _ in RECORDS[jtype]]
    return st.tuples(*(encoded(t) for _, t in RECORDS[jtype])).map(lambda parts: _record(names, parts))


def plain(f: object) -> object:
    """A decoded Field tree as plain values, in the encoder's shape."""
    from kdissect.model import ARRAY, STRUCT, Field

    assert isinstance(f, Field)
    if f.hint == ARRAY:
        return None if f.display == "null" else [plain(c) for c in f.children or ()]
    if f.hint == STRUCT:
        return {c.name: plain(c) for c in f.children or ()}
    return f.value


@FAST
@given(st.data())
def test_every_record_round_trips(data: st.DataObject) -> None:
    record = data.draw(st.sampled_from(sorted(RECORDS)))
    raw, expected = data.draw(encoded(record))
    r = WireReader(raw)
    fields = read_fields(r, record, Ctx(show_secrets=True))
    assert r.at_end()
    assert {f.name: plain(f) for f in fields} == expected
