"""What the Kafka dissector keeps per TCP conversation, besides its pending requests."""

from __future__ import annotations

from collections import OrderedDict

from kdissect.dissect.base import ConversationState

# Responses whose API may be inferred per conversation (each tries every response plan, about a
# millisecond): those a capture that starts mid-connection shows before the first response that
# finds its request, one for each request in flight.
MAX_INFERRED = 8
# What the conversations of a capture may infer together: CAPTURE_INFERRED responses, and one more
# for every INFER_BYTES bytes of the messages the capture has carried (CaptureState.inflation). Each
# conversation had its own 8, so thousands of connections of 8 small responses each (28 bytes,
# about 0.3 ms an inference) cost 6 µs a byte of capture.
CAPTURE_INFERRED = 256
INFER_BYTES = 32768


class Inferences:
    """How many responses the capture's conversations have had their API inferred for (a
    CaptureState object)."""

    __slots__ = ("spent",)

    def __init__(self) -> None:
        self.spent = 0


# Requests dropped from the pending ones (more than max_pending unanswered: a client that pipelines
# thousands) whose API and version are remembered, so that their responses decode all the same.
MAX_DROPPED = 65_536


class KafkaConversation(ConversationState):
    """Per-conversation facts: the SASL mechanism the last SaslHandshake request named (for the
    decoder of SaslAuthenticate's auth_bytes and of raw tokens), whether the exchange now runs
    as bare SASL tokens (SASL_V0_RAW_TOKENS: after a successful SaslHandshake v0), how many
    more responses without their request may have their API inferred (none once a response
    has found its request; `may_infer`, within what is left of the capture's), and the API
    key and version of requests dropped from the pending ones, by correlation id."""

    __slots__ = ("sasl_mechanism", "sasl_raw_tokens", "_inferences", "dropped")

    def __init__(self, max_pending: int = 1024) -> None:
        super().__init__(max_pending)
        self.sasl_mechanism: str | None = None
        self.sasl_raw_tokens = False
        self._inferences = MAX_INFERRED
        self.dropped: OrderedDict[int, tuple[int, int]] | None = None

    def in_raw_sasl_tokens(self) -> bool:
        return self.sasl_raw_tokens

    def may_infer(self) -> bool:
        """Whether a response without its request may have its API inferred: the conversation's
        own allowance, within what is left of the capture's; if so, one is spent."""
        if self._inferences <= 0:
            return False
        inferred = self.capture.get(Inferences)
        if inferred.spent >= CAPTURE_INFERRED + self.capture.inflation.carried // INFER_BYTES:
            return False
        self._inferences -= 1
        inferred.spent += 1
        return True

    def stop_inferring(self) -> None:
        """A response found its request: the capture has this conversation's requests from here on."""
        self._inferences = 0

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
