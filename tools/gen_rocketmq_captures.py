#!/usr/bin/env python3
"""Make the project's RocketMQ captures on the loopback interface.

    python3 tools/gen_rocketmq_captures.py [SCENARIO ...]      (root: runs tcpdump -i lo)

A scripted responder (this file; not a broker) plays the name server (127.0.0.1:9876) and the
broker (127.0.0.1:10911). It reads each request's header with kdissect's own header decoders
and answers with kdissect.rocketmq.encode, in JSON or in the ROCKETMQ binary header format.

Scenarios (captures/rocketmq/<name>.pcap plus a .json sidecar):
- cpp_produce_pull: the `rocketmq` Python client (C++ core, genuine client side): route lookup,
  sync / oneway / orderly SEND_MESSAGE, a zlib-compressed 300 KB body, HEART_BEAT, PULL_MESSAGE
  with stored messages, UNREGISTER_CLIENT. The responder answers in JSON.
- encoder_binary: a scripted client written with kdissect.rocketmq.encode (both sides scripted)
  sending ROCKETMQ binary headers (plus two JSON requests answered in binary): SEND_MESSAGE_V2,
  SEND_BATCH_MESSAGE, oneway UPDATE_CONSUMER_OFFSET, PULL_MESSAGE answered with zlib / LZ4 /
  ZSTD bodies, an IPv6 born host, a V2 magic and an inner batch, a TOPIC_NOT_EXIST error, a
  fastjson route body with bare numeric keys, and broker-to-client requests
  (NOTIFY_CONSUMER_IDS_CHANGED oneway, CONSUME_MESSAGE_DIRECTLY answered by the client).
"""

from __future__ import annotations

import json
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import lz4.frame
import zstandard

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kdissect.rocketmq import encode as enc  # noqa: E402
from kdissect.rocketmq.header import Header, decode_binary, decode_json  # noqa: E402
from kdissect.rocketmq.props import split_properties  # noqa: E402

OUT = ROOT / "captures" / "rocketmq"
NS_PORT, BROKER_PORT = 9876, 10911
JSON, BINARY = enc.SERIALIZE_JSON, enc.SERIALIZE_ROCKETMQ
# A fastjson-style route body: the broker-address map has a bare integer key.
ROUTE = ('{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:' + str(BROKER_PORT) + '"},"brokerName":"broker-a",'
         '"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
         '"readQueueNums":4,"topicSynFlag":0,"writeQueueNums":4}]}')


# -- framing helpers ------------------------------------------------------------------------


def read_frame(s: socket.socket, buf: bytearray) -> tuple[Header, bytes] | None:
    """The next frame's header and body, or None at end of stream."""
    while True:
        if len(buf) >= 4:
            total = struct.unpack(">I", buf[:4])[0]
            if len(buf) >= 4 + total:
                data = bytes(buf[: 4 + total])
                del buf[: 4 + total]
                word = struct.unpack(">I", data[4:8])[0]
                st, hlen = word >> 24, word & 0xFFFFFF
                h = decode_json(data[8 : 8 + hlen], 8) if st == JSON else decode_binary(data, 8, 8 + hlen)
                return h, data[8 + hlen :]
        chunk = s.recv(65536)
        if not chunk:
            return None
        buf += chunk


def ext_of(h: Header) -> dict[str, str]:
    return {e.key: "" if e.value is None else str(e.value) for e in h.ext}


# -- the responder ----------------------------------------------------------------------------


