"""Kafka producers as the wire shows them: the sequences of idempotent producers (gaps,
batches sent again, sequence errors, epoch bumps), retries, transactions (committed, aborted,
left open, failed requests; COMMIT/ABORT markers in Fetch responses confirm them), acks
levels, batch sizes, and compression per codec.

Produce requests carry RecordBatches (magic 2) whose headers name the producer id, epoch and
base sequence: a batch whose base sequence was sent before on the same partition is a resend,
a retry when the first got an error or no answer, a duplicate when it was acknowledged. A
producer without idempotence (producer id -1) has no sequence: a batch with the CRC and record
count of one the broker had just refused, from the same client host to the same partition, is
the same batch sent again. Every table is capped; what falls past a cap is left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kdissect.analysis.stats import request_facts
from kdissect.analysis.throughput import short_name
from kdissect.expert.catalogue import MAX_EVIDENCE, Evidence, Finding, Kind
from kdissect.expert.series import Clock
from kdissect.expert.tree import elements, first, get_or_make, host_of, integer, number, put, text, top, value
from kdissect.kafka.compression import codec_name
from kdissect.kafka.error_codes import error_name
from kdissect.model import ARRAY, Field, Message, Row, Severity
from kdissect.text import plural

CHAT, NOTE, WARNING, ERROR = Severity.CHAT, Severity.NOTE, Severity.WARNING, Severity.ERROR

MAX_PRODUCERS = 1000  # (client id, producer id) rows; later ones share one OTHER row
MAX_PARTITIONS = 10_000  # sequences followed: (producer id, epoch, topic, partition)
MAX_KEYS = 10_000  # producer ids followed (epochs, names), refused batches held, markers counted
MAX_TXNS = 1000  # transactional ids followed
MAX_TXN_PARTITIONS = 100  # partitions named per open transaction
MAX_TALLIES = 2000  # (kind, subject) pairs that make findings
MAX_EXAMPLES = 10  # examples kept per finding
MAX_CLIENTS = 1000  # client ids (acks) and (client id, topic) pairs (batch sizes)
WINDOW = 8  # latest batches per partition kept to recognise a resend (librdkafka keeps <= 5 in flight)
SEQUENCE_SPAN = 2**31  # sequences wrap to 0 after Integer.MAX_VALUE
SMALL_BATCH_RECORDS = 2.0  # mean records per batch under which batches are small...
SMALL_BATCH_MIN = 20  # ...over at least this many batches
POOR_RATIO = 1.1  # a codec's uncompressed / compressed bytes under which it gains little...
POOR_RATIO_MIN = 10  # ...over at least this many batches
TOP_ROWS = 50  # rows of the producers chart
OTHER = "(other)"
CONTROL = 0x20  # RecordBatch attributes: a control batch (transaction markers)
BATCH_HEADER = 61  # bytes of a RecordBatch before its records
ACKS_NAMES = {-1: "all", 0: "0", 1: "1"}
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}

# Produce answers about a producer's sequence or epoch, and how bad each is: the first three
# fail the producer (or its transaction), the others it recovers from.
SEQUENCE_ERRORS: dict[str, Severity] = {
    "OUT_OF_ORDER_SEQUENCE_NUMBER": ERROR, "INVALID_PRODUCER_EPOCH": ERROR, "PRODUCER_FENCED": ERROR,
    "DUPLICATE_SEQUENCE_NUMBER": WARNING, "UNKNOWN_PRODUCER_ID": WARNING, "INVALID_PRODUCER_ID_MAPPING": WARNING,
}

SEQUENCE_GAP = Kind(
    "kafka.producer.sequence_gap", WARNING, "producer", "Sequence gap in an idempotent producer's batches",
    "the batches between the sequences were not seen: look for requests the capture missed (TCP gaps, "
    "a broker not captured) or a producer that reset its sequences; a broker answers such a batch "
    "OUT_OF_ORDER_SEQUENCE_NUMBER")
DUPLICATE = Kind(
    "kafka.producer.duplicate_batch", WARNING, "producer", "Batch sent again after it was acknowledged",
    "the producer did not take the broker's answer (request.timeout.ms shorter than the broker's response "
    "time, a closed connection): an idempotent producer's copy is dropped (DUPLICATE_SEQUENCE_NUMBER), "
    "another producer's is written twice")
RETRY = Kind(
    "kafka.producer.retry", NOTE, "producer", "Produce batches retried",
    "the causes are the broker's answers (leader changes, NOT_ENOUGH_REPLICAS, timeouts) or a missing "
    "answer: look at the brokers behind them; a producer without idempotence (enable.idempotence=false) "
    "may write a retried batch twice")
SEQUENCE_ERROR = Kind(
    "kafka.producer.sequence_error", WARNING, "producer", "Broker refused a producer's sequence or epoch",
    "OUT_OF_ORDER_SEQUENCE_NUMBER: a batch was lost or reordered (retries without idempotence, "
    "max.in.flight.requests.per.connection > 5); INVALID_PRODUCER_EPOCH or PRODUCER_FENCED: another "
    "instance with the same transactional.id took over; UNKNOWN_PRODUCER_ID: the broker dropped the "
    "producer's state (retention, transactional.id.expiration.ms)")
EPOCH_BUMP = Kind(
    "kafka.producer.epoch_bump", NOTE, "producer", "Producer epoch bumped",
    "a transactional producer that initialises again (a restart, a zombie fenced) or an idempotent "
    "producer recovering from a sequence error (KIP-360) bumps its epoch: look at what came before")
TXN_ABORTED = Kind(
    "kafka.producer.txn_aborted", WARNING, "producer", "Transaction aborted",
    "read_committed consumers skip the aborted records: the producer's log says why it aborted "
    "(a failed send, a timeout, a fenced producer)")
TXN_OPEN = Kind(
    "kafka.producer.txn_open", WARNING, "producer", "Transaction still open at the end of the capture",
    "an open transaction holds back the last stable offset of its partitions, so read_committed "
    "consumers wait until it ends or transaction.timeout.ms aborts it; a longer capture tells whether it ends")
TXN_ERROR = Kind(
    "kafka.producer.txn_error", WARNING, "producer", "Transaction request failed",
    "CONCURRENT_TRANSACTIONS and COORDINATOR_LOAD_IN_PROGRESS are retried by the client; "
    "INVALID_PRODUCER_EPOCH or PRODUCER_FENCED mean another instance took the transactional.id; "
    "INVALID_TXN_STATE a transaction that timed out or a client bug")
TRANSACTIONS = Kind(
    "kafka.producer.transactions", CHAT, "producer", "Transactions of a transactional id",
    "what the capture shows of the transactional id; COMMIT and ABORT markers in Fetch responses confirm "
    "the outcomes")
ACKS_ZERO = Kind(
    "kafka.producer.acks_zero", WARNING, "producer", "Producer sends with acks=0",
    "with acks=0 the broker never answers: a lost or refused batch goes unnoticed; use acks=all (with "
    "enable.idempotence) for data that must not be lost")
ACKS_ONE = Kind(
    "kafka.producer.acks_one", NOTE, "producer", "Producer sends with acks=1",
    "with acks=1 the leader answers before its followers have the records: they are lost if it fails "
    "over first; acks=all with min.insync.replicas >= 2 avoids that")
SMALL_BATCHES = Kind(
    "kafka.producer.small_batches", NOTE, "producer", "Producer sends very small batches",
    "a request for every record or two costs throughput and broker CPU: raise linger.ms (5-50 ms) and "
    "batch.size so that records share batches, unless latency matters more")
POOR_COMPRESSION = Kind(
    "kafka.producer.poor_compression", NOTE, "producer", "Compression gains little",
    "the records barely shrink with this codec (already compressed or random data, or batches too small): "
    "batch more (linger.ms, batch.size), try zstd or lz4, or send uncompressed to save CPU")


@dataclass(frozen=True, slots=True)
class Batch:
    """A RecordBatch of a Produce request, as its header and records tell it."""

    topic: str
    partition: int
    producer_id: int
    epoch: int
    base_sequence: int
    records: int
    crc: int | None
    codec: int
    size: int  # the batch on the wire
    wire: int  # its records' bytes on the wire (compressed when compressed)
    plain: int | None  # its records' bytes uncompressed; None when not every record was decoded


@dataclass(slots=True)
class Sent:
    """A batch sent on a followed partition and what came of it."""

    frame: int
    records: int
    outcome: str | None = None  # None: no answer yet; "": written; else the error answered
    answer: int = 0  # the answer's frame


@dataclass(slots=True)
class Sequence:
    """One partition of one producer id and epoch: the next base sequence expected and the
    latest batches by base sequence."""

    expected: int
    recent: dict[int, Sent] = field(default_factory=dict)


@dataclass(slots=True)
class Refused:
    """A batch of a producer without idempotence that the broker refused."""

    crc: int | None
    records: int
    frame: int
    answer: int
    error: str


@dataclass(slots=True)
class ProducerRow:
    client_id: str
    producer_id: int
    transactional_id: str | None = None
    acks: Counter[int] = field(default_factory=Counter)
    requests: int = 0
    batches: int = 0
    records: int = 0
    retries: int = 0
    errors: int = 0


@dataclass(slots=True)
class Volume:
    """Requests or batches sent (`sent`: how many, when, their frames), their records and bytes."""

    sent: Evidence = field(default_factory=Evidence)
    records: int = 0
    bytes: int = 0


@dataclass(slots=True)
class Codec:
    sent: Evidence = field(default_factory=Evidence)  # the batches
    wire: int = 0
    plain: int = 0
    measured_wire: int = 0  # wire bytes of the batches whose uncompressed size is known


@dataclass(slots=True)
class Tally:
    """The occurrences behind one finding (`evidence`), their causes, examples and numbers."""

    evidence: Evidence = field(default_factory=Evidence)
    causes: Counter[str] = field(default_factory=Counter)
    examples: list[dict[str, Any]] = field(default_factory=list)
    numbers: Counter[str] = field(default_factory=Counter)

    @property
    def count(self) -> int:
        return self.evidence.count

    def add(self, ts: float, frames: tuple[int, ...], example: dict[str, Any] | None = None,
            cause: str | None = None) -> None:
        self.evidence.note(ts)
        for f in frames:
            if f > 0:
                self.evidence.cite(f)
        if cause is not None:
            self.causes[cause] += 1
        if example is not None and len(self.examples) < MAX_EXAMPLES:
            self.examples.append(example)


@dataclass(slots=True)
class Txn:
    """One transactional id: its producer, the open transaction, and its counts."""

    producer_id: int = -1
    epoch: int = -1
    client_id: str | None = None
    timeout_ms: int | None = None
    partitions: dict[tuple[str, int], None] = field(default_factory=dict)  # of the open transaction
    groups: list[str] = field(default_factory=list)
    opened: tuple[float, int] | None = None  # (ts, frame) of the open transaction's first request
    ending: tuple[bool, int] | None = None  # an EndTxn sent (committed, frame) and not answered yet
    committed: int = 0
    aborted: int = 0
    add_partitions: int = 0
    add_offsets: int = 0
    offset_commits: int = 0
    first_ts: float = 0.0
    last_ts: float = 0.0
    frames: list[int] = field(default_factory=list)  # of the open transaction
    ends: list[int] = field(default_factory=list)  # EndTxn requests answered


def _name(topic: Any) -> str:
    return short_name(topic) if isinstance(topic, str) and topic else "?"


def _varint_size(n: int) -> int:
    """The bytes of a non-negative number as a zigzag varint."""
    z = n << 1
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


def _record_bytes(records: list[Field]) -> int | None:
    """The records' bytes as a batch holds them uncompressed (each: a varint length and its body)."""
    total = 0
    for r in records:
        length = r.values[0] if type(r) is Row and not r.materialized and r.values else number(r, "length")
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            return None
        total += length + _varint_size(length)
    return total


