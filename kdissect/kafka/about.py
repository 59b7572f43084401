"""Kafka as the registry knows it before decoding (kdissect/dissect/about.py)."""

from kdissect.dissect.about import About

ABOUT = About("kafka", "Kafka", (9092,), "cyan", "kdissect.kafka.dissector")
