#!/usr/bin/env python3
"""Capture real Pulsar client traffic (pip pulsar-client, the C++-core client) on loopback.

    python3 tools/gen_pulsar_captures.py [SCENARIO ...] [--out captures/pulsar] [--port 6650]

A scripted responder (below, part of this project) listens on 127.0.0.1 and answers just enough
of the binary protocol for the client to run each scenario: it is not a broker. tcpdump records
lo into OUT/<scenario>.pcap with a .json sidecar. Only the client side is genuine; the responder
encodes its commands with the field numbers of kdissect/pulsar/schema_table.py and stores what
producers send to push it back as MESSAGE frames (with broker entry metadata when the client
announces support for it). Needs root (tcpdump) and `pip install pulsar-client`.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kdissect.model import ARRAY, STRUCT, Field  # noqa: E402
from kdissect.pulsar.protowire import WalkContext, walk  # noqa: E402
from kdissect.pulsar.schema_table import ENUMS, MESSAGES  # noqa: E402

TYPES = {name: code for code, name in ENUMS["BaseCommand.Type"].items()}
NUMBERS = {msg: {e[0]: (n, e) for n, e in fields.items()} for msg, fields in MESSAGES.items()}


# -- a schema-driven protobuf encoder ---------------------------------------------------------

def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode(message: str, values: dict[str, Any]) -> bytes:
    out = bytearray()
    for name, value in values.items():
        if value is None:
            continue
        number, (_, kind, typ, label, _) = NUMBERS[message][name]
        for v in value if label == "repeated" else [value]:
            if kind == "message":
                body = encode(typ, v)
                out += _varint(number << 3 | 2) + _varint(len(body)) + body
            elif typ in ("string", "bytes"):
                raw = v.encode() if isinstance(v, str) else bytes(v)
                out += _varint(number << 3 | 2) + _varint(len(raw)) + raw
            else:
                out += _varint(number << 3) + _varint(int(v))
    return bytes(out)


def command(type_name: str, body: dict[str, Any]) -> bytes:
    code = TYPES[type_name]
    field_name = MESSAGES["BaseCommand"][code][0]
    return encode("BaseCommand", {"type": code, field_name: body})


def frame(type_name: str, body: dict[str, Any], section: bytes = b"") -> bytes:
    cmd = command(type_name, body)
    return struct.pack(">II", 4 + len(cmd) + len(section), len(cmd)) + cmd + section


def values(fields: list[Field]) -> dict[str, Any]:
    """Decoded fields as plain values (structs as dicts, arrays as lists)."""
    out: dict[str, Any] = {}
    for f in fields:
        if f.hint == STRUCT:
            out[f.name] = values(f.children or [])
        elif f.hint == ARRAY:
            out[f.name] = [values(c.children or []) if c.hint == STRUCT else c.value for c in f.children or []]
        else:
            out[f.name] = f.value
    return out


# -- the scripted responder ---------------------------------------------------------------------

class Store:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.topics: dict[str, list[tuple[int, bytes]]] = {}  # topic -> [(entry, payload section)]
        self.failed: set[str] = set()


class Session(threading.Thread):
    LEDGER = 7

    def __init__(self, sock: socket.socket, store: Store, cfg: dict[str, Any], port: int) -> None:
        super().__init__(daemon=True)
        self.sock, self.store, self.cfg, self.port = sock, store, cfg, port
        self.producers: dict[int, str] = {}
        self.consumers: dict[int, list[Any]] = {}  # id -> [topic, next index, permits]
        self.entry_metadata = False
        self.wlock = threading.Lock()

    def send(self, type_name: str, body: dict[str, Any], section: bytes = b"") -> None:
        with self.wlock:
            self.sock.sendall(frame(type_name, body, section))

    def read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def run(self) -> None:
        try:
            while True:
                total = struct.unpack(">I", self.read(4))[0]
                data = self.read(total)
                csize = struct.unpack(">I", data[:4])[0]
                base = values(walk(data, 4, 4 + csize, "BaseCommand", WalkContext(), 0))
                type_name = ENUMS["BaseCommand.Type"].get(base.get("type", 0), "?")
                body = base.get(MESSAGES["BaseCommand"].get(base.get("type", 0), ("",))[0], {})
                handler = getattr(self, "on_" + type_name.lower(), None)
                if handler is not None:
                    handler(body, data[4 + csize:])
        except (EOFError, OSError):
            pass
        finally:
            self.sock.close()

    def on_connect(self, b: dict[str, Any], _: bytes) -> None:
        self.entry_metadata = bool(b.get("feature_flags", {}).get("supports_broker_entry_metadata"))
        self.connected(b.get("protocol_version", 0))
        if b.get("auth_method_name") == "token" and self.cfg.get("challenge"):
            # a broker refreshing credentials: the client answers with AUTH_RESPONSE
            self.send("AUTH_CHALLENGE", {"server_version": "kdissect-responder", "protocol_version": 21,
                                         "challenge": {"auth_method_name": "token", "auth_data": b"refresh"}})

    def connected(self, version: int) -> None:
        self.send("CONNECTED", {"server_version": "kdissect-responder", "protocol_version": min(version, 21),
                                "max_message_size": self.cfg.get("max_message_size", 5 * 1024 * 1024)})
        self.send("PING", {})

    def on_ping(self, b: dict[str, Any], _: bytes) -> None:
        self.send("PONG", {})

    def on_partitioned_metadata(self, b: dict[str, Any], _: bytes) -> None:
        rid = b["request_id"]
        if b["topic"].endswith("-missing"):
            self.send("PARTITIONED_METADATA_RESPONSE", {"request_id": rid, "response": 1, "error": 11,
                                                        "message": "topic does not exist"})
        else:
            self.send("PARTITIONED_METADATA_RESPONSE", {"partitions": 0, "request_id": rid, "response": 0})

    def on_lookup(self, b: dict[str, Any], _: bytes) -> None:
        self.send("LOOKUP_RESPONSE", {"broker_service_url": f"pulsar://127.0.0.1:{self.port}", "response": 1,
                                      "request_id": b["request_id"], "authoritative": True})

    def on_producer(self, b: dict[str, Any], _: bytes) -> None:
        self.producers[b["producer_id"]] = b["topic"]
        self.send("PRODUCER_SUCCESS", {"request_id": b["request_id"],
                                       "producer_name": b.get("producer_name") or f"gen-{b['producer_id']}",
                                       "last_sequence_id": -1})

    def on_send(self, b: dict[str, Any], section: bytes) -> None:
        pid, seq = b["producer_id"], b["sequence_id"]
        topic = self.producers.get(pid, "?")
        if topic.endswith("-senderror") and topic not in self.store.failed:
            self.store.failed.add(topic)  # once: the client reconnects and sends again
            self.send("SEND_ERROR", {"producer_id": pid, "sequence_id": seq, "error": 2,
                                     "message": "scripted persistence failure"})
            return
        with self.store.lock:
            entries = self.store.topics.setdefault(topic, [])
            entry = len(entries)
            entries.append((entry, section))
        self.send("SEND_RECEIPT", {"producer_id": pid, "sequence_id": seq,
                                   "message_id": {"ledger_id": self.LEDGER, "entry_id": entry}})
        for cid in list(self.consumers):
            self.deliver(cid)

    def on_subscribe(self, b: dict[str, Any], _: bytes) -> None:
        if b["topic"].endswith("-missing"):
            self.send("ERROR", {"request_id": b["request_id"], "error": 11, "message": "topic does not exist"})
            return
        self.consumers[b["consumer_id"]] = [b["topic"], 0, 0]
        self.send("SUCCESS", {"request_id": b["request_id"]})

    def on_flow(self, b: dict[str, Any], _: bytes) -> None:
        c = self.consumers.get(b["consumer_id"])
        if c is not None:
            c[2] += b["message_permits"]
            self.deliver(b["consumer_id"])

    def deliver(self, cid: int) -> None:
        c = self.consumers[cid]
        with self.store.lock:
            entries = list(self.store.topics.get(c[0], []))
        while c[1] < len(entries) and c[2] > 0:
            entry, section = entries[c[1]]
            c[1] += 1
            c[2] -= 1
            if self.entry_metadata:
                meta = encode("BrokerEntryMetadata", {"broker_timestamp": int(time.time() * 1000), "index": entry})
                section = struct.pack(">HI", 0x0E02, len(meta)) + meta + section
            self.send("MESSAGE", {"consumer_id": cid,
                                  "message_id": {"ledger_id": self.LEDGER, "entry_id": entry}}, section)

    def on_ack(self, b: dict[str, Any], _: bytes) -> None:
        if b.get("request_id") is not None:
            self.send("ACK_RESPONSE", {"consumer_id": b["consumer_id"], "request_id": b["request_id"]})

    def _success(self, b: dict[str, Any], _: bytes) -> None:
        self.send("SUCCESS", {"request_id": b["request_id"]})

    on_close_producer = on_close_consumer = on_unsubscribe = _success

    def on_seek(self, b: dict[str, Any], _: bytes) -> None:
        c = self.consumers.get(b["consumer_id"])
        if c is not None:
            c[1] = 0
        self._success(b, _)

    def on_get_last_message_id(self, b: dict[str, Any], _: bytes) -> None:
        topic = self.consumers.get(b["consumer_id"], ["?"])[0]
        n = len(self.store.topics.get(topic, []))
        self.send("GET_LAST_MESSAGE_ID_RESPONSE", {"request_id": b["request_id"],
                                                   "last_message_id": {"ledger_id": self.LEDGER, "entry_id": n - 1}})

    def on_redeliver_unacknowledged_messages(self, b: dict[str, Any], _: bytes) -> None:
        return

    def on_get_schema(self, b: dict[str, Any], _: bytes) -> None:
        self.send("GET_SCHEMA_RESPONSE", {"request_id": b["request_id"], "error_code": 11,
                                          "error_message": "no schema"})


def serve(port: int, cfg: dict[str, Any], stop: threading.Event) -> threading.Thread:
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(8)
    ls.settimeout(0.2)
    store = Store()

    def loop() -> None:
        with ls:
            while not stop.is_set():
                try:
                    s, _ = ls.accept()
                except TimeoutError:
                    continue
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                Session(s, store, cfg, port).start()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t


# -- client scenarios (run in a child process: `--client NAME URL`) ----------------------------

CODECS = ("NONE", "LZ4", "ZLib", "ZSTD", "SNAPPY")


def client_codecs(url: str) -> None:
    import pulsar

    c = pulsar.Client(url, operation_timeout_seconds=5)
    for name in CODECS:
        topic = f"persistent://public/default/codec-{name.lower()}"
        cons = c.subscribe(topic, "codec-sub", consumer_name="codec-consumer")
        prod = c.create_producer(topic, producer_name=f"codec-{name.lower()}",
                                 compression_type=getattr(pulsar.CompressionType, name),
                                 batching_enabled=True, batching_max_messages=4, batching_max_publish_delay_ms=200)
        for i in range(4):
            prod.send_async(f"{name} message {i} ".encode() + b"abc" * 20, None,
                            properties={"i": str(i)}, partition_key=f"k{i % 2}", event_timestamp=1700000000000 + i)
        prod.flush()
        got = 0
        for _ in range(4):
            cons.acknowledge(cons.receive(3000))
            got += 1
        print(name, "received", got)
        prod.close()
        cons.close()
    c.close()


def client_chunks_errors(url: str) -> None:
    import pulsar

    c = pulsar.Client(url, operation_timeout_seconds=3, authentication=pulsar.AuthenticationToken("s3cr3t-t0ken"))
    topic = "persistent://public/default/chunked"
    cons = c.subscribe(topic, "chunk-sub", consumer_type=pulsar.ConsumerType.Failover)
    prod = c.create_producer(topic, chunking_enabled=True, batching_enabled=False)
    prod.send(bytes(range(256)) * 12, properties={"kind": "chunked"})
    print("chunked received", len(cons.receive(3000).data()))
    print("last", cons.get_last_message_id())
    cons.seek(pulsar.MessageId.earliest)
    prod.close()
    cons.unsubscribe()
    try:
        c.subscribe("persistent://public/default/gone-missing", "s")
    except Exception as e:  # the scripted error
        print("subscribe error:", e)
    p2 = c.create_producer("persistent://public/default/x-senderror", batching_enabled=False, send_timeout_millis=1000)
    p2.send_async(b"doomed", lambda res, mid: print("send result", res))
    time.sleep(0.5)
    c.close()


def client_encrypted(url: str) -> None:
    import tempfile

    import pulsar

    with tempfile.TemporaryDirectory() as tmp:
        priv, pub = f"{tmp}/private.pem", f"{tmp}/public.pem"
        subprocess.run(["openssl", "genrsa", "-out", priv, "2048"], check=True, capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", priv, "-pubout", "-out", pub], check=True, capture_output=True)
        keys = pulsar.CryptoKeyReader(pub, priv)
        c = pulsar.Client(url, operation_timeout_seconds=5)
        topic = "persistent://public/default/secret"
        cons = c.subscribe(topic, "enc-sub", crypto_key_reader=keys)
        prod = c.create_producer(topic, encryption_key="kdissect-key", crypto_key_reader=keys,
                                 compression_type=pulsar.CompressionType.LZ4, batching_enabled=False)
        prod.send(b"confidential " * 8, properties={"tier": "gold"})
        msg = cons.receive(3000)
        print("decrypted", msg.data()[:12])
        cons.acknowledge(msg)
        prod.close()
        cons.close()
        c.close()


SCENARIOS: dict[str, tuple[Any, dict[str, Any], str]] = {
    "gen__pulsar_codecs_batches": (client_codecs, {},
                                   "batching producers with NONE, LZ4, ZLIB, ZSTD and SNAPPY; consumer receives the "
                                   "batches back (with broker entry metadata), ACK"),
    "gen__pulsar_chunks_auth_errors": (client_chunks_errors, {"max_message_size": 1024, "challenge": True},
                                       "token auth with AUTH_CHALLENGE, chunked message (max_message_size 1024), "
                                       "GET_LAST_MESSAGE_ID, SEEK, SUBSCRIBE error, SEND_ERROR"),
    "gen__pulsar_encrypted": (client_encrypted, {},
                              "end-to-end encrypted message (RSA data key, LZ4) produced and consumed"),
}


def capture(name: str, out: Path, port: int) -> None:
    fn, cfg, scenario = SCENARIOS[name]
    stop = threading.Event()
    server = serve(port, cfg, stop)
    pcap = out / f"{name}.pcap"
    # --immediate-mode: without it, packets held in the kernel buffer may never reach the file
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "--immediate-mode", "-U", "-s", "0", "-n", "-w", str(pcap),
                             f"tcp port {port}"], stderr=subprocess.PIPE)
    time.sleep(1.5)
    started = time.time()
    client = subprocess.run([sys.executable, __file__, "--client", name, f"pulsar://127.0.0.1:{port}"],
                            capture_output=True, text=True, timeout=60)
    time.sleep(1.0)
    dump.send_signal(signal.SIGINT)
    _, err = dump.communicate(timeout=10)
    stop.set()
    server.join()
    side = {
        "capture_file": pcap.name, "protocol": "pulsar", "ports": [port], "scenario": scenario,
        "clients": "pulsar-client (C++ core)", "server": "scripted responder tools/gen_pulsar_captures.py (not a broker)",
        "client_rc": client.returncode, "client_output_tail": (client.stdout + client.stderr)[-1500:],
        "capture_stats": " ".join(err.decode(errors="replace").split()[-12:]), "duration_s": round(time.time() - started, 1),
    }
    pcap.with_suffix(".json").write_text(json.dumps(side, indent=1) + "\n")
    print(f"{pcap}: client rc {client.returncode}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenarios", nargs="*")
    ap.add_argument("--out", default=str(ROOT / "captures" / "pulsar"))
    ap.add_argument("--port", type=int, default=6650)
    ap.add_argument("--client", nargs=2, metavar=("NAME", "URL"))
    a = ap.parse_args()
    if a.client:
        SCENARIOS[a.client[0]][0](a.client[1])
        return 0
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in a.scenarios or list(SCENARIOS):
        capture(name, out, a.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
