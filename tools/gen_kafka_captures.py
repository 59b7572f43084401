#!/usr/bin/env python3
"""Record the project's own Kafka captures: real clients (confluent-kafka, i.e. librdkafka)
against librdkafka's mock cluster, captured with tcpdump on the loopback interface.

    python3 tools/gen_kafka_captures.py [--out captures/kafka] [SCENARIO ...]

Needs root (tcpdump -i lo), confluent-kafka and tcpdump. Each scenario starts its own mock
cluster (3 brokers on random 127.0.0.1 ports) in a child process, captures only those ports, and
writes NAME.pcap plus NAME.json (ports, clients, scenario). Ports, ids and payloads differ
between runs. Only processes started here are stopped, by their id.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
DEFAULT_OUT = os.path.join(os.path.dirname(HERE), "captures", "kafka")
SERVER = "librdkafka {} mock cluster (3 brokers)"


# -- the mock cluster (child process) --------------------------------------------------


def _librdkafka() -> ctypes.CDLL:
    import confluent_kafka

    base = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    libs = glob.glob(os.path.join(base, "confluent_kafka.libs", "librdkafka*.so*"))
    if not libs:
        sys.exit("the librdkafka bundled with confluent-kafka was not found")
    return ctypes.CDLL(libs[0])


def serve_mock(portfile: str, apiversions: list[str]) -> None:
    """Run a mock cluster until SIGTERM; write its ports to `portfile`. The handle it is
    created from makes no connection of its own (no bootstrap servers)."""
    lib = _librdkafka()
    vp, cp, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
    lib.rd_kafka_conf_new.restype = vp
    lib.rd_kafka_new.restype = vp
    lib.rd_kafka_new.argtypes = [ctypes.c_int, vp, cp, sz]
    lib.rd_kafka_mock_cluster_new.restype = vp
    lib.rd_kafka_mock_cluster_new.argtypes = [vp, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = cp
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
    lib.rd_kafka_mock_set_apiversion.argtypes = [vp, ctypes.c_int16, ctypes.c_int16, ctypes.c_int16]
    lib.rd_kafka_mock_set_controller_id.argtypes = [vp, ctypes.c_int32]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [vp]
    err = ctypes.create_string_buffer(512)
    rk = lib.rd_kafka_new(0, lib.rd_kafka_conf_new(), err, 512)
    mc = lib.rd_kafka_mock_cluster_new(rk, 3)
    if not rk or not mc:
        sys.exit("mock cluster creation failed: " + err.value.decode())
    lib.rd_kafka_mock_set_controller_id(mc, 1)
    for spec in apiversions:
        key, lo, hi = (int(x) for x in spec.split(":"))
        lib.rd_kafka_mock_set_apiversion(mc, key, lo, hi)
    boot = lib.rd_kafka_mock_cluster_bootstraps(mc).decode()
    with open(portfile + ".tmp", "w") as f:
        json.dump({"bootstrap": boot, "ports": [int(x.rsplit(":", 1)[1]) for x in boot.split(",")]}, f)
    os.replace(portfile + ".tmp", portfile)
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    while not stop:
        time.sleep(0.2)
    lib.rd_kafka_mock_cluster_destroy(mc)


class Mock:
    """A mock cluster in a child process, stopped by its pid."""

    def __init__(self, apiversions: tuple[str, ...] = ()) -> None:
        self.portfile = tempfile.mktemp(prefix="kmock-", suffix=".json")
        argv = [sys.executable, os.path.abspath(__file__), "--mock", self.portfile]
        for spec in apiversions:
            argv += ["--apiversion", spec]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if os.path.exists(self.portfile):
                break
            time.sleep(0.05)
        with open(self.portfile) as f:
            info = json.load(f)
        self.bootstrap: str = info["bootstrap"]
        self.ports: list[int] = info["ports"]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.unlink(self.portfile)


class Tcpdump:
    """tcpdump on lo for the given ports, stopped with SIGINT by its pid."""

    def __init__(self, path: str, ports: list[int], bulk: bool = False) -> None:
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed in stop())
        bpf = " or ".join(f"tcp port {p}" for p in ports)
        # bulk: a 256 MiB kernel buffer drained in large reads, so that long runs lose nothing
        mode = ["-B", "262144"] if bulk else ["--immediate-mode", "-U", "-B", "16384"]
        argv = ["tcpdump", "-i", "lo", *mode, "-s", "0", "-n", "-Z", "root", "-w", path, bpf]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self.log)
        for _ in range(200):
            time.sleep(0.05)
            self.log.seek(0)
            if "listening on" in self.log.read():
                break
        time.sleep(0.3)

    def stop(self) -> str:
        time.sleep(1.0)
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(20)
        self.log.seek(0)
        stats = " ".join(line.strip() for line in self.log if "packets" in line)
        self.log.close()
        return stats


# -- client scenarios -------------------------------------------------------------------


def _conf(boot: str, **kw: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"bootstrap.servers": boot, "client.id": "kd-gen", "socket.nagle.disable": True}
    c.update({k.replace("_", "."): v for k, v in kw.items()})
    return c


def _consume(boot: str, topics: list[str], n: int, timeout: float = 15, **kw: Any) -> int:
    """Read partition 0 of each topic from the beginning (no group) until n messages arrive."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(_conf(boot, group_id="kd-reader", enable_partition_eof=True, **kw))
    c.assign([TopicPartition(t, 0, OFFSET_BEGINNING) for t in topics])
    got = 0
    t0 = time.time()
    while got < n and time.time() - t0 < timeout:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    c.close()
    return got