def _batch(b: Field, topic: str, partition: int) -> Batch | None:
    if b.name != "batch" or not b.children:
        return None
    head = {c.name: c.value for c in b.children if c.children is None}
    count = integer(head.get("records_count"))
    attributes = integer(head.get("attributes")) or 0
    codec = attributes & 0x07
    records = b.child("records")
    data = records if records is not None and records.hint == ARRAY else b.child("records_data")
    wire = data.length if data is not None else max(b.length - BATCH_HEADER, 0)
    listed = records.children or [] if records is not None and records.hint == ARRAY else None
    if count is None or count < 0:
        count = len(listed) if listed is not None else 0
    plain = wire if codec == 0 else _record_bytes(listed) if listed is not None and len(listed) == count else None
    return Batch(topic, partition, _or_none(head.get("producer_id")), _or_none(head.get("producer_epoch")),
                 _or_none(head.get("base_sequence")), count, integer(head.get("crc")), codec, max(b.length, 0),
                 max(wire, 0), plain)


def _or_none(v: Any) -> int:
    """An integer header value; -1 (Kafka's "none") when it is missing or not an integer."""
    n = integer(v)
    return -1 if n is None else n


def produce_batches(m: Message) -> Iterator[Batch]:
    """The RecordBatches of a Produce request."""
    for t in elements(m, "topic_data"):
        topic = _name(first(t, "name", "topic_id"))
        for p in elements(t, "partition_data"):
            partition = number(p, "index")
            if partition is None:
                continue
            for b in elements(p, "records"):
                batch = _batch(b, topic, partition)
                if batch is not None:
                    yield batch