class Responder:
    """Answers requests on both ports; `reply` is JSON, BINARY or None (same type as the request)."""

    def __init__(self, reply: int | None) -> None:
        self.reply = reply
        self.lock = threading.Lock()
        self.store: dict[tuple[str, int], list[tuple[bytes, str, int]]] = {}
        self.sockets: list[socket.socket] = []
        self.stop = False

    def answer(self, s: socket.socket, h: Header, code: int, ext: dict[str, str] | None = None,
               body: bytes = b"", remark: str | None = None) -> None:
        st = self.reply if self.reply is not None else h.serialize_type
        s.sendall(enc.frame(code, opaque=h.opaque or 0, flag=1, ext=ext, body=body, remark=remark,
                            version=401, serialize=st))

    def on_send(self, s: socket.socket, h: Header, body: bytes) -> None:
        ext = ext_of(h)
        topic = ext.get("topic", ext.get("b", ""))
        qid = int(ext.get("queueId", ext.get("e", "0")) or 0)
        sysflag = int(ext.get("sysFlag", ext.get("f", "0")) or 0)
        with self.lock:
            q = self.store.setdefault((topic, qid), [])
            q.append((body, ext.get("properties", ext.get("i", "")), sysflag))
            off = len(q) - 1
        msg_id = "7F00000100002A9F%016X" % (off * 200)
        self.answer(s, h, 0, {"msgId": msg_id, "queueId": str(qid), "queueOffset": str(off)})

    def on_pull(self, s: socket.socket, h: Header, body: bytes) -> None:
        ext = ext_of(h)
        topic, qid = ext.get("topic", ""), int(ext.get("queueId", "0") or 0)
        start = int(ext.get("queueOffset", "0") or 0)
        with self.lock:
            q = list(self.store.get((topic, qid), []))
        batch = q[start : start + 32]
        if not batch:
            time.sleep(0.2)
            self.answer(s, h, 19, {"nextBeginOffset": str(start), "minOffset": "0", "maxOffset": str(len(q)),
                                   "suggestWhichBrokerId": "0"}, remark="No new message")
            return
        data = b""
        for i, (b, props, sysflag) in enumerate(batch):
            data += enc.stored_message(topic, b, queue_id=qid, queue_offset=start + i, physical_offset=(start + i) * 200,
                                       sysflag=sysflag, props=dict(split_properties(props)),
                                       born_ts=int(time.time() * 1000), store_ts=int(time.time() * 1000))
        self.answer(s, h, 0, {"nextBeginOffset": str(start + len(batch)), "minOffset": "0",
                              "maxOffset": str(len(q)), "suggestWhichBrokerId": "0"}, data)

    def on_route(self, s: socket.socket, h: Header, body: bytes) -> None:
        topic = ext_of(h).get("topic", "")
        if topic.endswith("-missing"):
            self.answer(s, h, 17, remark=f"No topic route info in name server for the topic: {topic}")
        else:
            self.answer(s, h, 0, body=ROUTE.encode())

    def handle(self, s: socket.socket, h: Header, body: bytes) -> None:
        code = h.code or 0
        if h.flag & 1:
            return  # a client's answer to a broker-to-client request
        handlers = {105: self.on_route, 10: self.on_send, 310: self.on_send, 320: self.on_send, 11: self.on_pull}
        fn = handlers.get(code)
        if fn is not None:
            fn(s, h, body)
        elif h.flag & 2:
            return  # oneway: no answer
        elif code == 38:
            self.answer(s, h, 0, body=b'{"consumerIdList":["127.0.0.1@gen"]}')
        elif code in (14, 30, 31):
            self.answer(s, h, 0, {"offset": "0"})
        elif code in (34, 35, 36):
            self.answer(s, h, 0)
        else:
            self.answer(s, h, 3, remark=f"request type {code} not supported")

    def serve(self, s: socket.socket) -> None:
        buf = bytearray()
        try:
            while not self.stop:
                got = read_frame(s, buf)
                if got is None:
                    return
                self.handle(s, *got)
        except OSError:
            pass
        finally:
            s.close()

    def listen(self, port: int) -> None:
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", port))
        ls.listen(16)
        ls.settimeout(0.2)
        self.sockets.append(ls)

        def loop() -> None:
            while not self.stop:
                try:
                    c, _ = ls.accept()
                except (TimeoutError, OSError):
                    continue
                threading.Thread(target=self.serve, args=(c,), daemon=True).start()

        threading.Thread(target=loop, daemon=True).start()

    def close(self) -> None:
        self.stop = True
        for ls in self.sockets:
            ls.close()


# -- the scripted encoder client --------------------------------------------------------------


class Client:
    def __init__(self, port: int) -> None:
        self.s = socket.create_connection(("127.0.0.1", port))
        self.buf = bytearray()
        self.opaque = 0

    def call(self, code: int, ext: dict[str, str] | None = None, body: bytes = b"", *, oneway: bool = False,
             serialize: int = BINARY) -> tuple[Header, bytes] | None:
        self.opaque += 1
        self.s.sendall(enc.frame(code, opaque=self.opaque, flag=2 if oneway else 0, ext=ext, body=body,
                                 language=0, version=401, serialize=serialize))
        return None if oneway else read_frame(self.s, self.buf)

    def close(self) -> None:
        self.s.close()


