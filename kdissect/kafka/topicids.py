"""Topic ids and names over a whole capture.

Since Kafka 2.8 (KIP-516) several APIs name a topic by its id only (Fetch v13+, Produce v13+,
the share-group and consumer-group heartbeat APIs...). The names are learned from every message
that carries an id beside its topic's name (Metadata v10+, CreateTopics v7+ and
DescribeTopicPartitions responses, LeaderAndIsr and UpdateMetadata requests...), in capture
order, into one `TopicIds` per capture (`ConversationState.capture`): a client learns the ids on
one broker connection and fetches with them on another.

Where the ids sit in each message is read from the specification's tables once: the structs
that have a `topic_id` field, as a path of field names from the body.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from kdissect.kafka.apis import APIS
from kdissect.kafka.ops import Ctx
from kdissect.kafka.schema_messages import REQUESTS, RESPONSES
from kdissect.kafka.schema_types import FieldRow
from kdissect.model import ARRAY, Field

MAX_IDS = 100_000
# Kafka refuses a topic name longer than this (Topic.MAX_NAME_LENGTH): a longer one is not
# learned, so that what the table holds stays bounded however long the names a capture carries.
MAX_NAME = 249
NO_ID = "00000000-0000-0000-0000-000000000000"  # Uuid.ZERO_UUID: no id
ID = "topic_id"
NAMES = ("name", "topic", "topic_name")  # a topic's name beside its id, by struct

Path = tuple[str, ...]


class TopicIds:
    """Topic id → name, the most recent MAX_IDS ids learned (the oldest learned is forgotten
    first; learning an id again makes it the newest), each name at most MAX_NAME characters. It
    Teaches (dissect/base.py): `first` holds the frame at which each id was first learned (the
    first MAX_IDS ids), `taught` what the capture's other conversations learned, and `now` is the
    frame being decoded."""

    __slots__ = ("names", "first", "taught", "now")

    def __init__(self) -> None:
        # Oldest first: forgetting the oldest is popitem(last=False), which a dict cannot do in
        # constant time (next(iter(d)) steps over every slot its earlier deletions left empty).
        self.names: OrderedDict[str, str] = OrderedDict()
        self.first: dict[Hashable, tuple[int, Any]] = {}
        self.taught: dict[Hashable, tuple[int, Any]] = {}
        self.now = 0

    def learn(self, topic_id: str, name: str) -> None:
        if not learnable(topic_id, name):
            return
        names = self.names
        if names.pop(topic_id, None) is None and len(names) >= MAX_IDS:
            names.popitem(last=False)
        names[topic_id] = name
        if topic_id not in self.first and len(self.first) < MAX_IDS:
            self.first[topic_id] = (self.now, name)

    def name(self, topic_id: object) -> str | None:
        if not isinstance(topic_id, str):
            return None
        known = self.names.get(topic_id)
        if known is None and self.taught:
            at, taught = self.taught.get(topic_id, (self.now, None))
            if at < self.now and isinstance(taught, str):
                return taught
        return known

    def lessons(self) -> dict[Hashable, tuple[int, Any]]:
        return self.first

    def seed(self, lessons: dict[Hashable, tuple[int, Any]]) -> None:
        self.taught = lessons


def learnable(topic_id: str, name: str) -> bool:
    """Whether an id and the name beside it teach anything: a real id, a name Kafka accepts."""
    return topic_id != NO_ID and 0 < len(name) <= MAX_NAME


def _paths(rows: tuple[FieldRow, ...], prefix: Path) -> list[Path]:
    out: list[Path] = []
    if any(r.name == ID and r.type == "uuid" for r in rows):
        out.append(prefix)
    for r in rows:
        if r.children and r.type in ("struct", "[]struct"):
            out += _paths(r.children, prefix + (r.name,))
    return out


def _since(rows: tuple[FieldRow, ...]) -> int:
    """The lowest version in which a topic_id field exists anywhere in these rows."""
    lows = [r.min_version for r in rows if r.name == ID and r.type == "uuid" and r.min_version <= r.max_version]
    lows += [_since(r.children) for r in rows if r.children and r.type in ("struct", "[]struct")]
    return min(lows, default=1 << 15)


def _pairing(rows: tuple[FieldRow, ...], path: Path) -> list[tuple[int, int]]:
    """The version ranges in which a struct at `path` holds a topic id beside a topic name."""
    level = [rows]
    for name in path:
        level = [r.children for kids in level for r in kids if r.name == name and r.children]
    return [(max(i.min_version, n.min_version), min(i.max_version, n.max_version))
            for kids in level for i in kids if i.name == ID and i.type == "uuid"
            for n in kids if n.name in NAMES and max(i.min_version, n.min_version) <= min(i.max_version, n.max_version)]


Table = dict[tuple[int, bool], tuple[Path, ...]]


def _table() -> tuple[Table, dict[tuple[int, bool], int], dict[tuple[int, bool], tuple[tuple[int, int], ...]]]:
    table: Table = {}
    since: dict[tuple[int, bool], int] = {}
    pairs: dict[tuple[int, bool], tuple[tuple[int, int], ...]] = {}
    for is_request, messages in ((True, REQUESTS), (False, RESPONSES)):
        for api_key, rows in messages.items():
            paths = _paths(rows, ())
            if paths:
                table[(api_key, is_request)] = tuple(paths)
                since[(api_key, is_request)] = _since(rows)
                pairs[(api_key, is_request)] = tuple(r for path in paths for r in _pairing(rows, path))
    return table, since, pairs


# (api key, is request) → the paths of the structs that carry a topic id, the first version
# that has one (older versions are not walked: Produce before v13 names its topics), and the
# version ranges in which one of them names the topic beside its id (the bodies `note` learns from).
ID_PATHS, ID_SINCE, PAIRED = _table()
# ID_SINCE by API key, requests and responses apart: `note`'s test, once a message, without a tuple.
_SINCE: tuple[dict[int, int], dict[int, int]] = (
    {api: v for (api, request), v in ID_SINCE.items() if not request},
    {api: v for (api, request), v in ID_SINCE.items() if request})


def teaches(api_key: int, is_request: bool, version: int) -> bool:
    """Whether a body of this version may pair a topic id with its name: the only Kafka bodies
    a conversation decoded for what it teaches needs (a version newer than the newest known is
    decoded as the newest)."""
    ranges = PAIRED.get((api_key, is_request))
    if not ranges:
        return False
    v = min(version, APIS[api_key].newest)
    return any(lo <= v <= hi for lo, hi in ranges)


def structs_at(fields: list[Field], path: Path) -> list[list[Field]]:
    """The field lists of the structs at `path` (each element of an array on the way)."""
    level = [fields]
    for name in path:
        nxt: list[list[Field]] = []
        for kids in level:
            for f in kids:
                if f.name != name or not f.children:
                    continue
                if f.hint == ARRAY:
                    nxt += [e.children for e in f.children if e.children is not None]
                else:
                    nxt.append(f.children)
        level = nxt
    return level


def name_of(kids: list[Field]) -> str | None:
    """The topic name a struct carries, if any."""
    for f in kids:
        if f.name in NAMES and isinstance(f.value, str) and f.value:
            return f.value
    return None


def id_of(kids: list[Field]) -> str | None:
    for f in kids:
        if f.name == ID and isinstance(f.value, str) and f.value != NO_ID:
            return f.value
    return None


def topic_ids(ctx: Ctx) -> TopicIds | None:
    """The capture's topic ids (None outside a conversation)."""
    if ctx.state is None:
        return None
    capture = ctx.state.capture
    ids = capture.get(TopicIds)
    ids.now = capture.frame
    return ids


def note(api_key: int, is_request: bool, fields: list[Field], ctx: Ctx) -> None:
    """Learn the ids a decoded body pairs with names, and add the names of the topics it names
    by id only to ctx.topics (msg.info["topics"])."""
    since = _SINCE[1] if is_request else _SINCE[0]
    if api_key not in since or 0 <= ctx.version < since[api_key]:
        return
    paths = ID_PATHS[(api_key, is_request)]
    ids = topic_ids(ctx)
    if ids is None:
        return
    for path in paths:
        for kids in structs_at(fields, path):
            tid = id_of(kids)
            if tid is None:
                continue
            name = name_of(kids)
            if name is not None:
                ids.learn(tid, name)
            else:
                known = ids.name(tid)
                if known is not None:
                    ctx.topics.append(known)