def s_transactions(boot: str) -> str:
    """Transactional producer: one committed and one aborted transaction over two topics, then
    a read_committed consumer (Fetch responses carry COMMIT/ABORT control batches)."""
    from confluent_kafka import Producer

    p = Producer(_conf(boot, transactional_id="kd-txn-1", linger_ms=5, compression_type="none"))
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(4):
        p.produce("kd-txn", key=b"c%d" % i, value=b"committed-%d" % i, partition=0,
                  headers=[("txn", b"commit")])
    p.produce("kd-txn2", value=b"second topic, same transaction", partition=0)
    p.commit_transaction(20)
    p.begin_transaction()
    for i in range(3):
        p.produce("kd-txn", key=b"a%d" % i, value=b"aborted-%d" % i, partition=0)
    p.flush(10)
    p.abort_transaction(20)
    got = _consume(boot, ["kd-txn", "kd-txn2"], 5, isolation_level="read_committed")
    return f"read_committed consumed {got}"


def s_large_values(boot: str) -> str:
    """A 300 KB value (half random, half text) produced uncompressed and fetched back: PDUs
    spanning many TCP segments."""
    from confluent_kafka import Producer

    p = Producer(_conf(boot, acks="all", compression_type="none", message_max_bytes=2000000, linger_ms=1))
    value = os.urandom(150_000) + b"large-value|" * 12_500
    p.produce("kd-large", key=b"big", value=value[:300_000], partition=0)
    p.flush(20)
    got = _consume(boot, ["kd-large"], 1, fetch_max_bytes=1000000, max_partition_fetch_bytes=350000)
    return f"consumed {got}"


def _legacy_codecs(boot: str, fallback: str | None, codecs: tuple[str, ...], topic: str) -> str:
    from confluent_kafka import Producer

    extra: dict[str, Any] = {}
    if fallback:
        extra = {"api_version_request": False, "broker_version_fallback": fallback}
    for codec in codecs:
        p = Producer(_conf(boot, compression_type=codec, linger_ms=20, client_id=f"kd-{codec}", **extra))
        for i in range(4):
            key = None if i == 3 else b"%s-key-%d" % (codec.encode(), i)
            p.produce(topic, key=key, value=b"%s value %d " % (codec.encode(), i) * (i + 1), partition=0)
        p.flush(10)
    got = _consume(boot, [topic], 4, timeout=8, **extra)
    return f"consumed {got}"


def s_msgset_v0_codecs(boot: str) -> str:
    """No ApiVersions, broker version fallback 0.9.0: Produce v1 with MessageSet v0 (magic 0),
    plain and gzip, snappy, lz4 wrappers (lz4 with the pre-0.10 frame header checksum); the
    mock answers UNSUPPORTED_VERSION to the gzip and snappy ones, then a Fetch reads back."""
    return _legacy_codecs(boot, "0.9.0", ("none", "gzip", "snappy", "lz4"), "kd-v0")


