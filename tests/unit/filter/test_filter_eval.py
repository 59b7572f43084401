"""Display-filter semantics on hand-built messages."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kdissect.filter import FilterError, compile_filter, names
from kdissect.kafka.diagnostics import DIAGNOSTICS as KAFKA_DIAGNOSTICS
from kdissect.model import ENUM, FLAGS, Field, Match, Message, Pdu, array, struct


@pytest.fixture(autouse=True)
def _no_key_tables(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The messages here are built by hand, with trees of their own: names are not checked
    against the protocols' key tables (tests/unit/filter/test_filter_names.py does that)."""
    monkeypatch.setattr(names, "vocabularies", lambda protocols=None: {})
    yield


def _kafka_response() -> Message:
    m = Message(Pdu(b"\x00" * 40, [7, 8], 100.0, 100.5, False), 3, "10.0.0.1:9092", "10.0.0.2:5555", "kafka")
    m.kind = "response"
    m.summary = "Produce v9 response NOT_LEADER_OR_FOLLOWER"
    m.info = {"op": "Produce", "op_code": 0, "version": 9, "error": "NOT_LEADER_OR_FOLLOWER", "error_code": 6,
              "topic": "orders", "client_id": None}
    topics = array("responses", [
        struct("t", [Field("name", "orders"), array("partitions", [
            struct("p", [Field("index", 0), Field("error_code", 0, hint=ENUM, display="NONE")]),
            struct("p", [Field("index", 1), Field("error_code", 6, hint=ENUM, display="NOT_LEADER_OR_FOLLOWER")]),
        ])]),
        struct("t", [Field("name", "payments"), array("partitions", [
            struct("p", [Field("index", 4), Field("error_code", 0, hint=ENUM, display="NONE")]),
        ])]),
    ])
    m.fields = [
        Field("length", 36),
        struct("header", [Field("correlation_id", 12)]),
        topics,
        array("tags", [Field("t", "a"), Field("t", "b")]),
        Field("payload", b"\x00\x01hello\xff"),
        Field("attributes", 0x11, hint=FLAGS, display="gzip|transactional",
              children=[Field("codec", 1), Field("transactional", True)]),
        Field("empty", None),
    ]
    m.match = Match(5, "request", 0.1234)
    m.add(KAFKA_DIAGNOSTICS("trailing_bytes", "2 bytes after the body"))
    return m


def _zk_request() -> Message:
    m = Message(Pdu(b"\x00" * 20, [1], 1.0, 1.0, True), 0, "[::1]:40000", "[::1]:2181", "zookeeper")
    m.info = {"op": "getData", "path": "/brokers/ids/1"}
    m.fields = [Field("xid", 1), Field("path", "/brokers/ids/1"), Field("watch", False)]
    return m


def _zk_path(path: str) -> Message:
    """A ZooKeeper request with one field: its path."""
    m = _zk_request()
    m.fields = [Field("path", path)]
    return m


KAFKA, ZK = _kafka_response(), _zk_request()


