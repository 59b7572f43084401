"""The producer analyzer: real captures (transactions, retries after injected errors, acks
levels, codecs) checked against their decoded messages, and one synthetic case per finding."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support import CAPTURES, shared_path

from kdissect.cliutil import build, iter_capture
from kdissect.expert.analyzers import producers as mod
from kdissect.expert.analyzers.producers import Producers
from kdissect.expert.catalogue import Finding
from kdissect.expert.engine import Expert, Result
from kdissect.kafka.records_v2 import RECORD_COLUMNS
from kdissect.model import Field, Message, Pdu, Row, Severity, array, struct

TXN = CAPTURES / "kafka" / "mock_ck_transactions.pcap"


def decode(path: Path) -> list[Message]:
    side = path.with_name(path.name.split(".pcap")[0] + ".json")
    ports = json.loads(side.read_text()).get("ports") or [] if side.exists() else []
    registry, opts = build(tuple(f"{p}=kafka" for p in ports), 0, 64 << 20, False)
    return list(iter_capture(str(path), registry, opts, display_filter=lambda m: True))


def analyse(messages: list[Message]) -> Result:
    return Expert(analyzers=[Producers]).add_all(messages)


def run_capture(path: Path) -> Result:
    return analyse(decode(path))


def only(result: Result, key: str) -> Finding:
    found = [f for f in result.findings if f.kind.key == key]
    assert len(found) == 1, [f.summary for f in result.findings]
    return found[0]


def keys(result: Result) -> list[str]:
    return sorted(f.kind.key for f in result.findings)


# -- real captures ----------------------------------------------------------------------------


def test_a_committed_and_an_aborted_transaction() -> None:
    result = run_capture(TXN)
    # InitProducerId (41/42) gives 755285000 epoch 0; EndTxn commit at 62/63, abort at 68/69 after
    # AddPartitionsToTxn kd-txn[0] (64/65); Fetch responses 130 and 137 carry COMMIT and ABORT markers.
    aborted = only(result, "kafka.producer.txn_aborted")
    assert aborted.severity is Severity.WARNING
    assert aborted.values["transactional_id"] == "kd-txn-1" and aborted.values["producer_id"] == 755285000
    assert (aborted.values["aborted"], aborted.values["transactions"]) == (1, 2)
    assert aborted.values["examples"] == [{"frame": 68, "partitions": ["kd-txn[0]"], "groups": []}]
    assert {64, 68, 69} <= set(aborted.frames)
    assert "kd-txn[0]" in aborted.summary
    chat = only(result, "kafka.producer.transactions")
    assert chat.severity is Severity.CHAT and chat.frames == [62, 68]
    assert {k: chat.values[k] for k in ("committed", "aborted", "add_partitions", "commit_markers",
                                        "abort_markers", "open")} == {
        "committed": 1, "aborted": 1, "add_partitions": 2, "commit_markers": 1, "abort_markers": 1, "open": False}
    assert keys(result) == ["kafka.producer.transactions", "kafka.producer.txn_aborted"]
    assert result.charts["producers"] == [{
        "client_id": "kd-gen", "producer_id": 755285000, "transactional_id": "kd-txn-1", "acks": "all",
        "requests": 3, "batches": 3, "records": 8, "mean_records_per_batch": 2.667, "retries": 0, "errors": 0}]


def test_retries_after_injected_errors() -> None:
    result = run_capture(shared_path("captures", "kafka", "gen__mock_ck_errors.pcap"))
    # Producer 702412000 epoch 0, base sequence 0 on each partition: err-topic[2] (37, answered
    # NOT_LEADER_OR_FOLLOWER in 40) again in 71, [3] (38, REQUEST_TIMED_OUT in 41) in 74,
    # [1] (64, NOT_ENOUGH_REPLICAS in 65) in 67.
    retry = only(result, "kafka.producer.retry")
    assert retry.severity is Severity.NOTE and retry.count == 3
    assert retry.values["causes"] == {"NOT_LEADER_OR_FOLLOWER": 1, "REQUEST_TIMED_OUT": 1, "NOT_ENOUGH_REPLICAS": 1}
    got = {(e["partition"], e["first_frame"], e["answer_frame"], e["frame"], e["cause"]) for e in retry.values["examples"]}
    assert got == {(2, 37, 40, 71, "NOT_LEADER_OR_FOLLOWER"), (3, 38, 41, 74, "REQUEST_TIMED_OUT"),
                   (1, 64, 65, 67, "NOT_ENOUGH_REPLICAS")}
    assert all(e["base_sequence"] == 0 for e in retry.values["examples"])
    assert retry.frames == [37, 38, 40, 41, 64, 65, 67, 71, 74]
    assert keys(result) == ["kafka.producer.retry"]
    [row] = result.charts["producers"]
    assert (row["producer_id"], row["requests"], row["records"], row["retries"], row["errors"]) == (702412000, 7, 14, 3, 3)


def test_an_idempotent_producer_without_trouble() -> None:
    result = run_capture(shared_path("captures", "kafka", "gen__mock_ck_idempotent.pcap"))
    assert result.findings == []
    [row] = result.charts["producers"]
    assert (row["producer_id"], row["batches"], row["records"], row["retries"]) == (427136000, 4, 40, 0)
    assert set(result.charts["compression"]) == {"lz4"}


def test_acks_levels() -> None:
    result = run_capture(shared_path("captures", "kafka", "gen__mock_ck_produce_acks.pcap"))
    zero, one = only(result, "kafka.producer.acks_zero"), only(result, "kafka.producer.acks_one")
    assert zero.severity is Severity.WARNING and one.severity is Severity.NOTE
    assert zero.frames == [33, 35] and (zero.values["requests"], zero.values["records"]) == (2, 5)
    assert one.frames == [72, 83] and (one.values["requests"], one.values["records"]) == (2, 5)
    assert result.charts["producers"][0]["acks"] == "all/0/1"


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compression_per_codec(codec: str) -> None:
    messages = decode(shared_path("captures", "kafka", f"gen__mock_ck_codec_{codec}.pcap"))
    result = analyse(messages)
    row = result.charts["compression"][codec]
    inflated = wire = batches = 0
    for m in messages:
        if m.kind != "request" or m.info.get("op") != "Produce":
            continue
        for f in _walk(m.fields):
            if f.name == "batch":
                batches += 1
                records = f.child("records")
                assert records is not None
                wire += records.length
                label = re.search(r"(\d+) bytes decompressed", records.label or "")
                inflated += int(label.group(1)) if label else records.length
    assert batches == 4 and row == {"batches": 4, "wire_bytes": wire, "uncompressed_bytes": inflated,
                                    "ratio": round(inflated / wire, 3)}
    assert (row["ratio"] == 1.0) == (codec == "none") and row["ratio"] >= 1.0
    assert result.findings == []


def _walk(fields: list[Field]) -> list[Field]:
    out, stack = [], list(fields)
    while stack:
        f = stack.pop()
        out.append(f)
        if f.name != "batch":
            stack.extend(f.children or ())
    return out


# -- synthetic messages -----------------------------------------------------------------------


def batch(pid: int = -1, epoch: int = -1, seq: int = -1, records: int = 1, codec: int = 0, crc: int = 1,
          lengths: list[int] | None = None, wire: int = 20, control: int | None = None) -> Field:
    """A RecordBatch as records_v2 decodes it (records as Rows, or structs of a control batch)."""
    if control is None:
        rows: list[Field] = [Row("record", RECORD_COLUMNS, (n, 0, 0, i, i, 0, b"k", b"v", array("headers", [])), None)
                             for i, n in enumerate(lengths or [wire - 1] * records)]
    else:
        rows = [struct("record", [Field("offset", 4), struct("control", [Field("type", control)])])]
    head = [Field("base_offset", 0), Field("batch_length", 49 + wire), Field("magic", 2), Field("crc", crc),
            Field("attributes", codec | (0x30 if control is not None else 0)), Field("producer_id", pid),
            Field("producer_epoch", epoch), Field("base_sequence", seq), Field("records_count", records)]
    return struct("batch", [*head, array("records", rows, -1, wire)], -1, 61 + wire)


class Wire:
    """Builds messages in capture order, frame numbers and times counting up."""

    def __init__(self) -> None:
        self.frame = 0
        self.messages: list[Message] = []
        self.sent: dict[int, tuple[str, int]] = {}  # Produce request frame -> (topic, partition)

    def message(self, kind: str, op: str, fields: list[Field], src: str = "10.0.0.1:5000",
                info: dict[str, Any] | None = None, peer: Message | None = None) -> Message:
        self.frame += 1
        to_server = kind == "request"
        m = Message(Pdu(b"", [self.frame], float(self.frame), float(self.frame), to_server), 1,
                    src if to_server else "10.0.0.9:9092", "10.0.0.9:9092" if to_server else src, "kafka")
        m.info = {"op": op, **(info or {})}
        m.fields = fields
        m.peer = peer
        self.messages.append(m)
        return m

    def produce(self, b: Field, topic: str = "t", partition: int = 0, acks: int = -1, client: str = "app",
                src: str = "10.0.0.1:5000") -> Message:
        part = struct("p", [Field("index", partition), array("records", [b])])
        data = array("topic_data", [struct("t", [Field("name", topic), array("partition_data", [part])])])
        self.sent[self.frame + 1] = (topic, partition)
        return self.message("request", "Produce", [Field("acks", acks), data], src,
                            {"client_id": client, "acks": acks})

    def answer(self, req: Message, error: int = 0) -> Message:
        topic, partition = self.sent[req.frame]
        p = struct("p", [Field("index", partition), Field("error_code", error)])
        data = array("responses", [struct("t", [Field("name", topic), array("partition_responses", [p])])])
        return self.message("response", "Produce", [data], req.src, {"error_code": error}, peer=req)

    def call(self, op: str, fields: list[Field], answer: list[Field]) -> tuple[Message, Message]:
        req = self.message("request", op, fields, info={"client_id": "app"})
        return req, self.message("response", op, answer, peer=req)


def test_a_sequence_gap() -> None:
    w = Wire()
    w.answer(w.produce(batch(7, 0, 0, records=5)))
    w.answer(w.produce(batch(7, 0, 8, records=2)))  # 5, 6, 7 never seen
    w.answer(w.produce(batch(7, 0, 10, records=1)))
    w.answer(w.produce(batch(7, 0, 0, records=2, crc=2), partition=1))  # another partition starts afresh
    gap = only(analyse(w.messages), "kafka.producer.sequence_gap")
    assert gap.severity is Severity.WARNING and gap.frames == [3]
    assert (gap.values["gaps"], gap.values["missing_records"], gap.values["went_back"]) == (1, 3, 0)
    assert gap.values["examples"] == [{"topic": "t", "partition": 0, "expected": 5, "base_sequence": 8, "frame": 3}]
    assert "expected sequence 5, got 8" in gap.summary


def test_a_sequence_that_wraps_is_no_gap() -> None:
    w = Wire()
    top = mod.SEQUENCE_SPAN - 2
    w.answer(w.produce(batch(7, 0, top, records=2)))
    w.answer(w.produce(batch(7, 0, 0, records=1)))
    assert analyse(w.messages).findings == []


def test_a_duplicate_after_success() -> None:
    w = Wire()
    w.answer(w.produce(batch(7, 0, 0, records=2)))
    w.answer(w.produce(batch(7, 0, 0, records=2)), error=46)  # DUPLICATE_SEQUENCE_NUMBER
    result = analyse(w.messages)
    dup = only(result, "kafka.producer.duplicate_batch")
    assert dup.values["examples"][0] == {"topic": "t", "partition": 0, "base_sequence": 0, "first_frame": 1,
                                              "frame": 3, "cause": "written", "answer_frame": 2}
    assert dup.frames == [1, 2, 3]
    seq = only(result, "kafka.producer.sequence_error")
    assert seq.values["error"] == "DUPLICATE_SEQUENCE_NUMBER" and seq.severity is Severity.WARNING


def test_a_retry_after_no_answer() -> None:
    w = Wire()
    w.produce(batch(7, 0, 0, records=2))  # never answered
    w.answer(w.produce(batch(7, 0, 0, records=2)))
    retry = only(analyse(w.messages), "kafka.producer.retry")
    assert retry.severity is Severity.NOTE and retry.values["causes"] == {"no answer": 1}
    assert retry.values["examples"][0]["answer_frame"] is None and retry.frames == [1, 2]


def test_a_retry_without_idempotence_is_proved_by_the_crc() -> None:
    w = Wire()
    w.answer(w.produce(batch(crc=99, records=3)), error=6)  # NOT_LEADER_OR_FOLLOWER
    w.answer(w.produce(batch(crc=99, records=3), src="10.0.0.1:6000"))  # same host, new connection
    w.answer(w.produce(batch(crc=5, records=1)), error=7)
    w.answer(w.produce(batch(crc=6, records=1)))  # new records: nothing proves a retry
    result = analyse(w.messages)
    retry = only(result, "kafka.producer.retry")
    assert retry.severity is Severity.WARNING and retry.count == 1
    assert retry.values["causes"] == {"NOT_LEADER_OR_FOLLOWER": 1} and retry.frames == [1, 2, 3]
    assert "may have written them twice" in retry.summary
    [row] = result.charts["producers"]
    assert (row["producer_id"], row["retries"], row["errors"], row["requests"]) == (None, 1, 2, 4)


def test_an_out_of_order_sequence_is_an_error() -> None:
    w = Wire()
    w.answer(w.produce(batch(7, 0, 0)))
    w.answer(w.produce(batch(7, 0, 5)), error=45)
    result = analyse(w.messages)
    err = only(result, "kafka.producer.sequence_error")
    assert err.severity is Severity.ERROR and err.frames == [3, 4]
    assert err.values["error"] == "OUT_OF_ORDER_SEQUENCE_NUMBER" and err.values["answers"] == 1


def init(w: Wire, pid: int, epoch: int, txn: str | None = "tx", error: int = 0) -> None:
    w.call("InitProducerId", [Field("transactional_id", txn), Field("transaction_timeout_ms", 60000)],
           [Field("error_code", error), Field("producer_id", pid), Field("producer_epoch", epoch)])


def test_an_epoch_bump() -> None:
    w = Wire()
    init(w, 5, 0)
    init(w, 5, 1)
    w.produce(batch(5, 3, 0))  # a batch at a higher epoch still
    bump = only(analyse(w.messages), "kafka.producer.epoch_bump")
    assert bump.count == 2 and bump.frames == [4, 5]
    assert (bump.values["from_epoch"], bump.values["to_epoch"]) == (0, 3)
    assert "transactional id tx" in bump.summary


def add_partitions(w: Wire, pid: int, topics: dict[str, list[int]], error: int = 0) -> None:
    req = [Field("v3_and_below_transactional_id", "tx"), Field("v3_and_below_producer_id", pid),
           Field("v3_and_below_producer_epoch", 0),
           array("v3_and_below_topics", [struct("t", [Field("name", t), array("partitions", [Field("p", p) for p in ps])])
                                         for t, ps in topics.items()])]
    res = [array("results_by_topic_v3_and_below", [struct("t", [Field("name", t), array("results_by_partition", [
        struct("r", [Field("partition_index", p), Field("partition_error_code", error)]) for p in ps])])
        for t, ps in topics.items()])]
    w.call("AddPartitionsToTxn", req, res)


def end_txn(w: Wire, pid: int, committed: bool, error: int = 0) -> None:
    w.call("EndTxn", [Field("transactional_id", "tx"), Field("producer_id", pid), Field("producer_epoch", 0),
                      Field("committed", committed)], [Field("error_code", error)])


def test_a_transaction_left_open_and_a_failed_end() -> None:
    w = Wire()
    init(w, 9, 0)
    add_partitions(w, 9, {"a": [0, 1]})
    end_txn(w, 9, True, error=51)  # CONCURRENT_TRANSACTIONS: still open
    add_partitions(w, 9, {"b": [2]}, error=48)  # INVALID_TXN_STATE
    w.produce(batch(9, 0, 0))
    result = analyse(w.messages)
    left = only(result, "kafka.producer.txn_open")
    assert left.values["partitions"] == ["a[0]", "a[1]", "b[2]"] and left.values["timeout_ms"] == 60000
    assert left.values["open_s"] == 6.0 and left.first_ts == 3.0 and 3 in left.frames
    failed = only(result, "kafka.producer.txn_error")
    assert failed.values["errors"] == {"EndTxn CONCURRENT_TRANSACTIONS": 1, "AddPartitionsToTxn INVALID_TXN_STATE": 1}
    assert only(result, "kafka.producer.transactions").values["open"] is True


def test_an_aborted_transaction_confirmed_by_its_marker() -> None:
    w = Wire()
    init(w, 9, 0)
    add_partitions(w, 9, {"a": [0]})
    end_txn(w, 9, False)
    marker = array("records", [batch(9, 0, 0, control=0)])
    part = struct("p", [Field("partition_index", 0), marker])
    w.message("response", "Fetch", [array("responses", [struct("t", [Field("topic", "a"), array("partitions", [part])])])])
    result = analyse(w.messages)
    assert only(result, "kafka.producer.txn_aborted").values["examples"][0]["partitions"] == ["a[0]"]
    chat = only(result, "kafka.producer.transactions")
    assert (chat.values["aborted"], chat.values["abort_markers"], chat.values["commit_markers"]) == (1, 1, 0)


def test_an_empty_client_id_is_kept_as_it_is() -> None:
    """An empty client id is a client id (librdkafka allows it): its producer row says "", and
    "?" only stands for a request that names none."""
    w = Wire()
    for _ in range(mod.SMALL_BATCH_MIN):
        w.produce(batch(records=1, wire=30), acks=-1, client="")
    assert only(analyse(w.messages), "kafka.producer.small_batches").values["client_id"] == ""


def test_small_batches() -> None:
    w = Wire()
    for _ in range(mod.SMALL_BATCH_MIN):
        w.produce(batch(records=1, wire=30), acks=-1)
    w.produce(batch(records=9), topic="big")  # another topic, too few batches to judge
    small = only(analyse(w.messages), "kafka.producer.small_batches")
    n = mod.SMALL_BATCH_MIN
    assert small.values == {"client_id": "app", "batches": n, "records": n, "mean_records_per_batch": 1.0,
                            "mean_batch_bytes": 91.0, "topics": {"t": {"batches": n, "records": n, "bytes": 91 * n}}}


def test_small_batches_to_several_topics_make_one_finding_per_client() -> None:
    w = Wire()
    for _ in range(mod.SMALL_BATCH_MIN):
        w.produce(batch(records=1, wire=30), acks=-1)
        w.produce(batch(records=1, wire=30), topic="u", acks=-1)
    small = only(analyse(w.messages), "kafka.producer.small_batches")
    assert small.values["batches"] == small.count == 2 * mod.SMALL_BATCH_MIN
    assert set(small.values["topics"]) == {"t", "u"} and "to t, u" in small.summary


def test_poor_compression() -> None:
    w = Wire()
    for _ in range(mod.POOR_RATIO_MIN):
        w.produce(batch(codec=1, records=2, lengths=[50, 50], wire=100))  # 2 x (50 + 1) bytes inflated
    w.produce(batch(codec=4, records=2, lengths=[500, 500], wire=100))
    result = analyse(w.messages)
    poor = only(result, "kafka.producer.poor_compression")
    assert poor.values == {"codec": "gzip", "batches": 10, "wire_bytes": 1000, "uncompressed_bytes": 1020,
                           "ratio": 1.02}
    assert result.charts["compression"]["zstd"] == {"batches": 1, "wire_bytes": 100, "uncompressed_bytes": 1004,
                                                    "ratio": 10.04}


def test_a_batch_not_wholly_decoded_is_left_out_of_the_ratio() -> None:
    w = Wire()
    w.produce(batch(codec=2, records=5, lengths=[10], wire=40))  # one record of five shown
    assert analyse(w.messages).charts["compression"]["snappy"] == {
        "batches": 1, "wire_bytes": 40, "uncompressed_bytes": 0, "ratio": None}


def _hostile() -> list[list[Field]]:
    odd = Field("records", "not an array", hint="array")
    return [
        [],
        [Field("topic_data", 5)],
        [array("topic_data", [Field("x", None), struct("t", [Field("name", 3), array("partition_data", [
            struct("p", [Field("index", "zero"), array("records", [batch(pid=True, seq="1")])]),  # type: ignore[arg-type]
            struct("p", [Field("index", 1), array("records", [Field("batch", None, children=None), odd])]),
            struct("p", [Field("index", 2), array("records", [struct("batch", [Field("records_count", -4),
                                                                              Field("attributes", 3)])])])])])])],
        [array("responses", [struct("t", [array("partitions", [struct("p", [array("records", [
            struct("batch", [Field("attributes", 0x20), array("records", [Field("r", 1)])])])])])])])],
        [Field("transactional_id", b"\xff"), Field("committed", "yes"), array("transactions", [Field("t", None)])],
    ]


@pytest.mark.parametrize("op", ["Produce", "InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn",
                                "TxnOffsetCommit", "EndTxn", "Fetch"])
def test_broken_trees_raise_nothing(op: str) -> None:
    w = Wire()
    for fields in _hostile():
        req = w.message("request", op, fields, info={"client_id": None, "acks": "x"})
        w.message("response", op, fields, peer=req)
        w.message("response", op, fields)
    result = analyse(w.messages)
    json.dumps(result.to_json(), allow_nan=False)


def test_memory_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, cap in (("MAX_PRODUCERS", 5), ("MAX_PARTITIONS", 7), ("MAX_KEYS", 7), ("MAX_TXNS", 3),
                      ("MAX_TALLIES", 4), ("MAX_CLIENTS", 6)):
        monkeypatch.setattr(mod, name, cap)
    w = Wire()
    for i in range(40):
        w.answer(w.produce(batch(100 + i, 0, 0, records=2), partition=i, client=f"c{i}", acks=i % 2), error=45)
        w.produce(batch(100 + i, 0, 9), partition=i, client=f"c{i}")
        w.call("AddOffsetsToTxn", [Field("transactional_id", f"tx{i}"), Field("group_id", "g")], [Field("error_code", 0)])
    p = Expert(analyzers=[Producers])
    for m in w.messages:
        p.add(m)
    a = p.analyzers[0]
    assert isinstance(a, Producers)
    assert len(a.rows) <= 6 and len(a.sequences) <= 7 and len(a.epochs) <= 7 and len(a.txns) <= 3
    assert len(a.tallies) <= 4 and len(a.acks) <= 6 and len(a.volumes) <= 6
    result = p.finish()
    assert len(result.charts["producers"]) <= mod.TOP_ROWS


# -- the expert's own captures, against their sidecars ---------------------------------------------


def sidecar(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CAPTURES / "kafka" / f"{name}.json").read_text())
    return data


def test_producer_anomalies() -> None:
    result = run_capture(CAPTURES / "kafka" / "expert_producer_anomalies.pcap")
    side = sidecar("expert_producer_anomalies")
    facts, notable = side["produce_requests"], side["notable_requests"]
    assert keys(result) == sorted(["kafka.producer.acks_zero", "kafka.producer.acks_one", "kafka.producer.small_batches",
                                   "kafka.producer.retry", "kafka.producer.txn_aborted", "kafka.producer.txn_open",
                                   "kafka.producer.transactions"])
    for key, client in (("kafka.producer.acks_zero", "producer-acks0"), ("kafka.producer.acks_one", "producer-acks1")):
        f, fact = only(result, key), facts[client]
        assert f.values == {"client_id": client, "acks": fact["acks"], "requests": fact["requests"],
                            "records": fact["records"]}
        assert (f.frames[0], f.frames[-1]) == (fact["first_frame"], fact["last_frame"])
    small = only(result, "kafka.producer.small_batches")
    assert (small.values["client_id"], list(small.values["topics"])) == ("producer-tiny", ["audit-tiny"])
    assert small.values["batches"] == small.values["records"] == facts["producer-tiny"]["one_record_requests"] == 25
    assert small.frames[0] == facts["producer-tiny"]["first_frame"]
    # The idempotent producer sends audit-idem[0] sequence 0 three times, the first two answered
    # NOT_ENOUGH_REPLICAS.
    [again] = side["produce_batches_sent_again"]
    answers = [n["response_frame"] for n in notable if n["op"] == "Produce" and n["error"] == "NOT_ENOUGH_REPLICAS"]
    retry = only(result, "kafka.producer.retry")
    assert retry.values["producer_id"] == again["producer_id"] and retry.values["causes"] == {"NOT_ENOUGH_REPLICAS": 2}
    assert [(e["first_frame"], e["answer_frame"], e["frame"], e["base_sequence"]) for e in retry.values["examples"]] == [
        (again["frames"][i], answers[i], again["frames"][i + 1], again["base_sequence"]) for i in range(2)]
    assert retry.frames == sorted([*again["frames"], *answers])
    # txn-payments: AddPartitionsToTxn payments[0, 1] three times, EndTxn commit then abort; the
    # capture stops before the third transaction ends.
    txn = side["facts"]["producer-txn"]
    held = [f"{txn['topic']}[{i}]" for i in range(txn["partitions"])]
    pid = next(n["producer_id"] for n in notable if n.get("transactional_id") and n["op"] == "InitProducerId")
    adds = [n["frame"] for n in notable if n["op"] == "AddPartitionsToTxn"]
    abort = next(n for n in notable if n["op"] == "EndTxn" and n["committed"] is False)
    aborted = only(result, "kafka.producer.txn_aborted")
    assert aborted.values["examples"] == [{"frame": abort["frame"], "partitions": held, "groups": []}]
    assert {adds[1], abort["frame"], abort["response_frame"]} <= set(aborted.frames)
    assert aborted.values["producer_id"] == pid
    still = only(result, "kafka.producer.txn_open")
    assert still.frames == [adds[2]] and still.values["partitions"] == held
    assert still.values["producer_id"] == pid and still.values["end_txn_unanswered"] is False
    chat = only(result, "kafka.producer.transactions")
    outcomes = Counter(t["outcome"] for t in txn["transactions"])
    assert (chat.values["committed"], chat.values["aborted"], chat.values["add_partitions"], chat.values["open"]) == (
        outcomes["commit"], outcomes["abort"], len(adds), outcomes["open"] == 1)
    rows = {r["client_id"]: r for r in result.charts["producers"]}
    for client, fact in facts.items():
        assert (rows[client]["requests"], rows[client]["records"]) == (fact["requests"], fact["records"])
    assert rows["producer-idem"]["retries"] == rows["producer-idem"]["errors"] == 2
    assert rows["producer-txn"]["transactional_id"] == txn["transactional_id"]


def test_a_healthy_capture_has_nothing_to_say() -> None:
    result = run_capture(CAPTURES / "kafka" / "expert_healthy.pcap")
    assert result.findings == []
    fact = sidecar("expert_healthy")["produce_requests"]["clicks-producer"]
    [row] = result.charts["producers"]
    assert (row["client_id"], row["requests"], row["records"], row["acks"]) == ("clicks-producer", fact["requests"],
                                                                                fact["records"], "all")
