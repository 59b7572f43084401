from __future__ import annotations

from collections.abc import Callable

import pytest

from kdissect.dissect.base import ConversationState, Options, run_dissector
from kdissect.model import Message, Pdu
from kdissect.rocketmq.dissector import DISSECTOR

Run = Callable[..., Message]


@pytest.fixture
def state() -> ConversationState:
    return DISSECTOR.new_state()


@pytest.fixture
def run(state: ConversationState) -> Run:
    """Dissect one PDU (bytes, length prefix included) through the per-PDU boundary."""

    def go(data: bytes, to_server: bool = True, opts: Options | None = None) -> Message:
        msg = Message(Pdu(data, [1], 0.0, 0.0, to_server), 0, "c", "s", "rocketmq")
        run_dissector(DISSECTOR, msg, state, opts or Options())
        return msg

    return go


def field(msg: Message, path: str) -> object:
    """The value at a dotted path from the message's root fields."""
    head, _, rest = path.partition(".")
    for f in msg.fields:
        if f.name == head:
            return f.value if not rest else f.get(rest)
    return None
