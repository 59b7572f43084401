"""Messages dissected again from their own bytes, for a store that no longer holds them.

While the store indexes a capture, `Replay.add` keeps each message's PDU (Message.data) in a
spill file (spill.py) and, in a few arrays, what the transport gave it (completion time,
direction, frames and framing diagnostics when they are not just its first frame) and which
earlier message of its conversation set the dissector state it was decoded in (`context`).
`Replay.message(i)` then feeds a fresh conversation state the PDUs the message depends on, in
order, and the message's own: its request when it is a response (Kafka's API key and version,
ZooKeeper's opcode, RocketMQ's request code, Pulsar's topic come from the request), and per
protocol (CONTEXT):

- Kafka: the SaslHandshake request a SaslAuthenticate depends on (its mechanism), the
  SaslHandshake v0 response that turned the exchange into bare SASL tokens for a token;
- ZooKeeper: the first message of each side of the conversation (the handshake, the
  four-letter word, which packet is the first a side sent);
- Pulsar: the PRODUCER or SUBSCRIBE command that named the topic of a producer or consumer id.

Capture-wide learned state (Kafka topic ids, TopicHistory) is given as it was when the message
was decoded: the pipeline decodes messages in output order, so that is what the messages
before it taught. The message's own transport facts (number, frames, times, stream, endpoints,
TLS, framing diagnostics, the match of a request) come back from the arrays.

A message is not dissected again (`Replay.message` gives None: the store decodes its
conversation again from the capture) when its dependencies pass MAX_CONTEXT messages, when
Kafka topic ids were forgotten before it (more than topicids.MAX_IDS learned), or when its
bytes are not in the spill file (it was closed).
"""

from __future__ import annotations

import pickle
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kdissect.diagnostics import TRANSPORT
from kdissect.dissect.base import CaptureState, Options, run_dissector
from kdissect.kafka.topicids import (
    ID_PATHS,
    ID_SINCE,
    MAX_IDS,
    TopicIds,
    id_of,
    learnable,
    name_of,
    structs_at,
)
from kdissect.model import Diagnostic, Match, Message, Pdu
from kdissect.pipeline import drop_body, link
from kdissect.pipeline.detect import DissectorRegistry
from kdissect.pipeline.output import HELD_BYTES, HOLD_MESSAGES
from kdissect.pulsar.conversation import remember
from kdissect.tui.columns import Columns
from kdissect.tui.spill import Spill

MAX_CONTEXT = 64  # messages fed before one, at most; past that its conversation is decoded again
DROPPED_KEY = "pipeline.body_dropped"
# Diagnostics the framer and TCP reassembly attach to a PDU (Message.diagnostics starts with them).
PDU_KEYS = frozenset(e.key for e in TRANSPORT) - {DROPPED_KEY}
# A closed conversation's facts are forgotten once this many messages have followed: by then
# the ordered output has released all of its messages (it holds back at most HOLD_MESSAGES).
FORGET_AFTER = 2 * HOLD_MESSAGES + 1

# bits per message
TO_SERVER = 1
DROPPED = 2  # its body was dropped by the pipeline's budget (pipeline.output.drop_body)
TOPIC_IDS = 4  # a Kafka message that reads or teaches topic ids (kafka/topicids.py)


@dataclass(slots=True)
class StreamFacts:
    """What one conversation's later messages depend on, by store index (-1: none)."""

    first_client: int = -1
    first_server: int = -1
    sasl_request: int = -1  # Kafka: the latest SaslHandshake request
    sasl_response: int = -1  # ... and response
    producers: dict[Any, int] = field(default_factory=dict)  # Pulsar: producer id -> PRODUCER
    consumers: dict[Any, int] = field(default_factory=dict)  # consumer id -> SUBSCRIBE


def _kafka_context(facts: StreamFacts, i: int, m: Message) -> int:
    op = m.info.get("op")
    if op == "SaslHandshake":
        if m.kind == "request":
            facts.sasl_request = i
        else:
            facts.sasl_response = i
        return -1
    if op == "SaslToken":
        return facts.sasl_response
    return facts.sasl_request if op == "SaslAuthenticate" else -1


def _zookeeper_context(facts: StreamFacts, i: int, m: Message) -> int:
    if m.to_server:
        if facts.first_client < 0:
            facts.first_client = i
            return facts.first_server
        return facts.first_client
    if facts.first_server < 0:
        facts.first_server = i
        return facts.first_client
    return facts.first_server