def produce_answers(m: Message) -> Iterator[tuple[str, int, str]]:
    """(topic, partition, error name or "") of each partition of a Produce response."""
    for t in elements(m, "responses"):
        topic = _name(first(t, "name", "topic_id"))
        for p in elements(t, "partition_responses"):
            partition, code = number(p, "index"), number(p, "error_code")
            if partition is not None:
                yield topic, partition, error_name(code) if code else ""


def _topic_partitions(node: Field | Message | None, name: str) -> Iterator[tuple[str, int]]:
    """(topic, partition) of an array of topics each with an array of partition numbers."""
    for t in elements(node, name):
        topic = _name(value(t, "name"))
        for p in elements(t, "partitions"):
            if integer(p.value) is not None:
                yield topic, p.value


def _errors(node: Field | Message | None, *path: str) -> Iterator[str]:
    """The error names of the partitions under the arrays `path` (the last holds the codes)."""
    if not path:
        return
    for e in elements(node, path[0]):
        if len(path) > 1:
            yield from _errors(e, *path[1:])
        else:
            code = first(e, "partition_error_code", "error_code")
            if integer(code):
                yield error_name(code)


def _ratio(c: Codec) -> float | None:
    return round(c.plain / c.measured_wire, 3) if c.measured_wire > 0 else None


def _where(topic: str, partition: int) -> str:
    return f"{topic}[{partition}]"


def _causes(causes: Counter[str]) -> str:
    return ", ".join(f"{name} x{n}" for name, n in causes.most_common())


def _client(m: Message) -> str:
    """The client id a request names (cut as the tables keep it; "" stays ""), else "?"."""
    client = text(m.info.get("client_id"))
    return "?" if client is None else client