def _v2(topic: str, queue: int, sysflag: int, props: dict[str, str], batch: bool = False) -> dict[str, str]:
    return {"a": "PID-enc", "b": topic, "c": "TBW102", "d": "4", "e": str(queue), "f": str(sysflag),
            "g": str(int(time.time() * 1000)), "h": "0", "i": enc.properties(props), "j": "0", "k": "false",
            "m": "true" if batch else "false", "n": "broker-a"}


def _pull_body() -> bytes:
    now = int(time.time() * 1000)
    inner = enc.batch([(b"inner one", {"UNIQ_KEY": "IN1"}), (b"inner two", {"UNIQ_KEY": "IN2"})])
    parts = [
        enc.stored_message("orders", zlib.compress(b"zlib body " * 50), sysflag=0x301, queue_id=2, queue_offset=10,
                           physical_offset=4000, props={"KEYS": "z1", "TAGS": "zlib"}, born_ts=now, store_ts=now),
        enc.stored_message("orders", lz4.frame.compress(b"lz4 body " * 50), sysflag=0x101, queue_id=2, queue_offset=11,
                           physical_offset=4400, props={"KEYS": "l1"}, born=("::1", 45000), born_ts=now, store_ts=now),
        enc.stored_message("orders", zstandard.ZstdCompressor().compress(b"zstd body " * 50), sysflag=0x201,
                           queue_id=2, queue_offset=12, physical_offset=4800, props={"KEYS": "s1"}, magic_v2=True,
                           born_ts=now, store_ts=now),
        enc.stored_message("orders", inner, sysflag=0xC0, queue_id=2, queue_offset=13, physical_offset=5200,
                           props={"INNER_NUM": "2"}, born_ts=now, store_ts=now),
    ]
    return b"".join(parts)


def scenario_encoder(resp: Responder) -> None:
    ns = Client(NS_PORT)
    ns.call(105, {"topic": "orders"})
    ns.call(105, {"topic": "orders-missing"}, serialize=JSON)
    ns.close()
    b = Client(BROKER_PORT)
    b.call(310, _v2("orders", 3, 0, {"KEYS": "k1", "TAGS": "new", "UNIQ_KEY": "U1", "WAIT": "true"}), b"order 1")
    big = zlib.compress(b"compressed order " * 400)
    b.call(310, _v2("orders", 1, 0x301, {"KEYS": "k2", "UNIQ_KEY": "U2"}), big)
    batch = enc.batch([(f"batch {i}".encode(), {"UNIQ_KEY": f"B{i}", "KEYS": f"bk{i}"}) for i in range(3)])
    b.call(320, _v2("orders", 0, 0, {"WAIT": "true"}, batch=True), batch)
    b.call(34, body=b'{"clientID":"127.0.0.1@enc","consumerDataSet":[{"groupName":"CID-enc"}],"producerDataSet":[]}',
           serialize=JSON)
    b.call(15, {"consumerGroup": "CID-enc", "topic": "orders", "queueId": "3", "commitOffset": "1"}, oneway=True)
    with resp.lock:
        resp.store[("orders", 2)] = []
    pull_ext = {"consumerGroup": "CID-enc", "topic": "orders", "queueId": "2", "queueOffset": "10",
                "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "1000",
                "subVersion": "0"}
    b.s.sendall(enc.frame(11, opaque=100, ext=pull_ext, version=401))
    # The broker answers the pull with prepared stored messages, then asks the client things.
    for _ in range(3):  # the pull response, a oneway notification, a request to answer
        got = read_frame(b.s, b.buf)
        if got is not None and got[0].code == 309 and not got[0].flag & 1:
            result = b'{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"remark":"consumed","spentTimeMills":2}'
            b.s.sendall(enc.frame(0, opaque=got[0].opaque or 0, flag=1, body=result, version=401))
    b.call(11, dict(pull_ext, queueOffset="14"))
    b.close()


