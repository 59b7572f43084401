"""What the Kafka dissector keeps per TCP conversation, besides its pending requests."""

from __future__ import annotations

from collections import OrderedDict

from kdissect.dissect.base import ConversationState

# Responses whose API may be inferred per conversation (each tries every response plan, about a
# millisecond): those a capture that starts mid-connection shows before the first response that
# finds its request, one for each request in flight.
MAX_INFERRED = 8
# Requests dropped from the pending ones (more than max_pending unanswered: a client that pipelines
# thousands) whose API and version are remembered, so that their responses decode all the same.
MAX_DROPPED = 65_536


class KafkaConversation(ConversationState):
    """Per-conversation facts: the SASL mechanism the last SaslHandshake request named (for the
    decoder of SaslAuthenticate's auth_bytes and of raw tokens), whether the exchange now runs
    as bare SASL tokens (SASL_V0_RAW_TOKENS: after a successful SaslHandshake v0), how many
    more responses without their request may have their API inferred (none once a response
    has found its request), and the API key and version of requests dropped from the pending
    ones, by correlation id."""

    __slots__ = ("sasl_mechanism", "sasl_raw_tokens", "inferences_left", "dropped")

    def __init__(self, max_pending: int = 1024) -> None:
        super().__init__(max_pending)
        self.sasl_mechanism: str | None = None
        self.sasl_raw_tokens = False
        self.inferences_left = MAX_INFERRED
        self.dropped: OrderedDict[int, tuple[int, int]] | None = None

    def in_raw_sasl_tokens(self) -> bool:
        return self.sasl_raw_tokens

    def drop(self, corr: int, api_key: int, version: int) -> None:
        """A request no longer pending (too many were), remembered for its response, within
        MAX_DROPPED a conversation and the capture's pool."""
        dropped = self.dropped
        if dropped is None:
            dropped = self.dropped = OrderedDict()
        pool = self.pending.pool
        if corr not in dropped:
            pool.noted += 1
        dropped[corr] = (api_key, version)
        if len(dropped) > MAX_DROPPED or pool.noted > pool.noted_limit:
            dropped.popitem(last=False)
            pool.noted -= 1

    def forget(self, corr: int) -> tuple[int, int] | None:
        """The API key and version of a dropped request, now answered."""
        known = self.dropped.pop(corr, None) if self.dropped else None
        if known is not None:
            self.pending.pool.noted -= 1
        return known

    def end(self) -> None:
        super().end()
        if self.dropped:
            self.pending.pool.noted -= len(self.dropped)
            self.dropped = None