class Producers:
    KINDS: ClassVar[tuple[Kind, ...]] = (
        SEQUENCE_GAP, DUPLICATE, RETRY, SEQUENCE_ERROR, EPOCH_BUMP, TXN_ABORTED, TXN_OPEN, TXN_ERROR,
        TRANSACTIONS, ACKS_ZERO, ACKS_ONE, SMALL_BATCHES, POOR_COMPRESSION)

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.last_ts: float | None = None
        self.rows: dict[tuple[str, int], ProducerRow] = {}
        self.sequences: dict[tuple[int, int, str, int], Sequence] = {}
        self.refused: dict[tuple[str, str, str, int], Refused] = {}
        self.epochs: dict[int, int] = {}
        self.clients: dict[int, str] = {}  # producer id -> client id
        self.txn_of: dict[int, str] = {}  # producer id -> transactional id
        self.txns: dict[str, Txn] = {}
        self.markers: dict[tuple[str, int, int], tuple[int, str]] = {}  # (topic, partition, offset) -> (pid, type)
        self.acks: dict[tuple[str, int], Volume] = {}
        self.volumes: dict[tuple[str, str], Volume] = {}
        self.codecs: dict[str, Codec] = {}
        self.tallies: dict[tuple[Kind, tuple[Any, ...]], Tally] = {}
        self.handlers: dict[tuple[str, str], Callable[[Message], None]] = {
            ("request", "Produce"): self._produce, ("response", "Produce"): self._produce_answer,
            ("response", "InitProducerId"): self._init_answer,
            ("request", "AddPartitionsToTxn"): self._add_partitions,
            ("response", "AddPartitionsToTxn"): self._add_partitions_answer,
            ("request", "AddOffsetsToTxn"): self._add_offsets,
            ("response", "AddOffsetsToTxn"): self._txn_answer,
            ("request", "TxnOffsetCommit"): self._offset_commit,
            ("response", "TxnOffsetCommit"): self._txn_answer,
            ("request", "EndTxn"): self._end, ("response", "EndTxn"): self._end_answer,
            ("response", "Fetch"): self._fetch_answer,
        }

    # -- messages ---------------------------------------------------------------------------

    def add(self, m: Message) -> None:
        if m.protocol != "kafka":
            return
        self.last_ts = m.ts if self.last_ts is None else max(self.last_ts, m.ts)
        handler = self.handlers.get((m.kind, str(request_facts(m).get("op"))))
        if handler is not None:
            handler(m)

    def conversation_ended(self, conv: Any) -> None:
        return None

    def _tally(self, kind: Kind, subject: tuple[Any, ...]) -> Tally | None:
        return get_or_make(self.tallies, (kind, subject), Tally, MAX_TALLIES)

    def _row(self, client: str, pid: int) -> ProducerRow:
        key = (client, pid)
        row = self.rows.get(key)
        if row is None:
            if len(self.rows) >= MAX_PRODUCERS:
                key = (OTHER, -1)
                row = self.rows.get(key)
            if row is None:
                row = self.rows[key] = ProducerRow(*key)
        return row

    def _produce(self, m: Message) -> None:
        client = _client(m)
        acks = integer(m.info.get("acks"))
        batches = list(produce_batches(m))
        pid = next((b.producer_id for b in batches if b.producer_id >= 0), -1)
        row = self._row(client, pid)
        txn = text(value(m, "transactional_id"))
        if txn is not None:
            row.transactional_id = txn
        row.requests += 1
        if acks is not None:
            row.acks[acks] += 1
            self._acks(client, acks, sum(b.records for b in batches), m)
        for b in batches:
            row.batches += 1
            row.records += b.records
            self._volume(client, b, m)
            self._codec(b, m)
            if b.producer_id >= 0:
                self._producer_id(b.producer_id, b.epoch, client, m, "a batch")
                if b.base_sequence >= 0:
                    row.retries += self._sequence(b, client, m)
            else:
                row.retries += self._resent(b, client, m)

    def _acks(self, client: str, acks: int, records: int, m: Message) -> None:
        if acks not in (0, 1):
            return
        v = get_or_make(self.acks, (client, acks), Volume, MAX_CLIENTS)
        if v is not None:
            v.sent.note(m.ts, m.frame)  # requests
            v.records += records

    def _volume(self, client: str, b: Batch, m: Message) -> None:
        v = get_or_make(self.volumes, (client, b.topic), Volume, MAX_CLIENTS)
        if v is not None:
            v.sent.note(m.ts, m.frame)
            v.records += b.records
            v.bytes += b.size

    def _codec(self, b: Batch, m: Message) -> None:
        c = get_or_make(self.codecs, codec_name(b.codec), Codec, 8)
        if c is None:
            return
        c.sent.note(m.ts, m.frame)
        c.wire += b.wire
        if b.plain is not None:
            c.plain += b.plain
            c.measured_wire += b.wire

    def _producer_id(self, pid: int, epoch: int, client: str | None, m: Message, source: str,
                     quiet: bool = False) -> None:
        """A producer id seen at an epoch: a higher epoch than the one known is a bump (unless
        `quiet`: a bump the protocol makes on every transaction end)."""
        if client is not None:
            put(self.clients, pid, client, MAX_KEYS)
        known = self.epochs.get(pid)
        if known is None:
            if len(self.epochs) < MAX_KEYS:
                self.epochs[pid] = epoch
            return
        if epoch <= known:
            return
        self.epochs[pid] = epoch
        if quiet:
            return
        t = self._tally(EPOCH_BUMP, (pid,))
        if t is not None:
            t.add(m.ts, (m.frame,), {"from": known, "to": epoch, "frame": m.frame, "source": source})
            t.numbers["last"] = epoch
            t.numbers.setdefault("first", known)

    def _sequence(self, b: Batch, client: str, m: Message) -> int:
        """Follow a batch's base sequence on its partition; 1 when it is a retry."""
        key = (b.producer_id, b.epoch, b.topic, b.partition)
        end = (b.base_sequence + b.records) % SEQUENCE_SPAN
        seq = self.sequences.get(key)
        if seq is None:
            if len(self.sequences) < MAX_PARTITIONS:
                self.sequences[key] = Sequence(end, {b.base_sequence: Sent(m.frame, b.records)})
            return 0
        earlier = seq.recent.pop(b.base_sequence, None)
        seq.recent[b.base_sequence] = Sent(m.frame, b.records)
        if len(seq.recent) > WINDOW:
            del seq.recent[next(iter(seq.recent))]
        if earlier is not None:
            return self._again(b, earlier, client, m)
        if b.base_sequence != seq.expected:
            self._gap(b, seq.expected, client, m)
        seq.expected = end
        return 0

    def _again(self, b: Batch, earlier: Sent, client: str, m: Message) -> int:
        """A batch whose base sequence was sent before: a retry, or a duplicate of one written."""
        example = {"topic": b.topic, "partition": b.partition, "base_sequence": b.base_sequence,
                   "first_frame": earlier.frame, "frame": m.frame,
                   "cause": "no answer" if earlier.outcome is None else earlier.outcome or "written",
                   "answer_frame": earlier.answer or None}
        frames = (earlier.frame, earlier.answer, m.frame)
        subject = (client, b.producer_id, b.epoch)
        if earlier.outcome == "":
            t = self._tally(DUPLICATE, subject)
            if t is not None:
                t.add(m.ts, frames, example)
            return 0
        t = self._tally(RETRY, subject)
        if t is not None:
            t.add(m.ts, frames, example, str(example["cause"]))
        return 1

    def _gap(self, b: Batch, expected: int, client: str, m: Message) -> None:
        ahead = (b.base_sequence - expected) % SEQUENCE_SPAN
        backwards = ahead >= SEQUENCE_SPAN // 2
        t = self._tally(SEQUENCE_GAP, (client, b.producer_id, b.epoch))
        if t is None:
            return
        t.add(m.ts, (m.frame,), {"topic": b.topic, "partition": b.partition, "expected": expected,
                                 "base_sequence": b.base_sequence, "frame": m.frame},
              "went back" if backwards else "skipped")
        if not backwards:
            t.numbers["missing_records"] += ahead

    def _resent(self, b: Batch, client: str, m: Message) -> int:
        """A batch of a producer without idempotence: 1 when it is one the broker just refused."""
        key = (client, host_of(m.src), b.topic, b.partition)
        refused = self.refused.pop(key, None)
        if refused is None or refused.crc is None or refused.crc != b.crc or refused.records != b.records:
            return 0
        t = self._tally(RETRY, (client, -1, -1))
        if t is not None:
            t.add(m.ts, (refused.frame, refused.answer, m.frame),
                  {"topic": b.topic, "partition": b.partition, "crc": b.crc, "first_frame": refused.frame,
                   "frame": m.frame, "cause": refused.error, "answer_frame": refused.answer}, refused.error)
        return 1

    def _produce_answer(self, m: Message) -> None:
        req = m.peer
        batches = {(b.topic, b.partition): b for b in produce_batches(req)} if req is not None else {}
        client = _client(req) if req is not None else "?"
        for topic, partition, error in produce_answers(m):
            b = batches.get((topic, partition))
            if b is None:
                continue
            if error:
                self._row(client, max(b.producer_id, -1)).errors += 1
            if b.producer_id < 0:
                if error and (len(self.refused) < MAX_KEYS and req is not None):
                    self.refused[(client, host_of(req.src), topic, partition)] = Refused(
                        b.crc, b.records, req.frame, m.frame, error)
                continue
            self._outcome(b, error, m)
            if error in SEQUENCE_ERRORS:
                t = self._tally(SEQUENCE_ERROR, (client, b.producer_id, b.epoch, error))
                if t is not None:
                    t.add(m.ts, (req.frame if req is not None else 0, m.frame),
                          {"topic": topic, "partition": partition, "base_sequence": b.base_sequence,
                           "frame": m.frame})

    def _outcome(self, b: Batch, error: str, m: Message) -> None:
        seq = self.sequences.get((b.producer_id, b.epoch, b.topic, b.partition))
        sent = seq.recent.get(b.base_sequence) if seq is not None else None
        if sent is not None and (m.peer is None or sent.frame == m.peer.frame):
            sent.outcome = error
            sent.answer = m.frame

    # -- transactions -----------------------------------------------------------------------

    def _txn(self, tid: Any, m: Message) -> Txn | None:
        if not isinstance(tid, str) or not tid:
            return None
        t = get_or_make(self.txns, short_name(tid), lambda: Txn(first_ts=m.ts), MAX_TXNS)
        if t is not None:
            t.last_ts = max(t.last_ts, m.ts)
            client = text(request_facts(m).get("client_id"))
            if client is not None:
                t.client_id = client
        return t

    def _learn(self, txn: Txn, tid: str, pid: Any, epoch: Any) -> None:
        pid, epoch = integer(pid), integer(epoch)
        if pid is not None and pid >= 0:
            txn.producer_id = pid
            put(self.txn_of, pid, short_name(tid), MAX_KEYS)
        if epoch is not None and epoch >= 0:
            txn.epoch = epoch

    def _open(self, txn: Txn, m: Message) -> None:
        if txn.opened is None:
            txn.opened = (m.ts, m.frame)
        if len(txn.frames) < MAX_EVIDENCE:
            txn.frames.append(m.frame)

    def _txn_error(self, tid: str, op: str, error: str, m: Message) -> None:
        t = self._tally(TXN_ERROR, (tid,))
        if t is not None:
            t.add(m.ts, (m.peer.frame if m.peer is not None else 0, m.frame),
                  {"op": op, "error": error, "frame": m.frame}, f"{op} {error}")

    def _init_answer(self, m: Message) -> None:
        req = m.peer
        tid = value(req, "transactional_id") if req is not None else None
        txn = self._txn(tid, m)
        code = number(m, "error_code")
        if code:
            if txn is not None and isinstance(tid, str):
                self._txn_error(tid, "InitProducerId", error_name(code), m)
            return
        pid, epoch = number(m, "producer_id"), number(m, "producer_epoch")
        if pid is None or pid < 0 or epoch is None:
            return
        self._producer_id(pid, epoch, text(req.info.get("client_id")) if req is not None else None, m,
                          "InitProducerId")
        if txn is not None and isinstance(tid, str):
            self._learn(txn, tid, pid, epoch)
            timeout = number(req, "transaction_timeout_ms")
            txn.timeout_ms = timeout if timeout is not None and timeout > 0 else txn.timeout_ms

    def _add_partitions(self, m: Message) -> None:
        for node, prefix, topics in self._add_partitions_sets(m):
            if value(node, "verify_only") is True:
                continue
            tid = value(node, prefix + "transactional_id")
            txn = self._txn(tid, m)
            if txn is None or not isinstance(tid, str):
                continue
            self._learn(txn, tid, value(node, prefix + "producer_id"), value(node, prefix + "producer_epoch"))
            txn.add_partitions += 1
            self._open(txn, m)
            for tp in _topic_partitions(node, topics):
                if len(txn.partitions) < MAX_TXN_PARTITIONS:
                    txn.partitions[tp] = None

    @staticmethod
    def _add_partitions_sets(m: Message) -> Iterator[tuple[Field | Message, str, str]]:
        """(node, field prefix, topics array) of each transaction an AddPartitionsToTxn names:
        the message itself up to v3, its `transactions` from v4."""
        if top(m, "v3_and_below_transactional_id") is not None:
            yield m, "v3_and_below_", "v3_and_below_topics"
        for t in elements(m, "transactions"):
            yield t, "", "topics"

    def _add_partitions_answer(self, m: Message) -> None:
        req = m.peer
        code = number(m, "error_code")
        errors = [error_name(code)] if code else []
        errors += _errors(m, "results_by_topic_v3_and_below", "results_by_partition")
        errors += _errors(m, "results_by_transaction", "topic_results", "results_by_partition")
        tid = value(req, "v3_and_below_transactional_id") if req is not None else None
        if tid is None and req is not None:
            tid = next((value(t, "transactional_id") for t in elements(req, "transactions")), None)
        if isinstance(tid, str) and self._txn(tid, m) is not None:
            for error in dict.fromkeys(errors):
                self._txn_error(tid, "AddPartitionsToTxn", error, m)

    def _add_offsets(self, m: Message) -> None:
        tid = value(m, "transactional_id")
        txn = self._txn(tid, m)
        if txn is None or not isinstance(tid, str):
            return
        self._learn(txn, tid, value(m, "producer_id"), value(m, "producer_epoch"))
        txn.add_offsets += 1
        group = value(m, "group_id")
        if isinstance(group, str) and group not in txn.groups and len(txn.groups) < MAX_EXAMPLES:
            txn.groups.append(group)
        self._open(txn, m)

    def _offset_commit(self, m: Message) -> None:
        tid = value(m, "transactional_id")
        txn = self._txn(tid, m)
        if txn is not None and isinstance(tid, str):
            self._learn(txn, tid, value(m, "producer_id"), value(m, "producer_epoch"))
            txn.offset_commits += 1

    def _txn_answer(self, m: Message) -> None:
        """AddOffsetsToTxn and TxnOffsetCommit answers: their errors."""
        req = m.peer
        tid = value(req, "transactional_id") if req is not None else None
        if not isinstance(tid, str) or self._txn(tid, m) is None:
            return
        op = str(request_facts(m).get("op"))
        code = number(m, "error_code")
        errors = [error_name(code)] if code else list(_errors(m, "topics", "partitions"))
        for error in dict.fromkeys(errors):
            self._txn_error(tid, op, error, m)

    def _end(self, m: Message) -> None:
        tid = value(m, "transactional_id")
        txn = self._txn(tid, m)
        committed = value(m, "committed")
        if txn is not None and isinstance(tid, str) and isinstance(committed, bool):
            self._learn(txn, tid, value(m, "producer_id"), value(m, "producer_epoch"))
            txn.ending = (committed, m.frame)

    def _end_answer(self, m: Message) -> None:
        req = m.peer
        tid = value(req, "transactional_id") if req is not None else None
        txn = self._txn(tid, m)
        committed = value(req, "committed") if req is not None else None
        if txn is None or not isinstance(tid, str) or not isinstance(committed, bool):
            return
        code = number(m, "error_code")
        if code:
            txn.ending = None
            self._txn_error(tid, "EndTxn", error_name(code), m)
            return
        pid, epoch = number(m, "producer_id"), number(m, "producer_epoch")
        if pid is not None and pid >= 0 and epoch is not None:
            self._producer_id(pid, epoch, txn.client_id, m, "EndTxn", quiet=True)
            self._learn(txn, tid, pid, epoch)
        self._ended(txn, tid, committed, m)

    def _ended(self, txn: Txn, tid: str, committed: bool, m: Message) -> None:
        req_frame = m.peer.frame if m.peer is not None else 0
        if len(txn.ends) < MAX_EVIDENCE:
            txn.ends.append(req_frame)
        if committed:
            txn.committed += 1
        else:
            txn.aborted += 1
            t = self._tally(TXN_ABORTED, (tid,))
            if t is not None:
                t.add(m.ts, (*txn.frames[:3], req_frame, m.frame),
                      {"frame": req_frame, "partitions": [_where(*tp) for tp in txn.partitions],
                       "groups": list(txn.groups)})
        txn.partitions.clear()
        txn.groups.clear()
        txn.frames.clear()
        txn.opened = None
        txn.ending = None

    def _fetch_answer(self, m: Message) -> None:
        """COMMIT and ABORT markers (control batches) in a Fetch response, each counted once."""
        for t in elements(m, "responses"):
            topic = _name(first(t, "topic", "name", "topic_id"))
            for p in elements(t, "partitions"):
                partition = integer(first(p, "partition_index", "partition"))
                for b in elements(p, "records"):
                    attributes = integer(value(b, "attributes"))
                    if attributes is None or not attributes & CONTROL or partition is None:
                        continue
                    self._markers(b, topic, partition)

    def _markers(self, b: Field, topic: str, partition: int) -> None:
        pid = number(b, "producer_id")
        for r in elements(b, "records"):
            kind = CONTROL_TYPES.get(_or_none(value(r.child("control"), "type")))
            offset = number(r, "offset")
            if kind is None or offset is None or pid is None:
                continue
            put(self.markers, (topic, partition, offset), (pid, kind), MAX_KEYS)

    # -- findings ---------------------------------------------------------------------------

    def finish(self) -> list[Finding]:
        out = [self._finding(kind, subject, t) for (kind, subject), t in self.tallies.items()]
        out += self._transactions()
        out += self._acks_findings()
        out += self._small_batches()
        out += self._compression()
        return out

    def _who(self, client: str, pid: int, epoch: int | None = None) -> str:
        if pid < 0:
            return f"producer {client} (no idempotence)"
        txn = self.txn_of.get(pid)
        extra = f", transactional id {txn}" if txn else ""
        at = f" epoch {epoch}" if epoch is not None and epoch >= 0 else ""
        return f"producer {client} (id {pid}{at}{extra})"

    def _finding(self, kind: Kind, subject: tuple[Any, ...], t: Tally) -> Finding:
        summary, values, severity = SUMMARIES[kind.key](self, subject, t)
        values["examples"] = t.examples
        return kind.finding(summary, "kafka", evidence=t.evidence, values=values, severity=severity)

    def _transactions(self) -> list[Finding]:
        out = []
        end = self.last_ts or 0.0
        confirmed = self._confirmed()
        for tid, txn in self.txns.items():
            marks = confirmed.get(txn.producer_id, Counter())
            values = {"transactional_id": tid, "producer_id": txn.producer_id, "committed": txn.committed,
                      "aborted": txn.aborted, "add_partitions": txn.add_partitions, "add_offsets": txn.add_offsets,
                      "offset_commits": txn.offset_commits, "commit_markers": marks["COMMIT"],
                      "abort_markers": marks["ABORT"], "open": txn.opened is not None}
            out.append(TRANSACTIONS.finding(
                f"transactional id {tid} (producer id {txn.producer_id}): {txn.committed} committed, "
                f"{txn.aborted} aborted{', 1 open' if txn.opened else ''}; {txn.add_partitions} "
                f"AddPartitionsToTxn, {txn.add_offsets} AddOffsetsToTxn, {txn.offset_commits} TxnOffsetCommit; "
                f"Fetch responses carried {plural(marks['COMMIT'], 'COMMIT marker')} and "
                f"{plural(marks['ABORT'], 'ABORT marker')}",
                "kafka", txn.first_ts, last_ts=txn.last_ts, frames=txn.ends, values=values))
            if txn.opened is not None:
                out.append(self._open_finding(tid, txn, end))
        return out

    def _confirmed(self) -> dict[int, Counter[str]]:
        out: dict[int, Counter[str]] = {}
        for pid, kind in self.markers.values():
            out.setdefault(pid, Counter())[kind] += 1
        return out

    def _open_finding(self, tid: str, txn: Txn, end: float) -> Finding:
        ts, frame = txn.opened or (end, 0)
        held = [_where(*tp) for tp in txn.partitions]
        ending = ""
        if txn.ending is not None:
            ending = f"; its EndTxn ({'commit' if txn.ending[0] else 'abort'}, frame {txn.ending[1]}) got no answer"
        timeout = f" (transaction.timeout.ms {txn.timeout_ms})" if txn.timeout_ms else ""
        parts = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "") or "no partition"
        return TXN_OPEN.finding(
            f"transaction of {tid} (producer id {txn.producer_id}) still open at the end of the capture, "
            f"{end - ts:.1f} s after it began{timeout}: it holds {parts}{ending}",
            "kafka", ts, last_ts=end, frames=[frame, *txn.frames, *(txn.ending[1:] if txn.ending else ())],
            values={"transactional_id": tid, "producer_id": txn.producer_id, "open_s": round(end - ts, 3),
                    "timeout_ms": txn.timeout_ms, "partitions": held, "groups": list(txn.groups),
                    "end_txn_unanswered": txn.ending is not None})

    def _acks_findings(self) -> list[Finding]:
        out = []
        for (client, acks), v in self.acks.items():
            kind = ACKS_ZERO if acks == 0 else ACKS_ONE
            risk = "no delivery guarantee" if acks == 0 else "records can be lost on a leader failover"
            out.append(kind.finding(
                f"producer {client} sent {plural(v.sent.count, 'Produce request')} with acks={acks} "
                f"({plural(v.records, 'record')}): {risk}",
                "kafka", evidence=v.sent,
                values={"client_id": client, "acks": acks, "requests": v.sent.count, "records": v.records}))
        return out

    def _small_batches(self) -> list[Finding]:
        """One finding per client, over the topics it sends small batches to."""
        small: dict[str, list[tuple[str, Volume]]] = {}
        for (client, topic), v in self.volumes.items():
            batches = v.sent.count
            if batches >= SMALL_BATCH_MIN and v.records / batches < SMALL_BATCH_RECORDS:
                small.setdefault(client, []).append((topic, v))
        out = []
        for client, topics in small.items():
            topics.sort(key=lambda tv: -tv[1].sent.count)
            batches = sum(v.sent.count for _, v in topics)
            records = sum(v.records for _, v in topics)
            size = sum(v.bytes for _, v in topics)
            names = ", ".join(t for t, _ in topics[:3]) + (f" (+{len(topics) - 3})" if len(topics) > 3 else "")
            out.append(SMALL_BATCHES.finding(
                f"producer {client} sends {records / batches:.2f} records ({size / batches:.0f} bytes) per batch on "
                f"average over {batches} batches to {names}", "kafka", evidence=topics[0][1].sent, count=batches,
                values={"client_id": client, "batches": batches, "records": records,
                        "mean_records_per_batch": round(records / batches, 3),
                        "mean_batch_bytes": round(size / batches, 1),
                        "topics": {t: {"batches": v.sent.count, "records": v.records, "bytes": v.bytes}
                                   for t, v in topics[:MAX_EXAMPLES]}}))
        return out

    def _compression(self) -> list[Finding]:
        out = []
        for name, c in self.codecs.items():
            ratio = _ratio(c)
            if name == "none" or ratio is None or ratio >= POOR_RATIO or c.sent.count < POOR_RATIO_MIN:
                continue
            out.append(POOR_COMPRESSION.finding(
                f"{name} batches shrink the records only {ratio:.2f}x ({c.measured_wire} bytes on the wire for "
                f"{c.plain} bytes of records, {c.sent.count} batches)", "kafka", evidence=c.sent,
                values={"codec": name, "batches": c.sent.count, "wire_bytes": c.measured_wire,
                        "uncompressed_bytes": c.plain, "ratio": ratio}))
        return out

    def charts(self) -> dict[str, Any]:
        rows = sorted(self.rows.values(), key=lambda r: -r.records)[:TOP_ROWS]
        return {
            "compression": {name: {"batches": c.sent.count, "wire_bytes": c.wire, "uncompressed_bytes": c.plain,
                                   "ratio": _ratio(c)} for name, c in sorted(self.codecs.items())},
            "producers": [self._chart_row(r) for r in rows],
        }

    def _chart_row(self, r: ProducerRow) -> dict[str, Any]:
        pid = r.producer_id if r.producer_id >= 0 else None
        tid = r.transactional_id or (self.txn_of.get(r.producer_id) if pid is not None else None)
        return {"client_id": r.client_id, "producer_id": pid, "transactional_id": tid,
                "acks": "/".join(ACKS_NAMES.get(a, str(a)) for a in sorted(r.acks)) or None,
                "requests": r.requests, "batches": r.batches, "records": r.records,
                "mean_records_per_batch": round(r.records / r.batches, 3) if r.batches else None,
                "retries": r.retries, "errors": r.errors}