def broker_pushes(resp: Responder, s: socket.socket, h: Header) -> None:
    """For the encoder scenario: answer the first pull with prepared messages and then send two
    broker-to-client requests on the same connection."""
    resp.answer(s, h, 0, {"nextBeginOffset": "14", "minOffset": "0", "maxOffset": "14", "suggestWhichBrokerId": "0"},
                _pull_body())
    s.sendall(enc.frame(40, opaque=7000, flag=2, ext={"consumerGroup": "CID-enc"}, version=401))
    one = enc.stored_message("orders", b"direct", queue_id=1, queue_offset=3, props={"UNIQ_KEY": "D1"})
    s.sendall(enc.frame(309, opaque=7001, ext={"consumerGroup": "CID-enc", "clientId": "127.0.0.1@enc",
                                               "msgId": "D1", "brokerName": "broker-a"}, body=one, version=401))


class EncoderResponder(Responder):
    def handle(self, s: socket.socket, h: Header, body: bytes) -> None:
        if h.code == 11 and h.opaque == 100:
            broker_pushes(self, s, h)
            return
        super().handle(s, h, body)


# -- the genuine C++-core client ---------------------------------------------------------------

CPP_CLIENT = r'''
import sys, time
from rocketmq.client import Message, Producer, PullConsumer
ns = sys.argv[1]
p = Producer("PID-kdissect", timeout=3000, max_message_size=4 * 1024 * 1024)
p.set_namesrv_addr(ns)
p.start()
for i in range(3):
    m = Message("TopicKd")
    m.set_keys("key-%d" % i)
    m.set_tags("TagA")
    m.set_property("n", str(i))
    m.set_body(("body %d" % i).encode())
    print("sent", p.send_sync(m).status)
m = Message("TopicKd")
m.set_body(b"oneway")
p.send_oneway(m)
m = Message("TopicKd")
m.set_keys("orderly")
m.set_body(b"orderly")
print("orderly", p.send_orderly(m, 1).status)
m = Message("TopicKd")
m.set_body(b"Z" * 300000)
print("big", p.send_sync(m).status)
time.sleep(0.3)
c = PullConsumer("CID-kdissect")
c.set_namesrv_addr(ns)
c.start()
n = 0
for msg in c.pull("TopicKd"):
    n += 1
    if n >= 6:
        break
print("pulled", n)
c.shutdown()
p.shutdown()
'''


def scenario_cpp(resp: Responder) -> None:
    r = subprocess.run([sys.executable, "-c", CPP_CLIENT, f"127.0.0.1:{NS_PORT}"], capture_output=True,
                       text=True, timeout=90)
    print(r.stdout[-600:], r.stderr[-600:], file=sys.stderr)


# -- capture orchestration ----------------------------------------------------------------------

SCENARIOS: dict[str, tuple[Any, Any, str]] = {
    "cpp_produce_pull": (scenario_cpp, lambda: Responder(JSON),
                         "client: rocketmq 0.4.4 (C++ core, genuine); server: scripted responder (JSON headers)"),
    "encoder_binary": (scenario_encoder, lambda: EncoderResponder(BINARY),
                       "both sides scripted with kdissect.rocketmq.encode; ROCKETMQ binary headers, two JSON requests"),
}


def capture(name: str) -> None:
    run, make, desc = SCENARIOS[name]
    OUT.mkdir(parents=True, exist_ok=True)
    pcap = OUT / f"gen_{name}.pcap"
    resp = make()
    resp.listen(NS_PORT)
    resp.listen(BROKER_PORT)
    bpf = f"tcp port {NS_PORT} or tcp port {BROKER_PORT}"
    td = subprocess.Popen(["tcpdump", "-i", "lo", "-U", "-s", "0", "-n", "-w", str(pcap), bpf],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    try:
        run(resp)
    finally:
        time.sleep(1.0)
        td.send_signal(signal.SIGINT)
        td.wait(10)
        resp.close()
    meta = {"protocol": "rocketmq", "ports": [NS_PORT, BROKER_PORT], "scenario": name, "sides": desc}
    (OUT / f"gen_{name}.json").write_text(json.dumps(meta, indent=1) + "\n")


def main(argv: list[str]) -> int:
    for name in argv[1:] or list(SCENARIOS):
        capture(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
