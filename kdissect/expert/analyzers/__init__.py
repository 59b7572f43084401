"""The analyzers of `kdissect expert`, in the order they run: the one list of them."""

from __future__ import annotations

from kdissect.expert.analyzer import Analyzer
from kdissect.expert.analyzers.brokers import Brokers
from kdissect.expert.analyzers.consumers import Consumers
from kdissect.expert.analyzers.network import Network
from kdissect.expert.analyzers.producers import Producers
from kdissect.expert.analyzers.pulsar import Pulsar
from kdissect.expert.analyzers.rocketmq import RocketMQ
from kdissect.expert.analyzers.traffic import Traffic
from kdissect.expert.analyzers.zookeeper import ZooKeeper
from kdissect.expert.catalogue import Kind, check

ANALYZERS: tuple[type[Analyzer], ...] = (Traffic, Consumers, Producers, Brokers, Network, ZooKeeper, Pulsar, RocketMQ)


def all_kinds() -> list[Kind]:
    """Every kind of finding the analyzers declare, by category then key (each key once)."""
    kinds = check(k for a in ANALYZERS for k in a.KINDS)
    return sorted(kinds.values(), key=lambda k: (k.category, k.key))
