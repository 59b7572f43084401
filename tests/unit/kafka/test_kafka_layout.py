"""How the Kafka package hangs together: no import cycles, the bytes-field table is pure data,
and the conversation state is the dissector's own typed class."""

from __future__ import annotations

import ast

import pytest
from support import ROOT

from kdissect.dissect.base import ConversationState, Options, run_dissector
from kdissect.kafka.conversation import KafkaConversation
from kdissect.kafka.dissector import DISSECTOR
from kdissect.kafka.hooks import HOOKS, Carried
from kdissect.kafka.schema_messages import EMBEDDED
from kdissect.model import Message, Pdu

PACKAGE = ROOT / "kdissect" / "kafka"


def _imports() -> dict[str, set[str]]:
    """kdissect.kafka module -> the kdissect.kafka modules it imports (anywhere in its body)."""
    mods = {f"kdissect.kafka.{p.stem}": p for p in PACKAGE.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                deps |= {m for m in [node.module] + [f"{node.module}.{a.name}" for a in node.names] if m in mods}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in mods}
        graph[name] = deps
    return graph


def test_no_import_cycle() -> None:
    graph = _imports()
    done: set[str] = set()

    def visit(mod: str, path: list[str]) -> None:
        for dep in sorted(graph[mod]):
            assert dep not in path, " -> ".join(path[path.index(dep):] + [dep])
            if dep not in done:
                visit(dep, path + [dep])
        done.add(mod)

    for mod in sorted(graph):
        visit(mod, [mod])


def test_hooks_are_data() -> None:
    assert _imports()["kdissect.kafka.hooks"] == set()
    assert all(isinstance(k, Carried) for k in HOOKS.values())
    for kind in (Carried.SUBSCRIPTION, Carried.ASSIGNMENT):
        assert kind.value in EMBEDDED


def test_conversation_state_is_typed() -> None:
    state = DISSECTOR.new_state()
    assert isinstance(state, KafkaConversation)
    assert (state.sasl_mechanism, state.sasl_raw_tokens) == (None, False)
    assert "sasl_mechanism" in KafkaConversation.__slots__
    with pytest.raises(TypeError):
        msg = Message(Pdu(b"\x00\x00\x00\x00", [0], 0.0, 0.0, True), 0, "c", "s", "kafka")
        run_dissector(DISSECTOR, msg, ConversationState(), Options())


def test_sasl_handshake_sets_the_mechanism() -> None:
    # SaslHandshake v1 request: api 17, version 1, corr 1, client "c", mechanism "PLAIN"
    body = b"\x00\x11\x00\x01\x00\x00\x00\x01\x00\x01c\x00\x05PLAIN"
    msg = Message(Pdu(len(body).to_bytes(4, "big") + body, [0], 0.0, 0.0, True), 0, "c", "s", "kafka")
    state = DISSECTOR.new_state()
    run_dissector(DISSECTOR, msg, state, Options())
    assert state.sasl_mechanism == "PLAIN"
