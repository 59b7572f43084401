#!/usr/bin/env python3
"""Record Kafka captures with known consumer-group and producer events: real clients
(confluent-kafka, i.e. librdkafka) against librdkafka's mock cluster, captured with tcpdump on
the loopback interface, each with a sidecar NAME.json stating what the clients saw.

    python3 tools/gen_expert_captures.py [--out captures/kafka] [SCENARIO ...]

Needs root (tcpdump -i lo), confluent-kafka and tcpdump. Unlike tools/gen_kafka_captures.py the
mock cluster (3 brokers on random 127.0.0.1 ports) runs in this process, so that a scenario can
create topics with a given partition count and make the mock fail requests while it runs.
Generations come from the clients' own `cgrp` debug log; assignments from their rebalance
callbacks; watermarks, positions and committed offsets from the consumer API. After each
recording the notable requests are located in the capture with kdissect and listed by frame.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from gen_kafka_captures import DEFAULT_OUT, SERVER, Tcpdump, _conf, _librdkafka  # noqa: E402

API_PRODUCE = 0
NOT_ENOUGH_REPLICAS = 19
# requests whose frames are listed in the sidecar, by scenario-independent operation name
NOTABLE_OPS = frozenset({
    "JoinGroup", "SyncGroup", "LeaveGroup", "OffsetCommit", "InitProducerId", "AddPartitionsToTxn",
    "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit",
})
NOTABLE_ERRORS_ONLY = frozenset({"Heartbeat", "ConsumerGroupHeartbeat", "Produce", "Fetch"})
# classic protocol: "JoinGroup response: GenerationId N"; KIP-848: "... response ... with epoch N"
GENERATION_RE = re.compile(r"GenerationId (-?\d+)|with epoch (-?\d+)")


# -- the mock cluster (in this process) ------------------------------------------------


class ControlledMock:
    """A 3-broker librdkafka mock cluster in this process, with topic creation and request
    error injection. Its handle makes no connection of its own (no bootstrap servers)."""

    def __init__(self, topics: dict[str, int]) -> None:
        lib = _librdkafka()
        vp, cp, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
        lib.rd_kafka_conf_new.restype = vp
        lib.rd_kafka_new.restype = vp
        lib.rd_kafka_new.argtypes = [ctypes.c_int, vp, cp, sz]
        lib.rd_kafka_destroy.argtypes = [vp]
        lib.rd_kafka_mock_cluster_new.restype = vp
        lib.rd_kafka_mock_cluster_new.argtypes = [vp, ctypes.c_int]
        lib.rd_kafka_mock_cluster_bootstraps.restype = cp
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
        lib.rd_kafka_mock_set_controller_id.argtypes = [vp, ctypes.c_int32]
        lib.rd_kafka_mock_topic_create.argtypes = [vp, cp, ctypes.c_int, ctypes.c_int]
        lib.rd_kafka_mock_push_request_errors_array.argtypes = [
            vp, ctypes.c_int16, sz, ctypes.POINTER(ctypes.c_int)]
        lib.rd_kafka_mock_cluster_destroy.argtypes = [vp]
        err = ctypes.create_string_buffer(512)
        self.lib = lib
        self.rk = lib.rd_kafka_new(0, lib.rd_kafka_conf_new(), err, 512)
        self.mc = lib.rd_kafka_mock_cluster_new(self.rk, 3)
        if not self.rk or not self.mc:
            sys.exit("mock cluster creation failed: " + err.value.decode())
        lib.rd_kafka_mock_set_controller_id(self.mc, 1)
        for name, partitions in topics.items():
            lib.rd_kafka_mock_topic_create(self.mc, name.encode(), partitions, 3)
        self.bootstrap: str = lib.rd_kafka_mock_cluster_bootstraps(self.mc).decode()
        self.ports = [int(x.rsplit(":", 1)[1]) for x in self.bootstrap.split(",")]

    def fail_next(self, api_key: int, codes: list[int]) -> None:
        """Answer the next len(codes) requests of api_key (any broker) with these errors."""
        arr = (ctypes.c_int * len(codes))(*codes)
        self.lib.rd_kafka_mock_push_request_errors_array(self.mc, api_key, len(codes), arr)

    def stop(self) -> None:
        self.lib.rd_kafka_mock_cluster_destroy(self.mc)
        self.lib.rd_kafka_destroy(self.rk)


# -- what the clients saw ------------------------------------------------------------------


class Journal:
    """Timestamped client-side events, written to the sidecar as `events`."""

    def __init__(self) -> None:
        self.t0 = time.time()
        self.events: list[dict[str, Any]] = []

    def note(self, client: str, event: str, **facts: Any) -> None:
        self.events.append({"t": round(time.time() - self.t0, 3), "client": client, "event": event, **facts})


class GenerationLog(logging.Handler):
    """Reads a client's `cgrp` debug log and notes each group generation it joins."""

    def __init__(self, journal: Journal, client: str) -> None:
        super().__init__(logging.DEBUG)
        self.journal, self.client = journal, client
        self.generations: list[int] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "JoinGroup response" not in text and "Heartbeat response" not in text:
            return
        m = GENERATION_RE.search(text)
        gen = int(next(g for g in m.groups() if g is not None)) if m else None
        if gen is not None and gen >= 0 and (not self.generations or self.generations[-1] != gen):
            self.generations.append(gen)
            self.journal.note(self.client, "generation", generation=gen, log=text[:200])


