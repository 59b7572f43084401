"""The protocols kdissect decodes: the one list, and the registry that picks a protocol for a
conversation.

The list is data (`PROTOCOLS`: each protocol's `About`, from its package's about.py: name,
title, ports, colour, and the module of its dissector), so that a command imports a protocol's
dissector only once a conversation needs it: `read --decode-as 9093=kafka` of Kafka traffic
loads no other protocol. Everything protocol-specific that the rest of kdissect shows (its field
keys for `kdissect fields` and filters, its diagnostics, its typed Spark column) comes from the
protocol's own package through the Dissector interface (dissect/base.py). Adding a protocol is
one package and one line in `PROTOCOLS`.

Order of precedence, like Wireshark: `--decode-as PORT=PROTO` overrides, then the port table,
then heuristic probes ranked by score (in the order below on ties). The probes import every
dissector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kdissect.dissect.about import About
from kdissect.errors import UsageError
from kdissect.kafka.about import ABOUT as KAFKA
from kdissect.pulsar.about import ABOUT as PULSAR
from kdissect.rocketmq.about import ABOUT as ROCKETMQ
from kdissect.zookeeper.about import ABOUT as ZOOKEEPER

if TYPE_CHECKING:
    from kdissect.diagnostics import Catalogue
    from kdissect.dissect.base import Dissector

PROTOCOLS: tuple[About, ...] = (KAFKA, ROCKETMQ, PULSAR, ZOOKEEPER)


def dissectors() -> list[Dissector]:
    """Every protocol's dissector (a new list each time), each module imported if it was not."""
    return [a.dissector() for a in PROTOCOLS]


def catalogues() -> list[Catalogue]:
    """Every diagnostic catalogue: each protocol's (its dissector's `diagnostics`), then the
    transport layer's (TCP reassembly, framing, the pipeline) and the TLS layer's."""
    from kdissect.diagnostics import TRANSPORT
    from kdissect.tls.diagnostics import TLS

    return [*(d.diagnostics for d in dissectors()), TRANSPORT, TLS]


def names() -> list[str]:
    return [a.name for a in PROTOCOLS]


def styles() -> dict[str, str]:
    """Each protocol's colour in the packet list, by name."""
    return {a.name: a.style for a in PROTOCOLS}


class DissectorRegistry:
    """The protocols a decoding run may choose from: `PROTOCOLS` (their dissectors imported when
    first chosen), or the given dissectors."""

    PROBE_THRESHOLD = 0.5

    def __init__(self, dissectors: list[Dissector] | None = None, decode_as: dict[int, str] | None = None) -> None:
        if dissectors is None:
            self.known = list(PROTOCOLS)
            self._loaded: dict[str, Dissector] = {}
        else:
            self.known = [About(d.name, d.title, tuple(d.ports), d.style, "") for d in dissectors]
            self._loaded = {d.name: d for d in dissectors}
        self._all: list[Dissector] | None = None
        self._about = {a.name: a for a in self.known}
        self.ports: dict[int, str] = {}  # port -> protocol name
        for a in self.known:
            for p in a.ports:
                self.ports.setdefault(p, a.name)
        self.overrides: dict[int, str] = {}
        for port, name in (decode_as or {}).items():
            self.overrides[port] = self._named(name).name

    @property
    def dissectors(self) -> list[Dissector]:
        """Every dissector of the registry, in precedence order (all imported)."""
        if self._all is None:
            self._all = [self._dissector(a.name) for a in self.known]
        return self._all

    def _named(self, name: str) -> About:
        a = self._about.get(name.lower())
        if a is None:
            known = ", ".join(sorted(self._about))
            raise UsageError(f"unknown protocol {name!r} (known: {known})")
        return a

    def _dissector(self, name: str) -> Dissector:
        d = self._loaded.get(name)
        if d is None:
            d = self._loaded[name] = self._about[name].dissector()
        return d

    def get(self, name: str) -> Dissector:
        """The dissector of a protocol by name; UsageError naming the known ones if none."""
        return self._dissector(self._named(name).name)

    def find(self, name: str) -> Dissector | None:
        """The dissector of a protocol by name, or None."""
        return self._dissector(name) if name in self._about else None

    def by_port(self, sport: int, dport: int) -> tuple[Dissector, bool] | None:
        """(dissector, whether dport is the server side) from overrides, then the port table."""
        for table in (self.overrides, self.ports):
            if dport in table:
                return self._dissector(table[dport]), True
            if sport in table:
                return self._dissector(table[sport]), False
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