def _pulsar_context(facts: StreamFacts, i: int, m: Message) -> int:
    info = m.info
    op, pid, cid = info.get("op"), info.get("producer_id"), info.get("consumer_id")
    if op == "PRODUCER" and info.get("topic") is not None:
        remember(facts.producers, pid, i)
        return -1
    if op == "SUBSCRIBE" and info.get("topic") is not None:
        remember(facts.consumers, cid, i)
        return -1
    found = facts.producers.get(pid, -1) if pid is not None else -1
    if found < 0 and cid is not None:
        found = facts.consumers.get(cid, -1)
    return found


# protocol -> (facts of the message's conversation, its index, the message) -> the index of the
# earlier message it depends on (-1: none); it also records what the message sets.
CONTEXT: dict[str, Callable[[StreamFacts, int, Message], int]] = {
    "kafka": _kafka_context,
    "zookeeper": _zookeeper_context,
    "pulsar": _pulsar_context,
}


class TopicHistory:
    """Kafka topic id -> name as learned over the capture, with the store index of the message
    that taught each name, so that the table a message was decoded with can be rebuilt."""

    def __init__(self) -> None:
        self.names: dict[str, list[tuple[int, str]]] = {}
        self.entries = 0
        self.overflow: int | None = None  # the first index after which ids may have been forgotten

    def add(self, i: int, m: Message) -> bool:
        """Learn what m teaches; whether m reads or teaches topic ids."""
        op, version = m.info.get("op_code"), m.info.get("version")
        if m.protocol != "kafka" or not isinstance(op, int):
            return False
        key = (op, m.kind == "request")
        paths = ID_PATHS.get(key)
        if paths is None or (isinstance(version, int) and 0 <= version < ID_SINCE[key]):
            return False
        for path in paths:
            for kids in structs_at(m.fields, path):
                tid, name = id_of(kids), name_of(kids)
                if tid is not None and name is not None and learnable(tid, name):
                    self._learn(i, tid, name)
        return True

    def _learn(self, i: int, tid: str, name: str) -> None:
        known = self.names.get(tid)
        if known is not None and known[-1][1] == name:
            return
        if self.entries >= MAX_IDS:
            if self.overflow is None:
                self.overflow = i
            return
        self.names.setdefault(tid, []).append((i, name))
        self.entries += 1

    def forgotten(self, i: int) -> bool:
        """Whether the decoder's table may have forgotten ids by the time it decoded message i."""
        return self.overflow is not None and i > self.overflow

    def as_of(self, i: int) -> CaptureState:
        """The capture state with the topic ids the messages before i taught."""
        state = CaptureState()
        if self.names:
            ids = state.get(TopicIds)
            for tid, taught in self.names.items():
                name = next((n for at, n in reversed(taught) if at < i), None)
                if name is not None:
                    ids.learn(tid, name)
        return state


def pdu_diagnostics(m: Message) -> list[Diagnostic]:
    """The diagnostics m's PDU brought (the framer's, TCP reassembly's): its first ones."""
    out = []
    for d in m.diagnostics:
        if d.key not in PDU_KEYS:
            break
        out.append(d)
    return out


