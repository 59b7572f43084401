"""kdissect: a protocol analyzer for Kafka, ZooKeeper, Pulsar and RocketMQ traffic."""

from kdissect import accel

__version__ = "0.1.0"

if accel.PURE:
    accel.prefer_source()
