"""What the Pulsar dissector keeps per TCP conversation, besides its pending requests."""

from __future__ import annotations

from typing import Any

from kdissect.dissect.base import ConversationState
from kdissect.pulsar.summary import MAX_TEXT
from kdissect.text import cut

MAX_IDS = 4096  # producer/consumer ids remembered per conversation
MAX_SEND_KEYS = 4096  # (producer id, sequence id) counters kept per conversation


class PulsarConversation(ConversationState):
    """Per-conversation facts: the topic each producer and consumer id was created for (PRODUCER,
    SUBSCRIBE), so that later commands naming only the id get their topic (its first MAX_TEXT
    characters, as summaries show it: every SEND, MESSAGE, FLOW and ACK of the id carries it in
    its facts, and a topic of 1 MB made 3 MB of small SENDs 7 GB of JSON); and per (producer id,
    sequence id) how many SENDs and how many receipts were seen, so that the n-th SEND of a
    chunked message is matched with the n-th receipt. Each table is bounded: past its size the
    oldest entry is forgotten."""

    __slots__ = ("producers", "consumers", "send_seq")

    def __init__(self, max_pending: int = 1024) -> None:
        super().__init__(max_pending)
        self.producers: dict[Any, Any] = {}
        self.consumers: dict[Any, Any] = {}
        self.send_seq: dict[tuple[Any, Any], list[int]] = {}


def remember(ids: dict[Any, Any], key: Any, topic: Any) -> None:
    """ids[key] = topic (cut after MAX_TEXT characters), forgetting the oldest id when the table is
    full."""
    if len(ids) >= MAX_IDS and key not in ids:
        ids.pop(next(iter(ids)))
    ids[key] = cut(topic, MAX_TEXT) if isinstance(topic, str) else topic
