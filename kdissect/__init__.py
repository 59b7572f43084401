"""kdissect: a protocol analyzer for Kafka, ZooKeeper, Pulsar and RocketMQ traffic."""

__version__ = "0.1.0"