Summary = tuple[str, dict[str, Any], Severity | None]


def _gap_summary(p: Producers, subject: tuple[Any, ...], t: Tally) -> Summary:
    client, pid, epoch = subject
    first_gap = t.examples[0] if t.examples else {}
    where = (f": first on {_where(first_gap['topic'], first_gap['partition'])}, expected sequence "
             f"{first_gap['expected']}, got {first_gap['base_sequence']} (frame {first_gap['frame']})") if first_gap else ""
    missing, back = t.numbers["missing_records"], t.causes["went back"]
    back_text = f", {back} went back" if back else ""
    return (f"{p._who(client, pid, epoch)}: {plural(t.count, 'sequence gap')} "
             f"({plural(missing, 'record')} never seen{back_text}){where}",
            {"client_id": client, "producer_id": pid, "epoch": epoch, "gaps": t.count,
             "missing_records": missing, "went_back": back}, None)


def _resend_summary(p: Producers, subject: tuple[Any, ...], t: Tally, sent: str) -> Summary:
    """`sent`: the words after the number of batches ("{n} batches {sent}")."""
    client, pid, epoch = subject
    e = t.examples[0] if t.examples else {}
    first_one = (f"; first {_where(e['topic'], e['partition'])} in frames {e['first_frame']} -> "
                 f"{e['frame']}") if e else ""
    causes = f" ({_causes(t.causes)})" if t.causes else ""
    return (f"{p._who(client, pid, epoch)} sent {plural(t.count, 'batch')} {sent}{causes}{first_one}",
            {"client_id": client, "producer_id": pid, "epoch": epoch, "batches": t.count,
             "causes": dict(t.causes)}, None)