def s_msgset_v1_codecs(boot: str) -> str:
    """The mock advertises Produce <= v2 and Fetch <= v4: MessageSet v1 (magic 1), plain and
    gzip, snappy, lz4 wrappers with relative inner offsets; the mock answers
    UNSUPPORTED_VERSION to compressed v1 sets, then a Fetch reads the plain ones back."""
    return _legacy_codecs(boot, None, ("none", "gzip", "snappy", "lz4"), "kd-v1")


def s_sasl(boot: str) -> str:
    """SASL_PLAINTEXT logins against the scripted responder in kafka_sasl_responder.py:
    PLAIN, PLAIN with a wrong password (SASL_AUTHENTICATION_FAILED), SCRAM-SHA-256,
    SCRAM-SHA-512 and OAUTHBEARER (unsecured JWT with an extension), each followed by a
    Metadata request. Only the client side is genuine."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    from kafka_sasl_responder import client_conf

    port = int(boot.rsplit(":", 1)[1])
    logins = [("PLAIN", "alice", None), ("PLAIN", "bob", "wrong"), ("SCRAM-SHA-256", "alice", None),
              ("SCRAM-SHA-512", "bob", None), ("OAUTHBEARER", "alice", None)]
    results = []
    for mech, user, password in logins:
        admin = AdminClient(client_conf(port, mech, user, password))
        try:
            md = admin.list_topics(timeout=3 if password is None else 1)
            results.append(f"{mech}: {len(md.brokers)} broker")
        except KafkaException as e:
            results.append(f"{mech}: {e.args[0].name()}")
    return "; ".join(results)


# name -> (function, server: "mock" or "sasl", mock api version limits "key:min:max")
SCENARIOS: dict[str, tuple[Callable[[str], str], str, tuple[str, ...]]] = {
    "mock_ck_transactions": (s_transactions, "mock", ()),
    "mock_ck_large_values": (s_large_values, "mock", ()),
    "mock_ck_msgset_v0_codecs": (s_msgset_v0_codecs, "mock", ()),
    "mock_ck_msgset_v1_codecs": (s_msgset_v1_codecs, "mock", ("0:0:2", "1:0:4")),
    "scripted_ck_sasl": (s_sasl, "sasl", ()),
}


class Scripted:
    """The SASL responder, with the interface of Mock."""

    def __init__(self) -> None:
        from kafka_sasl_responder import Responder

        self.responder = Responder()
        self.ports = [self.responder.port]
        self.bootstrap = f"127.0.0.1:{self.responder.port}"

    def stop(self) -> None:
        self.responder.stop()


def run(name: str, out: str) -> None:
    import confluent_kafka

    fn, server_kind, apiversions = SCENARIOS[name]
    pcap = os.path.join(out, name + ".pcap")
    server: Mock | Scripted = Mock(apiversions) if server_kind == "mock" else Scripted()
    dump = Tcpdump(pcap, server.ports)
    t0 = time.time()
    try:
        result = fn(server.bootstrap)
    finally:
        stats = dump.stop()
        server.stop()
    server_name = SERVER.format(confluent_kafka.libversion()[0])
    if server_kind == "sasl":
        server_name = "scripted responder (tools/kafka_sasl_responder.py)"
    meta = {
        "capture_file": os.path.basename(pcap),
        "capture_stats": stats,
        "client_output_tail": result,
        "clients": f"confluent-kafka {confluent_kafka.__version__}",
        "duration_s": round(time.time() - t0, 1),
        "ports": server.ports,
        "protocol": "kafka",
        "scenario": " ".join((fn.__doc__ or "").split()),
        "server": server_name,
    }
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{name}: {os.path.getsize(pcap)} bytes, {stats}; {result}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--mock", help=argparse.SUPPRESS)
    ap.add_argument("--apiversion", action="append", default=[], help=argparse.SUPPRESS)
    ap.add_argument("scenarios", nargs="*")
    a = ap.parse_args()
    if a.mock:
        serve_mock(a.mock, a.apiversion)
        return
    os.makedirs(a.out, exist_ok=True)
    for name in a.scenarios or list(SCENARIOS):
        run(name, a.out)


if __name__ == "__main__":
    main()