@pytest.mark.parametrize(("expr", "kafka", "zk"), [
    ("kafka", True, False),
    ("zookeeper", False, True),
    ("kafka or zookeeper", True, True),
    ("!kafka", False, True),
    # fields, arrays transparent, any-of semantics
    ("kafka.header.correlation_id == 12", True, False),
    ("kafka.header.correlation_id == 0xc", True, False),
    ("kafka.responses.name == orders", True, False),
    ('kafka.responses.name == "payments"', True, False),
    ("kafka.responses.name == nope", False, False),
    ("kafka.responses.partitions.index == 4", True, False),
    ("kafka.responses.partitions.index > 3", True, False),
    ("kafka.responses.partitions.index >= 5", False, False),
    ("kafka.responses.partitions.index in {2..4}", True, False),
    ("kafka.responses.partitions.index in {2 3}", False, False),
    ("kafka.tags == b", True, False),
    ("kafka.responses", True, False),
    ("kafka.responses.partitions", True, False),
    ("kafka.responses.nothing", False, False),
    # != holds when the field exists and no value equals
    ("kafka.responses.partitions.index != 9", True, False),
    ("kafka.responses.partitions.index != 1", False, False),
    ("kafka.nothing != 1", False, False),
    ("not kafka.nothing == 1", True, True),
    # enum names: ENUM fields compare with their display; the _name sibling
    ("kafka.responses.partitions.error_code == NOT_LEADER_OR_FOLLOWER", True, False),
    ("kafka.responses.partitions.error_code == not_leader_or_follower", True, False),
    ("kafka.responses.partitions.error_code == 6", True, False),
    ('kafka.responses.partitions.error_code_name == "NONE"', True, False),
    ("kafka.responses.partitions.error_code_name contains LEADER", True, False),
    ("kafka.attributes contains transactional", True, False),
    ("kafka.attributes.value == 17", True, False),
    ("kafka.attributes.transactional == true", True, False),
    ("kafka.attributes.codec == 1", True, False),
    # info keys when no field has the path
    ("kafka.op == Produce", True, False),
    ("kafka.error == NOT_LEADER_OR_FOLLOWER", True, False),
    ("kafka.topic == orders", True, False),
    ("kafka.client_id", False, False),
    ("zookeeper.op == getData", False, True),
    # bytes
    ('kafka.payload contains "hello"', True, False),
    ("kafka.payload contains 00:01", True, False),
    ('kafka.payload matches "^..hel"', True, False),
    ("kafka.empty", True, False),
    ("kafka.empty == 0", False, False),
    # strings
    ('zookeeper.path matches "^/brokers/ids/[0-9]+$"', False, True),
    ("zookeeper.path == /brokers/ids/1", False, True),
    ('zookeeper.path contains "ids"', False, True),
    ('zookeeper.path > "/a"', False, True),
    ("zookeeper.watch == false", False, True),
    # common keys
    ("kdissect.frame == 7", True, False),
    ("kdissect.frames == 8", True, False),
    ("kdissect.stream in {0 3}", True, True),
    ("kdissect.kind == response", True, False),
    ("kdissect.rtt_ms > 100", True, False),
    ("kdissect.rtt_ms > 200", False, False),
    ("kdissect.rtt_ms", True, False),
    ("kdissect.src == 10.0.0.1:9092", True, False),
    ("kdissect.srcport == 9092", True, False),
    ("tcp.port == 2181", False, True),
    ("ip.addr == ::1", False, True),
    ('kdissect.summary contains "NOT_LEADER"', True, False),
    ("kdissect.length == 40", True, False),
    ("kdissect.op == getData", False, True),
    ("kdissect.error", True, False),
    ("kdissect.diag == kafka.trailing_bytes", True, False),
    ("kdissect.severity == warning", True, False),
    ("kdissect.info.topic == orders", True, False),
    ("kdissect.to_server", True, True),
    ("kdissect.to_server == true", False, True),
    ("kafka and kafka.error and not zookeeper", True, False),
    ("kafka and zookeeper and kafka", False, False),
    ("zookeeper or kdissect.rtt_ms > 200 or kafka", True, True),
    ("zookeeper or zookeeper or kdissect.to_server == true", False, True),
    ("zookeeper or kafka and kafka.error and kdissect.rtt_ms > 100 or zookeeper", True, True),
])
def test_semantics(expr: str, kafka: bool, zk: bool) -> None:
    pred = compile_filter(expr)
    assert pred(KAFKA) is kafka
    assert pred(ZK) is zk


@pytest.mark.parametrize(("expr", "reason"), [
    ("foo.bar == 1", "unknown protocol or field 'foo.bar'"),
    ("kdissect.nope", "unknown field 'kdissect.nope'"),
    ("kafka == 1", "a protocol name (kafka) takes no value"),
    ('kafka.x matches "("', "bad regular expression (missing ), unterminated subpattern at position 0)"),
])
def test_compile_errors(expr: str, reason: str) -> None:
    with pytest.raises(FilterError) as exc:
        compile_filter(expr)
    assert exc.value.reason == reason


