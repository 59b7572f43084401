"""ZooKeeper as the registry knows it before decoding (kdissect/dissect/about.py)."""

from kdissect.dissect.about import About

ABOUT = About("zookeeper", "ZooKeeper", (2181,), "green", "kdissect.zookeeper.dissector")