def _tps(parts: list[Any]) -> list[str]:
    return sorted(f"{tp.topic}[{tp.partition}]" for tp in parts)


def _group_consumer(journal: Journal, boot: str, client: str, group: str, topics: list[str],
                    **kw: Any) -> tuple[Any, GenerationLog]:
    """A subscribed group member whose rebalance callbacks and generations go to the journal."""
    from confluent_kafka import Consumer

    log = logging.getLogger(f"kd.{client}")
    log.propagate = False
    gens = GenerationLog(journal, client)
    log.addHandler(gens)
    log.setLevel(logging.DEBUG)
    conf = _conf(boot, client_id=client, group_id=group, auto_offset_reset="earliest",
                 enable_auto_commit=False, debug="cgrp", **kw)
    c = Consumer(conf, logger=log)
    owned: set[str] = set()

    def on_assign(consumer: Any, parts: list[Any]) -> None:
        owned.update(_tps(parts))
        journal.note(client, "assign", partitions=_tps(parts), owned=sorted(owned))

    def on_revoke(consumer: Any, parts: list[Any]) -> None:
        owned.difference_update(_tps(parts))
        journal.note(client, "revoke", partitions=_tps(parts), owned=sorted(owned))

    def on_lost(consumer: Any, parts: list[Any]) -> None:
        owned.difference_update(_tps(parts))
        journal.note(client, "lost", partitions=_tps(parts), owned=sorted(owned))

    c.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    return c, gens


def _drain(consumers: dict[str, Any], seconds: float, counts: dict[str, int]) -> None:
    """Poll every consumer in turn for `seconds`, counting the records each receives."""
    end = time.time() + seconds
    while time.time() < end:
        for name, c in consumers.items():
            m = c.poll(0.05)
            if m is not None and not m.error():
                counts[name] = counts.get(name, 0) + 1


def _commit(journal: Journal, client: str, c: Any) -> None:
    from confluent_kafka import KafkaException

    try:
        done = c.commit(asynchronous=False)
    except KafkaException as e:
        journal.note(client, "commit_failed", error=e.args[0].name())
        return
    offsets = {f"{tp.topic}[{tp.partition}]": tp.offset for tp in done or [] if tp.offset >= 0}
    journal.note(client, "commit", offsets=offsets)


def _produce(boot: str, topic: str, partitions: int, n: int, tag: str, **kw: Any) -> dict[str, int]:
    """Write n records round-robin over the partitions; return the records per partition."""
    from confluent_kafka import Producer

    p = Producer(_conf(boot, **kw))
    per: dict[str, int] = {}
    for i in range(n):
        part = i % partitions
        p.produce(topic, key=b"%s-%d" % (tag.encode(), i), value=b"%s record %05d " % (tag.encode(), i) * 3,
                  partition=part)
        per[f"{topic}[{part}]"] = per.get(f"{topic}[{part}]", 0) + 1
        p.poll(0)
    p.flush(20)
    return per


# -- scenarios ---------------------------------------------------------------------------


