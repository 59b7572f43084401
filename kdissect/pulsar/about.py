"""Pulsar as the registry knows it before decoding (kdissect/dissect/about.py)."""

from kdissect.dissect.about import About

ABOUT = About("pulsar", "Pulsar", (6650, 6651), "magenta", "kdissect.pulsar.dissector")