def _retry_summary(p: Producers, subject: tuple[Any, ...], t: Tally) -> Summary:
    if subject[1] < 0:
        summary, values, _ = _resend_summary(p, subject, t, "again byte for byte (same CRC) after errors")
        return summary + ": the broker may have written them twice", values, WARNING
    return _resend_summary(p, subject, t, "again with the same sequence after errors or no answer")


def _duplicate_summary(p: Producers, subject: tuple[Any, ...], t: Tally) -> Summary:
    return _resend_summary(p, subject, t, "again with the same sequence after the broker had written them")


def _sequence_error_summary(p: Producers, subject: tuple[Any, ...], t: Tally) -> Summary:
    client, pid, epoch, error = subject
    e = t.examples[0] if t.examples else {}
    first_one = (f"; first {_where(e['topic'], e['partition'])} sequence {e['base_sequence']} "
                 f"(frame {e['frame']})") if e else ""
    return (f"broker answered {error} {plural(t.count, 'time')} to {p._who(client, pid, epoch)}{first_one}",
            {"client_id": client, "producer_id": pid, "epoch": epoch, "error": error, "answers": t.count},
            SEQUENCE_ERRORS.get(error))


def _epoch_summary(p: Producers, subject: tuple[Any, ...], t: Tally) -> Summary:
    (pid,) = subject
    low, high = t.numbers["first"], t.numbers["last"]
    sources = Counter(str(e["source"]) for e in t.examples)
    return (f"{p._who(p.clients.get(pid, '?'), pid)} bumped its epoch {plural(t.count, 'time')}, {low} -> {high} "
            f"(seen in {', '.join(sources)})",
            {"producer_id": pid, "bumps": t.count, "from_epoch": low, "to_epoch": high}, None)