def s_cooperative_rebalance(mock: ControlledMock, journal: Journal) -> dict[str, Any]:
    """Group orders-cg on topic orders (4 partitions), cooperative-sticky: consumer-a joins
    alone and consumes, consumer-b joins (incremental rebalance moves two partitions from
    consumer-a to consumer-b), both consume and commit, consumer-b closes (LeaveGroup) and
    consumer-a gets its partitions back, consumes and commits, then closes."""
    boot, group = mock.bootstrap, "orders-cg"
    kw = {"partition_assignment_strategy": "cooperative-sticky", "session_timeout_ms": 6000,
          "heartbeat_interval_ms": 500}
    counts: dict[str, int] = {}
    produced = [_produce(boot, "orders", 4, 40, "first", client_id="orders-producer", linger_ms=5)]
    a, gen_a = _group_consumer(journal, boot, "consumer-a", group, ["orders"], **kw)
    _drain({"consumer-a": a}, 5, counts)
    _commit(journal, "consumer-a", a)
    b, gen_b = _group_consumer(journal, boot, "consumer-b", group, ["orders"], **kw)
    _drain({"consumer-a": a, "consumer-b": b}, 8, counts)
    produced.append(_produce(boot, "orders", 4, 40, "second", client_id="orders-producer", linger_ms=5))
    _drain({"consumer-a": a, "consumer-b": b}, 3, counts)
    _commit(journal, "consumer-a", a)
    _commit(journal, "consumer-b", b)
    journal.note("consumer-b", "close")
    b.close()
    _drain({"consumer-a": a}, 6, counts)
    produced.append(_produce(boot, "orders", 4, 40, "third", client_id="orders-producer", linger_ms=5))
    _drain({"consumer-a": a}, 3, counts)
    _commit(journal, "consumer-a", a)
    journal.note("consumer-a", "close")
    a.close()
    return {"group": group, "topic": "orders", "partitions": 4, "produced_per_batch": produced,
            "consumed": counts, "generations": {"consumer-a": gen_a.generations,
                                                "consumer-b": gen_b.generations}}


def s_consumer_lag(mock: ControlledMock, journal: Journal) -> dict[str, Any]:
    """A producer writes 3000 records fast to topic metrics (2 partitions); consumer lag-reader
    in group metrics-cg reads with small fetches (fetch.max.bytes 1024,
    max.partition.fetch.bytes 1024, a 1 KB pre-fetch queue) and commits every 250 records, so
    its lag starts near 1500 per partition and shrinks; after 1200 records it stops polling for
    6 s, longer than max.poll.interval.ms 4000 (session 3000): the client leaves the group
    (LeaveGroup), loses its partitions and rejoins on its next poll, resumes from the committed
    offsets (re-reading what it had not committed), reads to the end and commits."""
    from confluent_kafka import TopicPartition

    boot, group, topic = mock.bootstrap, "metrics-cg", "metrics"
    total, stall_after, stall_s = 3000, 1200, 6.0
    produced = _produce(boot, topic, 2, total, "metric", client_id="metrics-producer", linger_ms=20,
                        batch_size=4096, acks="all")
    c, gens = _group_consumer(journal, boot, "lag-reader", group, [topic], fetch_max_bytes=1024,
                              max_partition_fetch_bytes=1024, message_max_bytes=1000,
                              queued_max_messages_kbytes=1, queued_min_messages=1,
                              fetch_queue_backoff_ms=150, max_poll_interval_ms=4000,
                              session_timeout_ms=3000, heartbeat_interval_ms=500)
    tps = [TopicPartition(topic, p) for p in range(2)]
    ends = {f"{topic}[{p}]": produced[f"{topic}[{p}]"] for p in range(2)}
    reached: dict[str, int] = {}
    got, t_end = 0, time.time() + 40
    samples: list[dict[str, Any]] = []
    while reached != ends and time.time() < t_end:
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        got += 1
        reached[f"{m.topic()}[{m.partition()}]"] = m.offset() + 1
        if got % 250 == 0 or reached == ends:
            samples.append(_lag_sample(journal, c, tps, got))
            _commit(journal, "lag-reader", c)
        if got == stall_after:
            journal.note("lag-reader", "stall_start", seconds=stall_s, consumed=got)
            time.sleep(stall_s)
            journal.note("lag-reader", "stall_end")
    committed = {f"{tp.topic}[{tp.partition}]": tp.offset for tp in c.committed(tps, timeout=5)}
    c.close()
    return {"group": group, "topic": topic, "partitions": 2, "produced": produced, "consumed": got,
            "lag_samples": samples, "final_committed": committed, "generations": gens.generations,
            "max_poll_interval_ms": 4000, "session_timeout_ms": 3000, "stall_s": stall_s,
            "stall_after_records": stall_after}


