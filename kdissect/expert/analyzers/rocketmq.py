"""RocketMQ answers that matter to producers and consumers: failed sends, a busy broker (its
flow control), sends stored without the durability asked for (flush or replication timeouts),
route lookups and pulls refused (missing topic, no permission, service not available) and
PULL_OFFSET_MOVED answers (a consumer's offset out of the queue's range). Other error codes are
the broker analyzer's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from kdissect.analysis.stats import bounded, request_facts
from kdissect.expert.catalogue import Evidence, Finding, Kind
from kdissect.expert.series import Clock
from kdissect.expert.tree import text, value
from kdissect.model import Message, Severity

MAX_KEYS = 1000  # (kind, broker, topic, code) rows; the others share OTHER
OTHER = "(other)"
SEND_OPS = frozenset({"SEND_MESSAGE", "SEND_MESSAGE_V2", "SEND_BATCH_MESSAGE", "SEND_REPLY_MESSAGE",
                      "SEND_REPLY_MESSAGE_V2", "CONSUMER_SEND_MSG_BACK"})
BUSY = frozenset({"SYSTEM_BUSY"})
DEGRADED = frozenset({"FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"})
REFUSED = frozenset({"NO_PERMISSION", "SERVICE_NOT_AVAILABLE"})
INTERNAL_TOPICS = ("%RETRY%", "%DLQ%")  # clients look their routes up whether they exist or not

KIND_SEND_FAILED = Kind(
    "rocketmq.send_failed", Severity.ERROR, "rocketmq", "RocketMQ send failed",
    "The broker did not store the message: the code and remark say why (TOPIC_NOT_EXIST: create the topic "
    "or allow auto-creation; NO_PERMISSION: the broker or topic is not writable, or ACL; "
    "SERVICE_NOT_AVAILABLE: a slave or a broker shutting down; MESSAGE_ILLEGAL: size or properties).")
KIND_BUSY = Kind(
    "rocketmq.broker_busy", Severity.WARNING, "rocketmq", "RocketMQ broker busy",
    "The broker turned requests away with SYSTEM_BUSY (its flow control: page cache busy, send queue "
    "waited too long). Check the broker's disk and sendMessageThreadPoolNums, osPageCacheBusyTimeOutMills "
    "and waitTimeMillsInSendQueue; spread the load over more brokers.")
KIND_DEGRADED = Kind(
    "rocketmq.store_degraded", Severity.WARNING, "rocketmq", "RocketMQ send stored without the durability asked",
    "The message was stored but the flush to disk or the copy to the slave did not finish in time "
    "(FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT) or no slave was there (SLAVE_NOT_AVAILABLE): check the disk "
    "latency, the slave's health and the network between master and slave.")
KIND_TOPIC = Kind(
    "rocketmq.topic_not_exist", Severity.NOTE, "rocketmq", "RocketMQ topic does not exist",
    "A route lookup or pull named a topic the name server or broker does not know: create it, check its "
    "name, or allow auto-creation (producers then fall back to the default topic's route).")
KIND_REFUSED = Kind(
    "rocketmq.refused", Severity.WARNING, "rocketmq", "RocketMQ request refused",
    "The broker refused a pull or another request: NO_PERMISSION (the broker or topic is not readable, "
    "or ACL) or SERVICE_NOT_AVAILABLE (a slave, or a broker shutting down). Check the broker's "
    "brokerPermission and the topic's perm.")
KIND_OFFSET_MOVED = Kind(
    "rocketmq.pull_offset_moved", Severity.WARNING, "rocketmq", "RocketMQ consumer offset out of range",
    "The consumer pulled from an offset the queue no longer (or does not yet) hold: messages were deleted "
    "before they were consumed (retention shorter than the lag), or the offset store is stale. The "
    "consumer jumps to the offset the broker suggests, skipping or replaying messages.")


def kind_of(op: str, code: str, topic: str) -> Kind | None:
    """The finding a non-success answer to `op` belongs to, or None (the broker analyzer's)."""
    if code in BUSY:
        return KIND_BUSY
    if op in SEND_OPS:
        return KIND_DEGRADED if code in DEGRADED else KIND_SEND_FAILED
    if code == "TOPIC_NOT_EXIST":
        return None if topic.startswith(INTERNAL_TOPICS) else KIND_TOPIC
    if code in REFUSED:
        return KIND_REFUSED
    if code == "PULL_OFFSET_MOVED":
        return KIND_OFFSET_MOVED
    return None


@dataclass(slots=True)
class Answers:
    """The answers behind one finding (named by their queue ids) and the first remark they gave."""

    evidence: Evidence = field(default_factory=Evidence)
    remark: str | None = None


class RocketMQ:
    KINDS: ClassVar[tuple[Kind, ...]] = (KIND_SEND_FAILED, KIND_BUSY, KIND_DEGRADED, KIND_TOPIC, KIND_REFUSED,
                                         KIND_OFFSET_MOVED)

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        # (kind key, broker, topic, group, code, op) -> its answers
        self.rows: dict[tuple[str, str, str, str, str, str], Answers] = {}
        self.kinds = {k.key: k for k in self.KINDS}

    def add(self, m: Message) -> None:
        if m.protocol != "rocketmq" or m.kind != "response":
            return
        code = text(m.info.get("error"))
        if code is None or code == "SUCCESS":
            return
        facts = request_facts(m)
        op = text(facts.get("op")) or text(m.info.get("op")) or "?"
        topic = text(facts.get("topic")) or text(m.info.get("topic")) or "?"
        kind = kind_of(op, code, topic)
        if kind is None:
            return
        group = text(facts.get("group")) or text(m.info.get("group")) or ""
        key = (kind.key, m.src, topic, group, code, op)
        row = bounded(self.rows, key, (kind.key, OTHER, OTHER, "", code, op), Answers, MAX_KEYS)
        queue = facts.get("queue_id", m.info.get("queue_id"))
        row.evidence.add(m, None if queue is None else str(queue))
        row.remark = row.remark or _remark(m)

    def conversation_ended(self, conv: Any) -> None:
        return None

    def finish(self) -> list[Finding]:
        return [self._finding(key, t) for key, t in self.rows.items()]

    def _finding(self, key: tuple[str, str, str, str, str, str], row: Answers) -> Finding:
        kind_key, broker, topic, group, code, op = key
        kind = self.kinds[kind_key]
        ev = row.evidence
        who = f" of group {group}" if group else ""
        queues = f", queues {', '.join(ev.names)}" if ev.names else ""
        remark = f": {row.remark}" if row.remark else ""
        summary = f"RocketMQ {broker} answered {code} to {ev.count} {op} on topic {topic}{who}{queues}{remark}"
        return kind.finding(
            summary, "rocketmq", evidence=ev,
            values={"broker": broker, "topic": topic, "group": group or None, "op": op, "code": code,
                    "answers": ev.count, "queues": ev.names, "remark": row.remark})

    def charts(self) -> dict[str, Any]:
        rows = [{"op": k[5], "code": k[4], "topic": k[2], "broker": k[1], "count": r.evidence.count}
                for k, r in sorted(self.rows.items(), key=lambda kv: -kv[1].evidence.count)]
        return {"rocketmq_codes": rows[:50]}


def _remark(m: Message) -> str | None:
    """The remark of a response (the broker's words on the code), cut to one line."""
    said = text(value(m, "remark"))
    return None if not said else " ".join(said.split())[:200]
