"""What every live capture backend hands the sniffer (capture/live.py's AF_PACKET ring,
capture/pcaplive.py's libpcap): packets with their kernel time, the kernel's counts, and the
polling and draining times they share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kdissect.capture.pcapfile import RawFrame

POLL_MS = 100
DRAIN_S = 0.5  # on stop, wait at most this long for the last block


class Packet(NamedTuple):
    """One captured packet: the frame for the pipeline, and its exact kernel time in ns."""

    frame: RawFrame
    ts_ns: int


@dataclass(slots=True)
class Stats:
    received: int = 0  # packets that passed the filter (including dropped ones)
    dropped: int = 0  # packets the kernel dropped because the ring was full