def _lag_sample(journal: Journal, c: Any, tps: list[Any], got: int) -> dict[str, Any]:
    """High watermark, position and lag per partition as the consumer sees them now."""
    sample: dict[str, Any] = {"consumed": got, "partitions": {}}
    for tp in c.position(tps):
        _lo, hw = c.get_watermark_offsets(tp, cached=True)
        pos = tp.offset
        key = f"{tp.topic}[{tp.partition}]"
        sample["partitions"][key] = {"high_watermark": hw, "position": pos,
                                     "lag": hw - pos if hw >= 0 and pos >= 0 else None}
    journal.note("lag-reader", "lag", **sample)
    return sample


def _producer_run(journal: Journal, boot: str, client: str, topic: str, n: int, flush_every: int,
                  **kw: Any) -> dict[str, Any]:
    """Produce n records to partition 0 of topic, flushing after every `flush_every` records
    (0: once at the end); note the delivery outcome of each."""
    from confluent_kafka import Producer

    p = Producer(_conf(boot, client_id=client, **kw))
    outcome: dict[str, Any] = {"delivered": 0, "errors": [], "offsets": []}

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            outcome["errors"].append(err.name())
            return
        outcome["delivered"] += 1
        if msg.offset() is not None and msg.offset() >= 0:  # acks=0: no offset is known
            outcome["offsets"].append(msg.offset())

    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"%s payload %d" % (client.encode(), i), partition=0,
                  on_delivery=report)
        if flush_every and (i + 1) % flush_every == 0:
            p.flush(10)
    p.flush(20)
    offs = outcome.pop("offsets")
    outcome.update(first_offset=min(offs, default=None), last_offset=max(offs, default=None),
                   records=n, config={k: v for k, v in kw.items()})
    journal.note(client, "produced", **outcome)
    return outcome


def s_producer_anomalies(mock: ControlledMock, journal: Journal) -> dict[str, Any]:
    """Producers one after the other, each with its own client.id and topic: producer-acks0
    (acks=0, 40 records flushed by tens: 4 Produce requests without responses), producer-acks1
    (acks=1, likewise 4 requests), producer-tiny (linger.ms=0,
    batch.size=200, 25 records each flushed alone: 25 one-record Produce requests),
    producer-idem (idempotent; the mock answers its first two Produce requests with
    NOT_ENOUGH_REPLICAS, so the same producer id and sequence are sent three times), and
    producer-txn (transactional.id txn-payments: one committed transaction of 5 records, one
    aborted of 3, then a third left open: 4 records produced and acknowledged, the capture
    stops before EndTxn)."""
    boot = mock.bootstrap
    out: dict[str, Any] = {}
    out["producer-acks0"] = _producer_run(journal, boot, "producer-acks0", "audit-acks0", 40, 10,
                                          acks=0, linger_ms=5)
    out["producer-acks1"] = _producer_run(journal, boot, "producer-acks1", "audit-acks1", 40, 10,
                                          acks=1, linger_ms=5)
    out["producer-tiny"] = _producer_run(journal, boot, "producer-tiny", "audit-tiny", 25, 1,
                                         linger_ms=0, batch_size=200, acks="all")
    journal.note("mock", "fail_next_produce", errors=["NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS"])
    mock.fail_next(API_PRODUCE, [NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS])
    out["producer-idem"] = _producer_run(journal, boot, "producer-idem", "audit-idem", 10, 0,
                                         enable_idempotence=True, linger_ms=20, retry_backoff_ms=100)
    out["producer-txn"] = _transactions(journal, boot)
    return out