def test_reads_only_the_fields_it_names() -> None:
    """Evaluation never needs message_dict: a message whose other fields cannot render still works."""

    class Boom:
        name = "boom"
        hint = None
        children = None

        @property
        def value(self) -> object:
            raise AssertionError("read a field the filter does not name")

    m = _zk_request()
    m.fields.append(Boom())  # type: ignore[arg-type]
    assert compile_filter("zookeeper.xid == 1")(m)


def test_any_tree_evaluates_without_raising() -> None:
    """Random trees over real-looking keys compile (or fail with FilterError) and never raise
    while evaluating, whatever the value types."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from kdissect.filter import compile_node
    from kdissect.filter.keys import KDISSECT
    from kdissect.filter.nodes import (
        COMPARE_OPS,
        STRING_LIT,
        WORD_LIT,
        Compare,
        Exists,
        FieldRef,
        In,
        Literal,
        Range,
    )

    keys = st.sampled_from(
        ["kafka.header.correlation_id", "kafka.responses.name", "kafka.responses.partitions.error_code",
         "kafka.responses.partitions.error_code_name", "kafka.payload", "kafka.attributes", "kafka.attributes.value",
         "kafka.tags", "kafka.empty", "kafka.op", "zookeeper.path", "zookeeper.watch", "kafka.responses",
         "kdissect.info.topic"] + [f"kdissect.{k}" for k in KDISSECT]).map(FieldRef)
    values = st.one_of(st.builds(Literal, st.just(STRING_LIT), st.text(max_size=6)),
                       st.builds(Literal, st.just(WORD_LIT), st.sampled_from(
                           ["0", "-1", "6", "1.5", "0x10", "true", "NONE", "orders", "00:01", "a..b"])))
    nums = st.integers(-5, 5).map(lambda n: Literal(WORD_LIT, str(n)))
    tests = st.one_of(st.builds(Exists, keys), st.builds(Compare, st.sampled_from(COMPARE_OPS), keys, values),
                      st.builds(lambda k, i: In(k, tuple(i)), keys,
                                st.lists(st.one_of(values, st.builds(Range, nums, nums)), min_size=1, max_size=3)))

    @settings(max_examples=200, deadline=None)
    @given(tests)
    def check(tree: object) -> None:
        try:
            pred = compile_node(tree)  # type: ignore[arg-type]
        except FilterError:
            return
        assert isinstance(pred(KAFKA), bool) and isinstance(pred(ZK), bool)

    check()


@pytest.mark.parametrize("n", [3, 20_000])
def test_a_chain_of_any_length_compiles_and_runs(n: int) -> None:
    """A long chain of `and`s or `or`s parses as a tree as deep as it is long: it is compiled
    and run as one list, within Python's recursion limit (and the C stack, when compiled)."""
    every = compile_filter(" && ".join(["kafka"] * n))
    assert every(KAFKA) is True and every(ZK) is False
    last = compile_filter(" || ".join(["kdissect.rtt_ms > 200"] * (n - 1) + ["zookeeper"]))
    assert last(KAFKA) is False and last(ZK) is True


def test_a_regular_expression_that_backtracks_without_end_gives_up(capsys: pytest.CaptureFixture[str]) -> None:
    """`(a+)+$` against a 32 KB client id of a's and a mismatch backtracked for ever (read -Y of
    100 such requests, 3.2 MB, was stopped after 60 s; now 0.3 s): a search is stopped after
    0.05 s and 0.1 µs a character, the value counts as not matching, and so do values as long,
    unsearched."""
    import time

    keep = compile_filter('zookeeper.path matches "(a+)+$"')
    start = time.monotonic()
    assert [keep(_zk_path("a" * n + "!")) for n in (40, 41, 5000)] == [False, False, False]
    assert time.monotonic() - start < 1
    assert keep(_zk_path("/a")) and keep(_zk_path("b" * 30 + "a"))  # shorter than the one stopped
    # a linear search of a long value has time for each character (1-50 ns a character)
    long = compile_filter('zookeeper.path matches "[0-9a-f]{8}-"')
    assert long(_zk_path("x" * 1_000_000 + "0123abcd-")) and not long(_zk_path("x" * 1_000_000))
    assert capsys.readouterr().err.count("kdissect: warning: the regular expression '(a+)+$' took more") == 1


