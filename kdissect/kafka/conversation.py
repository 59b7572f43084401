"""What the Kafka dissector keeps per TCP conversation, besides its pending requests."""

from __future__ import annotations

from kdissect.dissect.base import ConversationState

# Responses whose API may be inferred per conversation (each tries every response plan, about a
# millisecond): those a capture that starts mid-connection shows before the first response that
# finds its request, one for each request in flight.
MAX_INFERRED = 8


class KafkaConversation(ConversationState):
    """Per-conversation facts: the SASL mechanism the last SaslHandshake request named (for the
    decoder of SaslAuthenticate's auth_bytes and of raw tokens), whether the exchange now runs
    as bare SASL tokens (SASL_V0_RAW_TOKENS: after a successful SaslHandshake v0), and how many
    more responses without their request may have their API inferred (none once a response
    has found its request)."""

    __slots__ = ("sasl_mechanism", "sasl_raw_tokens", "inferences_left")

    def __init__(self, max_pending: int = 1024) -> None:
        super().__init__(max_pending)
        self.sasl_mechanism: str | None = None
        self.sasl_raw_tokens = False
        self.inferences_left = MAX_INFERRED
