"""`About`: what kdissect knows of a protocol before it decodes any of it, as data. Each
protocol's package declares it in its `about.py`, which imports nothing of the protocol;
kdissect/protocols.py lists them, and its registry imports a protocol's dissector the first time
a conversation needs it (`--decode-as`, the port table, or the probes). The dissector takes its
name, title, ports and colour from there."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from kdissect.dissect.base import Dissector


class About(NamedTuple):
    name: str  # the JSON `protocol` value and the field-key prefix
    title: str
    ports: tuple[int, ...]  # its entries in the port table
    style: str  # the protocol column's colour in the packet list (a rich style)
    module: str  # the module whose DISSECTOR decodes it

    def dissector(self) -> Dissector:
        """The protocol's dissector, its module imported if it was not yet."""
        d: Dissector = importlib.import_module(self.module).DISSECTOR
        return d