def test_the_time_a_stopped_search_ran_is_what_counts_in_the_budget(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """re notices the timer only every few thousand start positions: `p+q` against a megabyte of
    p's ran 3.7 s past its limit of 0.15 s, and every value a little shorter as long again, each
    counted as its limit only (ten such paths, 9.5 MB: read -Y took 18 s, now 2.8 s). Here a
    stopped search is made to seem to take 2 s: past the budget, so every value after it counts
    as not matching, unsearched."""
    from kdissect.filter import evaluator

    clock = iter(range(0, 1000, 2))
    monkeypatch.setattr(evaluator, "process_time", lambda: float(next(clock)), raising=False)

    keep = compile_filter('zookeeper.path matches "(a+)+$"')
    assert keep(_zk_path("a" * 40 + "!")) is False
    assert keep(_zk_path("/a")) is False  # it matches, but is not searched any more
    assert "kdissect: warning: the regular expression '(a+)+$' took more" in capsys.readouterr().err


def test_the_budget_of_stopped_searches_is_the_filter_s(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Each `matches` of a filter had a budget of its own: five of them (`p+q`, `p+r`, ...) on ten
    paths of a million p's down to 900,000 (9.5 MB) took 5.6 s of CPU in read -Y, one of them 1.3 s;
    now five take 1.3 s too. Here a stopped search is made to seem to take 2 s: past the filter's
    budget, so the other regular expression searches nothing either."""
    from kdissect.filter import evaluator

    clock = iter(range(0, 1000, 2))
    monkeypatch.setattr(evaluator, "process_time", lambda: float(next(clock)), raising=False)

    keep = compile_filter('zookeeper.path matches "(a+)+$" or zookeeper.path matches "^/a"')
    assert keep(_zk_path("a" * 40 + "!")) is False
    assert keep(_zk_path("/a")) is False  # the second matches, but the filter's budget is spent
    assert capsys.readouterr().err.count("kdissect: warning: the regular expression") == 1
    assert compile_filter('zookeeper.path matches "^/a"')(_zk_path("/a")) is True  # another filter: a budget of its own

def test_a_long_value_is_probed_a_window_at_a_time_before_its_search(capsys: pytest.CaptureFixture[str]) -> None:
    """re notices the timer only every few thousand start positions: `p+q` against 4 MB of p's, each
    start position scanning the rest of the value, was stopped 10 s past its limit of 0.45 s.
    Searched a window at a time first, it is stopped within a window's length of its limit."""
    import time

    from kdissect.filter import evaluator

    calls: list[tuple[int, ...]] = []
    w = evaluator.MATCH_WINDOW
    assert evaluator._timed(lambda s, *at: calls.append(at) or at, "x" * (2 * w + 1), 1.0) is True
    assert calls == [(0, w), (w, 2 * w), (2 * w, 3 * w), ()]
    calls.clear()
    assert evaluator._timed(lambda s, *at: calls.append(at) or at, "x" * (2 * w), 1.0) is True and calls == [()]

    start = time.process_time()
    assert compile_filter('zookeeper.path matches "p+q"')(_zk_path("/" + "p" * 2_000_000)) is False
    assert time.process_time() - start < 1.5  # (about 3.5 s before)
    assert compile_filter('zookeeper.path matches "^/p+$"')(_zk_path("/" + "p" * 2_000_000)) is True
    assert "took more than 0.25 s on a value of 2,000,001 characters" in capsys.readouterr().err