def _aborted_summary(p: Producers, subject: tuple[Any, ...], t: Tally) -> Summary:
    (tid,) = subject
    txn = p.txns.get(tid)
    total = txn.committed + txn.aborted if txn is not None else t.count
    held = t.examples[-1]["partitions"] if t.examples else []
    parts = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "") or "no partition seen"
    return (f"transactional id {tid} aborted {t.count} of {plural(total, 'transaction')}; the last aborted held {parts}",
            {"transactional_id": tid, "aborted": t.count, "transactions": total,
             "producer_id": txn.producer_id if txn is not None else None}, None)


def _txn_error_summary(p: Producers, subject: tuple[Any, ...], t: Tally) -> Summary:
    (tid,) = subject
    return (f"transactional id {tid}: {plural(t.count, 'failed transaction request')} ({_causes(t.causes)})",
            {"transactional_id": tid, "failures": t.count, "errors": dict(t.causes)}, None)


SUMMARIES: dict[str, Callable[[Producers, tuple[Any, ...], Tally], Summary]] = {
    SEQUENCE_GAP.key: _gap_summary, RETRY.key: _retry_summary, DUPLICATE.key: _duplicate_summary,
    SEQUENCE_ERROR.key: _sequence_error_summary, EPOCH_BUMP.key: _epoch_summary,
    TXN_ABORTED.key: _aborted_summary, TXN_ERROR.key: _txn_error_summary,
}
