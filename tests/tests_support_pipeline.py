"""Run packets built with pcapgen through the pipeline."""

from __future__ import annotations

from pcapgen import ethernet

from kdissect.capture.pcapfile import RawFrame
from kdissect.model import Message
from kdissect.pipeline import Pipeline
from kdissect.protocols import DissectorRegistry


def run_packets(pkts: list[bytes], registry: DissectorRegistry | None = None, t0: float = 100.0,
                step: float = 0.01) -> list[Message]:
    pipe = Pipeline(registry)
    out: list[Message] = []
    for i, p in enumerate(pkts):
        frame = ethernet(p)
        out += pipe.feed(RawFrame(i + 1, t0 + i * step, 1, frame, len(frame)))
    return out + pipe.finish()
