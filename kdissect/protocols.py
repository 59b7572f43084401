"""The protocols kdissect decodes: the one list, and the registry that picks a protocol for a
conversation.

Everything protocol-specific that the rest of kdissect shows (its packet-list colour, its field
keys for `kdissect fields` and filters, its diagnostics, its typed Spark column) comes from the
protocol's own package through the Dissector interface (dissect/base.py). Adding a protocol is
one package and one line in `dissectors()`.

Order of precedence, like Wireshark: `--decode-as PORT=PROTO` overrides, then the port table,
then heuristic probes ranked by score (in the order below on ties).
"""

from __future__ import annotations

from kdissect.diagnostics import TRANSPORT, Catalogue
from kdissect.dissect.base import Dissector
from kdissect.errors import UsageError


def dissectors() -> list[Dissector]:
    """Every protocol kdissect decodes (a new list each time)."""
    global _DISSECTORS
    if _DISSECTORS is None:  # imported on first use: a command that decodes nothing loads no protocol
        from kdissect.kafka.dissector import DISSECTOR as kafka
        from kdissect.pulsar.dissector import DISSECTOR as pulsar
        from kdissect.rocketmq.dissector import DISSECTOR as rocketmq
        from kdissect.zookeeper.dissector import DISSECTOR as zookeeper

        _DISSECTORS = (kafka, rocketmq, pulsar, zookeeper)
    return list(_DISSECTORS)


_DISSECTORS: tuple[Dissector, ...] | None = None


def catalogues() -> list[Catalogue]:
    """Every diagnostic catalogue: each protocol's (its dissector's `diagnostics`), then the
    transport layer's (TCP reassembly, framing, the pipeline) and the TLS layer's."""
    from kdissect.tls.diagnostics import TLS

    return [*(d.diagnostics for d in dissectors()), TRANSPORT, TLS]


def names() -> list[str]:
    return [d.name for d in dissectors()]


def _default() -> list[Dissector]:
    return dissectors()


class DissectorRegistry:
    PROBE_THRESHOLD = 0.5

    def __init__(self, dissectors: list[Dissector] | None = None, decode_as: dict[int, str] | None = None) -> None:
        self.dissectors = list(dissectors) if dissectors is not None else _default()
        self.by_name = {d.name: d for d in self.dissectors}
        self.ports: dict[int, Dissector] = {}
        for d in self.dissectors:
            for p in d.ports:
                self.ports.setdefault(p, d)
        self.overrides: dict[int, Dissector] = {}
        for port, name in (decode_as or {}).items():
            self.overrides[port] = self.get(name)

    def get(self, name: str) -> Dissector:
        d = self.by_name.get(name.lower())
        if d is None:
            known = ", ".join(sorted(self.by_name))
            raise UsageError(f"unknown protocol {name!r} (known: {known})")
        return d

    def by_port(self, sport: int, dport: int) -> tuple[Dissector, bool] | None:
        """(dissector, whether dport is the server side) from overrides, then the port table."""
        for table in (self.overrides, self.ports):
            if dport in table:
                return table[dport], True
            if sport in table:
                return table[sport], False
        return None

    def probe(self, head: bytes) -> tuple[Dissector, float] | None:
        """The best dissector for a stream whose client sent `head` first, if any scores enough."""
        best: tuple[Dissector, float] | None = None
        for d in self.dissectors:
            score = d.probe(head)
            if score >= self.PROBE_THRESHOLD and (best is None or score > best[1]):
                best = (d, score)
        return best


def parse_decode_as(specs: tuple[str, ...] | list[str]) -> dict[int, str]:
    """["9093=kafka", ...] → {9093: "kafka"}; raises UsageError on a bad spec."""
    out: dict[int, str] = {}
    for spec in specs:
        port, sep, proto = spec.partition("=")
        port = port.strip()
        if not sep or not (port.isascii() and port.isdigit() and len(port) <= 6) or not proto.strip():
            raise UsageError(f"--decode-as takes PORT=PROTOCOL, not {spec!r}")
        p = int(port)
        if not 0 < p < 65536:
            raise UsageError(f"--decode-as: port {p} out of range")
        out[p] = proto.strip().lower()
    return out
