"""Fixtures for live-capture tests: root and loopback checks, a librdkafka mock Kafka cluster in
this process, and `kdissect sniff` run as a subprocess."""

from __future__ import annotations

import ctypes
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


def require_live() -> None:
    """Skip unless packets can be captured here: Linux, a loopback interface, and the right to
    open a packet socket (root or CAP_NET_RAW)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("live capture is Linux-only")
    try:
        socket.if_nametoindex("lo")
    except OSError:
        pytest.skip("no loopback interface")
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0).close()
    except PermissionError:
        pytest.skip("live capture needs root or CAP_NET_RAW")


# -- the librdkafka mock cluster (bundled in the confluent-kafka wheel) ---------------------------


class MockCluster:
    """A mock Kafka cluster served by librdkafka threads in this process, on 127.0.0.1."""

    def __init__(self, brokers: int = 1, topics: dict[str, int] | None = None) -> None:
        ck = pytest.importorskip("confluent_kafka")
        base = Path(ck.__file__).resolve().parents[1]
        libs = sorted(glob.glob(str(base / "confluent_kafka.libs" / "librdkafka*.so*")))
        if not libs:
            pytest.skip("the confluent-kafka wheel's librdkafka is not found")
        lib = ctypes.CDLL(libs[0])
        vp, cp, ci, cs = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t
        lib.rd_kafka_conf_new.restype = vp
        lib.rd_kafka_conf_set.argtypes = [vp, cp, cp, cp, cs]
        lib.rd_kafka_new.restype = vp
        lib.rd_kafka_new.argtypes = [ci, vp, cp, cs]
        lib.rd_kafka_mock_cluster_new.restype = vp
        lib.rd_kafka_mock_cluster_new.argtypes = [vp, ci]
        lib.rd_kafka_mock_cluster_bootstraps.restype = cp
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
        lib.rd_kafka_mock_topic_create.argtypes = [vp, cp, ci, ci]
        lib.rd_kafka_mock_cluster_destroy.argtypes = [vp]
        lib.rd_kafka_destroy.argtypes = [vp]
        err = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        lib.rd_kafka_conf_set(conf, b"log_level", b"2", err, 512)
        self._lib = lib
        self._rk = lib.rd_kafka_new(0, conf, err, 512)  # a handle with no brokers: it makes no connection
        self._mc = lib.rd_kafka_mock_cluster_new(self._rk, brokers)
        if not self._mc:
            pytest.skip("librdkafka mock cluster could not start")
        self.bootstrap: str = lib.rd_kafka_mock_cluster_bootstraps(self._mc).decode()
        self.ports = [int(x.rsplit(":", 1)[1]) for x in self.bootstrap.split(",")]
        for name, partitions in (topics or {}).items():
            lib.rd_kafka_mock_topic_create(self._mc, name.encode(), partitions, 1)

    def close(self) -> None:
        if self._mc:
            self._lib.rd_kafka_mock_cluster_destroy(self._mc)
            self._lib.rd_kafka_destroy(self._rk)
            self._mc = None


@pytest.fixture
def mock_kafka() -> Iterator[MockCluster]:
    require_live()
    mc = MockCluster(topics={"kd-live": 1})
    yield mc
    mc.close()


# -- kdissect sniff as a subprocess ---------------------------------------------------------------


@dataclass
class Sniffer:
    proc: subprocess.Popen[str]
    stderr_lines: list[str] = field(default_factory=list)
    stdout: str = ""

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM, then wait for the clean exit; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=timeout)
        self.stdout += out
        self.stderr_lines += err.splitlines()
        return self.proc.returncode

    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]

    @property
    def summary(self) -> str:
        return self.stderr_lines[-1] if self.stderr_lines else ""


def start_sniff(args: list[str], ready_timeout: float = 15.0) -> Sniffer:
    """Start `kdissect sniff ARGS`; return once it reports that it is capturing."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "kdissect", "sniff", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    sn = Sniffer(proc)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        sn.stderr_lines.append(line.rstrip("\n"))
        if "capturing on" in line:
            return sn
    proc.kill()
    out, err = proc.communicate()
    raise AssertionError(f"sniffer did not start: {sn.stderr_lines + err.splitlines()}")


def export_jsonl(path: Path, *extra: str) -> list[dict[str, Any]]:
    """The messages of a capture file through `kdissect export --format jsonl`."""
    res = subprocess.run([sys.executable, "-m", "kdissect", "export", str(path), "--format", "jsonl", *extra],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