class Replay:
    """Each message's bytes and transport facts, by store index, to dissect it again."""

    def __init__(self) -> None:
        self.spill = Spill()
        self.offset = array("q")  # of its record in the spill file (-1: not kept)
        self.size = array("I")  # of its PDU
        self.meta = array("I")  # of the rest of its record: its frames and PDU diagnostics, pickled
        self.ts_end = array("d")
        self.context = array("i")
        self.bits = array("B")
        self.capture = ""
        self.tls: dict[int, Any] = {}  # stream -> its connection's TlsInfo
        self.topics = TopicHistory()
        self._facts: dict[int, StreamFacts] = {}
        self._closing: deque[tuple[int, int]] = deque()  # (stream, forget once this many messages)

    def add(self, i: int, m: Message) -> None:
        """Message i (added in store order, before the columns publish it)."""
        self.capture = m.capture
        if m.tls is not None:
            self.tls.setdefault(m.stream, m.tls)
        diags = pdu_diagnostics(m)
        meta = b"" if m.frames == [m.frame] and not diags else pickle.dumps((list(m.frames), diags))
        self.offset.append(self.spill.append(bytes(m.data) + meta))
        self.size.append(len(m.data))
        self.meta.append(len(meta))
        self.ts_end.append(m.ts_end)
        rule = CONTEXT.get(m.protocol)
        self.context.append(-1 if rule is None else rule(self._stream(m.stream), i, m))
        bits = TO_SERVER if m.to_server else 0
        if any(d.key == DROPPED_KEY for d in m.diagnostics):
            bits |= DROPPED
        if self.topics.add(i, m):
            bits |= TOPIC_IDS
        self.bits.append(bits)
        self._forget(i)

    def _stream(self, stream: int) -> StreamFacts:
        facts = self._facts.get(stream)
        if facts is None:
            facts = self._facts[stream] = StreamFacts()
        return facts

    def conversation_ended(self, conv: Any) -> None:
        """A pipeline observer: the conversation's facts go once its messages are all out."""
        self._closing.append((conv.index, len(self.offset) + FORGET_AFTER))

    def _forget(self, i: int) -> None:
        while self._closing and self._closing[0][1] <= i:
            self._facts.pop(self._closing.popleft()[0], None)

    def close(self) -> None:
        self.spill.close()

    # -- dissecting again ----------------------------------------------------------------

    def order(self, cols: Columns, i: int) -> list[int] | None:
        """The indices to dissect, in order, to get message i (i last); None when it is decoded
        from its conversation instead (see the module's docstring)."""
        if self.bits[i] & TOPIC_IDS and self.topics.forgotten(i):
            return None
        need: set[int] = set()
        todo = [i]
        while todo:
            j = todo.pop()
            if j in need:
                continue
            need.add(j)
            if len(need) > MAX_CONTEXT or self.offset[j] < 0:
                return None
            todo += [k for k in (cols.peer[j], self.context[j]) if 0 <= k < j]
        return sorted(need)

    def message(self, cols: Columns, i: int, registry: DissectorRegistry, opts: Options) -> Message | None:
        """Message i dissected again from the spill file; None when it cannot be (`order`)."""
        order = self.order(cols, i)
        proto = cols.protocols.names[cols.proto[i]]
        dissector = registry.find(proto)
        if order is None or dissector is None:
            return None
        state = dissector.new_state()
        state.capture = self.topics.as_of(i)
        m: Message | None = None
        for j in order:
            m = self._pdu_message(cols, j, proto)
            if m is None:
                return None
            run_dissector(dissector, m, state, opts)
            if m.peer is not None:
                link(m.peer, m)
        assert m is not None
        return self._finish(cols, i, m)

    def _pdu_message(self, cols: Columns, j: int, proto: str) -> Message | None:
        """Message j as the pipeline hands it to the dissector."""
        size = self.size[j]
        record = self.spill.read(self.offset[j], size + self.meta[j]) if self.offset[j] >= 0 else None
        if record is None:
            return None
        frames, diags = pickle.loads(record[size:]) if len(record) > size else ([cols.frame[j]], [])
        pdu = Pdu(record[:size], frames, cols.ts[j], self.ts_end[j], bool(self.bits[j] & TO_SERVER), diags)
        stream = cols.stream(j)
        m = Message(pdu, stream, *cols.endpoints(j), proto)
        m.capture = self.capture
        m.tls = self.tls.get(stream)
        return m

    def _finish(self, cols: Columns, i: int, m: Message) -> Message:
        """The facts the pipeline adds after dissection: number, a request's match, a dropped body."""
        m.number = i + 1
        p = cols.peer[i]
        if p > i and m.expects_response:  # as the pipeline's link()
            m.match = Match(cols.frame[p], cols.kinds.names[cols.kind[p]], max(0.0, self.ts_end[p] - self.ts_end[i]))
        if self.bits[i] & DROPPED:
            drop_body(m, HELD_BYTES)
        return m

    def frames(self, cols: Columns, i: int) -> list[int] | None:
        """Message i's frames (None when its record is gone)."""
        meta = self.spill.read(self.offset[i] + self.size[i], self.meta[i]) if self.offset[i] >= 0 else None
        if meta is None:
            return None
        return list(pickle.loads(meta)[0]) if meta else [cols.frame[i]]

    def nbytes(self) -> int:
        """The memory the arrays take (the spill file is on disk)."""
        arrays = (self.offset, self.size, self.meta, self.ts_end, self.context, self.bits)
        return sum(a.buffer_info()[1] * a.itemsize for a in arrays)
