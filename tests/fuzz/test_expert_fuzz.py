"""Fuzzing the expert: mutated frames of each protocol's real captures through the Pipeline into
every analyzer. Whatever the trees look like (cut, wrong types, absurd numbers), the run ends
with findings and charts that are strict JSON, in bounded time and memory."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_capture_fuzz import SETTINGS, bounded, fuzz, seeds

from kdissect.expert.analyzers import ANALYZERS
from kdissect.expert.engine import Expert
from kdissect.pipeline import Pipeline


def _expert_run(frames: list, registry: object) -> None:
    expert = Expert(ANALYZERS)
    pipe = Pipeline(registry, fuzz().OPTS, observers=[expert])  # type: ignore[arg-type]
    for f in frames:
        for m in pipe.feed(f):
            expert.add(m)
    for m in pipe.finish():
        expert.add(m)
    json.dumps(expert.finish().to_json(), allow_nan=False)


@pytest.mark.parametrize("protocol", ["kafka", "zookeeper", "pulsar", "rocketmq"])
@SETTINGS
@given(rnd=st.randoms(use_true_random=False), pick=st.integers(0, 10_000))
def test_expert_on_mutated_frames(protocol: str, rnd: random.Random, pick: int) -> None:
    mine = [s for s in seeds() if s.protocol == protocol]
    s = mine[pick % len(mine)]
    donors = [f.data[54:] for other in mine[:20] for f in other.frames]
    bounded(_expert_run, fuzz().mutate_frames(rnd, s.frames, donors), s.registry)


def test_expert_on_every_seed() -> None:
    for s in seeds():
        _expert_run(s.frames, s.registry)
