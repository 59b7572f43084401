"""TOY as the registry knows it before decoding (kdissect/dissect/about.py)."""

from kdissect.dissect.about import About

ABOUT = About("toy", "Toy", (7777,), "blue", "toyproto.dissector")
