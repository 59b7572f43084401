"""What the Kafka dissector keeps per TCP conversation, besides its pending requests."""

from __future__ import annotations

from kdissect.dissect.base import ConversationState


class KafkaConversation(ConversationState):
    """Per-conversation facts: the SASL mechanism the last SaslHandshake request named (for the
    decoder of SaslAuthenticate's auth_bytes and of raw tokens), and whether the exchange now
    runs as bare SASL tokens (SASL_V0_RAW_TOKENS: after a successful SaslHandshake v0)."""

    __slots__ = ("sasl_mechanism", "sasl_raw_tokens")

    def __init__(self, max_pending: int = 1024) -> None:
        super().__init__(max_pending)
        self.sasl_mechanism: str | None = None
        self.sasl_raw_tokens = False
