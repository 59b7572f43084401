"""Fuzzing the capture readers and the transport layers: pcap, pcapng and gzip bytes through
CaptureFile and the Pipeline (l2l4, reassembly, framing, dissectors), and frame lists of each
protocol through the Pipeline. Mutations of small pieces of the own captures and random bytes
behind valid headers end in decoded messages, diagnostics and file warnings; the only exception
is CaptureFile's UsageError for bytes that are not a capture. Time and memory stay bounded.

The same seeds and mutations drive the long runs of `tools/fuzz.py` (docs/testing.md)."""

from __future__ import annotations

import importlib.util
import io
import random
import struct
import sys
import time
import tracemalloc
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kdissect.capture.pcapfile import CaptureFile
from kdissect.errors import UsageError
from kdissect.pipeline import Pipeline
from kdissect.protocols import DissectorRegistry

REPO = Path(__file__).resolve().parents[2]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAX_SECONDS = 2.0
MAX_PEAK = 64 * 1024 * 1024


@cache
def fuzz() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kdissect_fuzz_tool", REPO / "tools" / "fuzz.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


@cache
def seeds() -> list:
    return fuzz().load_seeds()


@cache
def files(kind: str) -> list[tuple[bytes, DissectorRegistry]]:
    f = fuzz()
    out = []
    for i, s in enumerate(seeds()):
        frames = f.relink(s.frames, i, v6=i % 3 == 2)  # every link layer, IPv4 and IPv6
        if kind == "pcapng":
            out.append((f.write_pcapng(frames, frames[0].linktype, nano=i % 2 == 0, offset=1000 * (i % 3)),
                        s.registry))
        else:
            out.append((f.write_pcap(frames, frames[0].linktype), s.registry))
    return out


def bounded(run: object, *args: object) -> None:
    """Run once; no exception escapes, and time and peak memory stay within the bounds."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        run(*args)  # type: ignore[operator]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < MAX_SECONDS
    assert peak < MAX_PEAK


def test_seeds_cover_every_protocol() -> None:
    assert {s.protocol for s in seeds()} == {"kafka", "zookeeper", "pulsar", "rocketmq"}
    for kind in ("pcap", "pcapng"):
        for data, registry in files(kind)[:5]:
            assert fuzz().run_capture(data, registry, "seed." + kind) > 0


@pytest.mark.parametrize("kind", ["pcap", "pcapng"])
@SETTINGS
@given(rnd=st.randoms(use_true_random=False), pick=st.integers(0, 10_000))
def test_mutated_capture_files(kind: str, rnd: random.Random, pick: int) -> None:
    pool = files(kind)
    data, registry = pool[pick % len(pool)]
    mutated = fuzz().mutate_bytes(rnd, data, [d for d, _ in pool[:20]])
    bounded(fuzz().run_capture, mutated, registry, "fuzz." + kind)


@SETTINGS
@given(rnd=st.randoms(use_true_random=False), pick=st.integers(0, 10_000), plain=st.booleans())
def test_mutated_gzip_files(rnd: random.Random, pick: int, plain: bool) -> None:
    import gzip

    pool = files("pcap")
    data, registry = pool[pick % len(pool)]
    if plain:
        mutated = gzip.compress(fuzz().mutate_bytes(rnd, data, []), 1, mtime=0)
    else:
        mutated = fuzz().mutate_bytes(rnd, gzip.compress(data, 1, mtime=0), [], 10)
    bounded(fuzz().run_capture, mutated, registry, "fuzz.pcap.gz")


@pytest.mark.parametrize("protocol", ["kafka", "zookeeper", "pulsar", "rocketmq"])
@SETTINGS
@given(rnd=st.randoms(use_true_random=False), pick=st.integers(0, 10_000))
def test_mutated_frames_of_each_protocol(protocol: str, rnd: random.Random, pick: int) -> None:
    mine = [s for s in seeds() if s.protocol == protocol]
    s = mine[pick % len(mine)]
    donors = [f.data[54:] for other in mine[:20] for f in other.frames]
    frames = fuzz().mutate_frames(rnd, s.frames, donors)
    bounded(fuzz().run_frames, frames, s.registry)


@SETTINGS
@given(rnd=st.randoms(use_true_random=False), pick=st.integers(0, 10_000))
def test_mutated_frames_make_the_same_spark_rows_compiled_and_pure(rnd: random.Random, pick: int) -> None:
    s = seeds()[pick % len(seeds())]
    donors = [f.data[54:] for other in seeds()[::7] for f in other.frames]
    bounded(fuzz().run_rows, fuzz().mutate_frames(rnd, s.frames, donors), s.registry)


@SETTINGS
@given(rnd=st.randoms(use_true_random=False), pick=st.integers(0, 10_000))
def test_mutated_frames_make_the_same_json_compiled_and_pure(rnd: random.Random, pick: int) -> None:
    s = seeds()[pick % len(seeds())]
    donors = [f.data[54:] for other in seeds()[::7] for f in other.frames]
    bounded(fuzz().run_json, fuzz().mutate_frames(rnd, s.frames, donors), s.registry)


PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
PCAPNG_HEADER = struct.pack("<II", 0x0A0D0D0A, 28) + struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1) \
    + struct.pack("<I", 28)


@SETTINGS
@given(header=st.sampled_from([PCAP_HEADER, PCAPNG_HEADER, b""]), body=st.binary(max_size=600),
       linktype=st.sampled_from([1, 113, 276, 0, 108, 101, 147]))
def test_random_bytes_behind_a_valid_header(header: bytes, body: bytes, linktype: int) -> None:
    if header == PCAP_HEADER:
        header = header[:20] + struct.pack("<I", linktype)

    def run() -> None:
        try:
            cap = CaptureFile("fuzz", io.BytesIO(header + body))
        except UsageError:  # not a capture
            return
        pipe = Pipeline()
        with cap:
            for frame in cap:
                pipe.feed(frame)
        pipe.finish()
        assert len(cap.warnings) <= 2

    bounded(run)
