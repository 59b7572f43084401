"""RocketMQ as the registry knows it before decoding (kdissect/dissect/about.py): the name
server's port, then the broker's (remoting, its VIP channel, HA)."""

from kdissect.dissect.about import About

ABOUT = About("rocketmq", "RocketMQ", (9876, 10911, 10909, 10912), "yellow", "kdissect.rocketmq.dissector")