def _transactions(journal: Journal, boot: str) -> dict[str, Any]:
    """Committed, aborted, then open transaction of producer-txn on topic payments."""
    from confluent_kafka import Producer

    client = "producer-txn"
    p = Producer(_conf(boot, client_id=client, transactional_id="txn-payments", linger_ms=5))
    p.init_transactions(20)
    plan = (("commit", 5), ("abort", 3), ("open", 4))
    for outcome, n in plan:
        p.begin_transaction()
        for i in range(n):
            p.produce("payments", key=b"%s-%d" % (outcome.encode(), i), value=b"%s txn record %d" % (
                outcome.encode(), i), partition=i % 2)
        p.flush(20)
        if outcome == "commit":
            p.commit_transaction(20)
        elif outcome == "abort":
            p.abort_transaction(20)
        journal.note(client, f"transaction_{outcome}", records=n)
    OPEN_TXN.append(p)
    return {"transactional_id": "txn-payments", "topic": "payments", "partitions": 2,
            "transactions": [{"outcome": o, "records": n} for o, n in plan]}


# producers whose transaction must stay open until the capture has stopped
OPEN_TXN: list[Any] = []


def s_healthy(mock: ControlledMock, journal: Journal) -> dict[str, Any]:
    """A healthy workload: clicks-producer writes 2000 records to topic clicks (3 partitions)
    in 10 waves of 200, 0.5 s apart, with acks=all, linger.ms 20 and batch.size 64 KB;
    clicks-reader, the only member of group clicks-cg, reads them as they come, commits every
    500 records (the last commit at the end), then closes."""
    from confluent_kafka import Producer, TopicPartition

    boot, group, topic, total, waves = mock.bootstrap, "clicks-cg", "clicks", 2000, 10
    c, gens = _group_consumer(journal, boot, "clicks-reader", group, [topic], session_timeout_ms=10000,
                              heartbeat_interval_ms=1000)
    p = Producer(_conf(boot, client_id="clicks-producer", acks="all", linger_ms=20, batch_size=65536))
    produced: dict[str, int] = {}
    got, t_end = 0, time.time() + 40
    _drain({"clicks-reader": c}, 4, {})
    for i in range(total):
        key = f"{topic}[{i % 3}]"
        p.produce(topic, key=b"click-%d" % i, value=b"click record %05d " % i * 3, partition=i % 3)
        produced[key] = produced.get(key, 0) + 1
        if (i + 1) % (total // waves) == 0:
            p.flush(10)
            got += _read(c, 0.5, got, journal)
    while got < total and time.time() < t_end:
        got += _read(c, 0.5, got, journal)
    tps = [TopicPartition(topic, n) for n in range(3)]
    committed = {f"{tp.topic}[{tp.partition}]": tp.offset for tp in c.committed(tps, timeout=5)}
    c.close()
    return {"group": group, "topic": topic, "partitions": 3, "produced": produced, "consumed": got,
            "final_committed": committed, "generations": gens.generations}


def _read(c: Any, seconds: float, got: int, journal: Journal) -> int:
    """Poll for `seconds`, committing after every 500th record; return the records read."""
    n, end = 0, time.time() + seconds
    while time.time() < end:
        m = c.poll(0.05)
        if m is not None and not m.error():
            n += 1
            if (got + n) % 500 == 0:
                _commit(journal, "clicks-reader", c)
    return n


def s_kip848_rebalance(mock: ControlledMock, journal: Journal) -> dict[str, Any]:
    """The consumer group protocol of KIP-848 (group.protocol=consumer): kip848-a joins group
    inventory-cg on topic inventory (4 partitions) with ConsumerGroupHeartbeat, kip848-b joins
    (the broker-side assignor moves partitions to it), both consume and commit, kip848-b closes
    (leaves with member epoch -1) and kip848-a gets all partitions back, consumes and commits.
    The `generation` events are the member epochs the clients log."""
    boot, group = mock.bootstrap, "inventory-cg"
    counts: dict[str, int] = {}
    produced = [_produce(boot, "inventory", 4, 40, "first", client_id="inventory-producer", linger_ms=5)]
    kw = {"group_protocol": "consumer"}
    a, gen_a = _group_consumer(journal, boot, "kip848-a", group, ["inventory"], **kw)
    _drain({"kip848-a": a}, 5, counts)
    _commit(journal, "kip848-a", a)
    b, gen_b = _group_consumer(journal, boot, "kip848-b", group, ["inventory"], **kw)
    _drain({"kip848-a": a, "kip848-b": b}, 6, counts)
    produced.append(_produce(boot, "inventory", 4, 40, "second", client_id="inventory-producer", linger_ms=5))
    _drain({"kip848-a": a, "kip848-b": b}, 3, counts)
    _commit(journal, "kip848-a", a)
    _commit(journal, "kip848-b", b)
    journal.note("kip848-b", "close")
    b.close()
    _drain({"kip848-a": a}, 4, counts)
    produced.append(_produce(boot, "inventory", 4, 40, "third", client_id="inventory-producer", linger_ms=5))
    _drain({"kip848-a": a}, 2, counts)
    _commit(journal, "kip848-a", a)
    journal.note("kip848-a", "close")
    a.close()
    return {"group": group, "topic": "inventory", "partitions": 4, "produced_per_batch": produced,
            "consumed": counts, "generations": {"kip848-a": gen_a.generations, "kip848-b": gen_b.generations}}


# name -> (function, topics to create with their partition counts)
Scenario = Callable[[ControlledMock, Journal], dict[str, Any]]
SCENARIOS: dict[str, tuple[Scenario, dict[str, int]]] = {
    "expert_cooperative_rebalance": (s_cooperative_rebalance, {"orders": 4}),
    "expert_consumer_lag": (s_consumer_lag, {"metrics": 2}),
    "expert_producer_anomalies": (s_producer_anomalies, {
        "audit-acks0": 1, "audit-acks1": 1, "audit-tiny": 1, "audit-idem": 1, "payments": 2}),
    "expert_healthy": (s_healthy, {"clicks": 3}),
    "expert_kip848_rebalance": (s_kip848_rebalance, {"inventory": 4}),
}


# -- notable requests, located in the capture --------------------------------------------


# top-level request and response fields copied into the rows of notable requests
DETAIL_FIELDS = ("group_id", "generation_id", "member_id", "transactional_id", "producer_id",
                 "producer_epoch", "committed", "protocol_name", "leader")


def _details(*messages: Any) -> dict[str, Any]:
    from kdissect.expert.tree import value

    out: dict[str, Any] = {}
    for m in messages:
        out.update({k: v for k in DETAIL_FIELDS if (v := value(m, k)) is not None})
    return out


def _batches(m: Any) -> Iterator[tuple[Any, Any, Any]]:
    """(topic, partition, batch) of each record batch of a Produce request."""
    from kdissect.expert.tree import elements, value

    for topic in elements(m, "topic_data"):
        for part in elements(topic, "partition_data"):
            for batch in elements(part, "records"):
                yield value(topic, "name"), value(part, "index"), batch


def _heartbeat_change(req: Any, resp: Any) -> dict[str, Any] | None:
    """A ConsumerGroupHeartbeat that joins (epoch 0), leaves (epoch -1), or whose answer
    changes the member epoch or assigns partitions: the epochs and assigned partitions."""
    from kdissect.expert.tree import elements, number, top

    sent, got = number(req, "member_epoch"), number(resp, "member_epoch")
    parts = sorted(p.value for t in elements(top(resp, "assignment"), "topic_partitions")
                   for p in elements(t, "partitions") if isinstance(p.value, int))
    if sent not in (0, -1) and sent == got and not parts:
        return None
    return {"member_epoch_sent": sent, "member_epoch": got, "assigned_partitions": parts}


class Annotator:
    """Reads a decoded capture: rows for notable requests, and Produce requests per client."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.produce: dict[str, dict[str, Any]] = {}
        self.sequences: dict[tuple[Any, ...], list[int]] = {}

    def add(self, m: Any) -> None:
        if m.protocol != "kafka":
            return
        op = m.info.get("op")
        if m.kind == "request" and op == "Produce":
            self._produce(m)
        if m.kind != "response" or m.peer is None:
            return
        err = m.info.get("error")
        extra = _heartbeat_change(m.peer, m) if op == "ConsumerGroupHeartbeat" else None
        if op in NOTABLE_OPS or (op in NOTABLE_ERRORS_ONLY and err) or extra:
            req = m.peer
            self.rows.append({"frame": req.frame, "response_frame": m.frame, "op": op,
                              "version": req.info.get("version"), "client_id": req.info.get("client_id"),
                              "error": err, **_details(req, m), **(extra or {})})

    def _produce(self, m: Any) -> None:
        from kdissect.expert.tree import number, value

        client = str(m.info.get("client_id"))
        row = self.produce.setdefault(client, {"requests": 0, "records": 0, "acks": value(m, "acks"),
                                               "first_frame": m.frame, "one_record_requests": 0})
        row["requests"] += 1
        row["last_frame"] = m.frame
        n = 0
        for topic, part, batch in _batches(m):
            n += number(batch, "records_count") or 0
            pid = number(batch, "producer_id")
            if pid is not None and pid >= 0:
                key = (client, pid, value(batch, "producer_epoch"), topic, part, value(batch, "base_sequence"))
                self.sequences.setdefault(key, []).append(m.frame)
        row["records"] += n
        row["one_record_requests"] += n == 1

    def result(self) -> dict[str, Any]:
        repeated = [{"client_id": k[0], "producer_id": k[1], "producer_epoch": k[2], "topic": k[3],
                     "partition": k[4], "base_sequence": k[5], "frames": frames}
                    for k, frames in self.sequences.items() if len(frames) > 1]
        return {"notable_requests": self.rows, "produce_requests": self.produce,
                "produce_batches_sent_again": repeated}


def capture_facts(pcap: str) -> dict[str, Any]:
    """What the capture holds: notable requests by frame, Produce requests per client."""
    from kdissect.pipeline import dissect_file

    annotator = Annotator()
    for m in dissect_file(pcap):
        annotator.add(m)
    return annotator.result()


@contextmanager
def recording(pcap: str, topics: dict[str, int]) -> Iterator[tuple[ControlledMock, list[str]]]:
    mock = ControlledMock(topics)
    dump = Tcpdump(pcap, mock.ports)
    stats: list[str] = []
    try:
        yield mock, stats
    finally:
        stats.append(dump.stop())
        for p in OPEN_TXN:
            p.abort_transaction(20)
        OPEN_TXN.clear()
        mock.stop()


def run(name: str, out: str) -> None:
    import confluent_kafka

    fn, topics = SCENARIOS[name]
    pcap = os.path.join(out, name + ".pcap")
    journal = Journal()
    with recording(pcap, topics) as (mock, stats):
        ports = mock.ports
        facts = fn(mock, journal)
    meta = {
        "capture_file": os.path.basename(pcap),
        "capture_stats": stats[0],
        "clients": f"confluent-kafka {confluent_kafka.__version__}",
        "duration_s": round(time.time() - journal.t0, 1),
        "events": journal.events,
        "facts": facts,
        "ports": ports,
        "protocol": "kafka",
        "scenario": " ".join((fn.__doc__ or "").split()),
        "server": SERVER.format(confluent_kafka.libversion()[0]),
        "topics": topics,
    }
    _write_sidecar(os.path.join(out, name + ".json"), meta)
    print(f"{name}: {os.path.getsize(pcap)} bytes, {stats[0]}")


def annotate(name: str, out: str) -> None:
    """Add what NAME.pcap holds (notable requests by frame, Produce requests) to NAME.json."""
    sidecar = os.path.join(out, name + ".json")
    with open(sidecar) as f:
        meta = json.load(f)
    meta.update(capture_facts(os.path.join(out, name + ".pcap")))
    _write_sidecar(sidecar, meta)


def _write_sidecar(path: str, meta: dict[str, Any]) -> None:
    with open(path, "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--annotate-only", action="store_true",
                    help="only (re)write the notable request frames of existing captures")
    ap.add_argument("scenarios", nargs="*", help="any of: " + ", ".join(SCENARIOS))
    a = ap.parse_args()
    unknown = set(a.scenarios) - set(SCENARIOS)
    if unknown:
        ap.error("unknown scenario: " + ", ".join(sorted(unknown)))
    os.makedirs(a.out, exist_ok=True)
    for name in a.scenarios or list(SCENARIOS):
        if not a.annotate_only:
            run(name, a.out)
        annotate(name, a.out)


if __name__ == "__main__":
    main()
