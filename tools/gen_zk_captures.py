#!/usr/bin/env python3
"""Capture real ZooKeeper client traffic for the project's tests.

    python3 tools/gen_zk_captures.py [SCENARIO ...]

Needs root, tcpdump, Debian's `zookeeper` package (apt-get install -y zookeeper) and kazoo
(pip install kazoo). For each scenario it starts a standalone ZooKeeper on 127.0.0.1:2181 only
(fresh data directory, all four-letter words allowed, TTL nodes enabled), records the loopback
interface on port 2181 with tcpdump, drives the server with kazoo, and writes
captures/zookeeper/<scenario>.pcap. Opcodes kazoo has no method for (createTTL, createContainer,
getEphemerals, getAllChildrenNumber, addWatch, checkWatches, removeWatches, whoAmI, multiRead,
setWatches2) go through kazoo's own request queue with small request classes defined here.
Nothing leaves 127.0.0.1; every process started here is stopped by its own id.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "captures" / "zookeeper"
HOST, PORT = "127.0.0.1", 2181
ZK_CLASSPATH = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"
ZK_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"

CONFIG = """tickTime=500
minSessionTimeout=1000
dataDir={data}
clientPort={port}
clientPortAddress={host}
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
extendedTypesEnabled=true
"""


# -- the server and the recorder ---------------------------------------------------------


def wait_port(timeout: float = 30.0) -> None:
    end = time.time() + timeout
    while time.time() < end:
        try:
            with socket.create_connection((HOST, PORT), 0.5) as s:
                s.sendall(b"ruok")
                if s.recv(4) == b"imok":
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise SystemExit("ZooKeeper did not come up on 127.0.0.1:2181")


class Server:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="kdissect-zk-"))
        cfg = self.dir / "zoo.cfg"
        cfg.write_text(CONFIG.format(data=self.dir / "data", port=PORT, host=HOST))
        log = open(self.dir / "server.log", "wb")  # noqa: SIM115 - closed with the process
        cmd = ["java", "-Xmx256m", "-cp", ZK_CLASSPATH, ZK_MAIN, str(cfg)]
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        wait_port()

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Recorder:
    def __init__(self, pcap: Path) -> None:
        cmd = ["tcpdump", "-i", "lo", "-U", "-s", "0", "-Z", "root", "-w", str(pcap), f"tcp port {PORT}"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert self.proc.stderr is not None
        self.proc.stderr.readline()  # "listening on lo ...": capturing from here on
        time.sleep(0.5)

    def stop(self) -> str:
        time.sleep(1.5)
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=10)
        return " ".join(err.decode(errors="replace").split())


# -- requests kazoo has no method for ------------------------------------------------------


def _s(text: str) -> bytes:
    b = text.encode()
    return struct.pack(">i", len(b)) + b


def _strings(buf: bytes, off: int) -> tuple[list[str], int]:
    (n,) = struct.unpack_from(">i", buf, off)
    off += 4
    out = []
    for _ in range(max(n, 0)):
        (ln,) = struct.unpack_from(">i", buf, off)
        out.append(buf[off + 4 : off + 4 + ln].decode())
        off += 4 + ln
    return out, off


class Raw:
    """A request for kazoo's queue: an opcode, its serialized body, a reply decoder."""

    def __init__(self, type_: int, body: bytes, decode: Callable[[bytes, int], Any] | None = None) -> None:
        self.type = type_
        self.body = body
        self.decode = decode

    def serialize(self) -> bytes:
        return self.body

    def deserialize(self, buf: bytes, off: int) -> Any:
        return self.decode(buf, off) if self.decode else None


def world_acl() -> bytes:
    return struct.pack(">ii", 1, 31) + _s("world") + _s("anyone")


def create_req(path: str, data: bytes, flags: int, ttl: int | None = None) -> bytes:
    body = _s(path) + struct.pack(">i", len(data)) + data + world_acl() + struct.pack(">i", flags)
    return body + (struct.pack(">q", ttl) if ttl is not None else b"")


def call(zk: Any, req: Raw) -> Any:
    result = zk.handler.async_result()
    zk._call(req, result)
    try:
        return ("ok", result.get(timeout=5))
    except Exception as e:  # noqa: BLE001 - the outcome is reported, not handled
        return ("err", type(e).__name__)


def multi_read(paths: list[tuple[int, str]]) -> bytes:
    body = b""
    for op, path in paths:
        body += struct.pack(">i?i", op, False, -1) + _s(path) + b"\x00"
    return body + struct.pack(">i?i", -1, True, -1)


# -- scenarios -------------------------------------------------------------------------------


def client(**kw: Any) -> Any:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=f"{HOST}:{PORT}", timeout=4.0, **kw)
    zk.start(timeout=10)
    return zk


def scenario_extended_ops() -> list[str]:
    """Opcodes of ZooKeeper 3.5-3.9 beyond the classic set."""
    zk = client()
    log = []
    log.append(f"create2 {zk.create('/ext', b'root', include_data=True)[0]}")
    log.append(f"createContainer {call(zk, Raw(19, create_req('/ext/box', b'c', 4), lambda b, o: None))}")
    log.append(f"createTTL {call(zk, Raw(21, create_req('/ext/ttl', b't', 5, ttl=60000)))}")
    zk.create("/ext/eph", b"e", ephemeral=True)
    log.append(f"getEphemerals {call(zk, Raw(103, _s('/ext'), lambda b, o: _strings(b, o)[0]))}")
    total = call(zk, Raw(104, _s('/ext'), lambda b, o: struct.unpack_from('>i', b, o)[0]))
    log.append(f"getAllChildrenNumber {total}")
    log.append(f"addWatch {call(zk, Raw(106, _s('/ext') + struct.pack('>i', 1)))}")
    zk.set("/ext", b"changed")
    zk.create("/ext/new", b"n")
    log.append(f"checkWatches {call(zk, Raw(17, _s('/ext') + struct.pack('>i', 3)))}")
    log.append(f"removeWatches {call(zk, Raw(18, _s('/ext') + struct.pack('>i', 3)))}")
    log.append(f"whoAmI {call(zk, Raw(107, b''))}")
    log.append(f"multiRead {call(zk, Raw(22, multi_read([(4, '/ext'), (8, '/ext'), (4, '/missing')])))}")
    watches = struct.pack(">q", 0) + b"".join(
        struct.pack(">i", 1) + _s(p) for p in ("/ext", "/ext", "/ext", "/ext", "/ext/box"))
    log.append(f"setWatches2 {call(zk, Raw(105, watches))}")
    log.append(f"reconfig {call(zk, Raw(16, _s('') + _s('') + _s('') + struct.pack('>q', -1)))}")
    log.append(f"config {zk.get('/zookeeper/config')[0][:40]!r}")
    log.append(f"getACL {zk.get_acls('/ext')[0]}")
    zk.delete("/ext", recursive=True)
    zk.stop()
    zk.close()
    return log


def scenario_session() -> list[str]:
    """Session handshake variants: a new session, a re-attach with the right password, a
    re-attach with a wrong one (the server answers timeout 0, session 0)."""
    from kazoo.client import KazooClient

    log = []
    zk = client()
    sid, pwd = zk.client_id
    log.append(f"session 0x{sid:x}")
    again = client(client_id=(sid, pwd))
    log.append(f"re-attached 0x{again.client_id[0]:x} exists {again.exists('/') is not None}")
    again.stop()
    again.close()
    bad = KazooClient(hosts=f"{HOST}:{PORT}", timeout=4.0, client_id=(sid, b"\x01" * 16),
                      connection_retry={"max_tries": 0})
    try:
        bad.start(timeout=3)
        log.append(f"wrong password: client state {bad.state}")
    except Exception as e:  # noqa: BLE001 - kazoo reports the refusal as a timeout or expiry
        log.append(f"wrong password {type(e).__name__}")
    bad.stop()
    bad.close()
    zk.stop()
    zk.close()
    return log


def scenario_four_letter() -> list[str]:
    log = []
    for word in (b"ruok", b"srvr", b"isro", b"wchp", b"gtmk", b"stmk" + struct.pack(">q", 0x1F2), b"dirs"):
        with socket.create_connection((HOST, PORT), 5) as s:
            s.sendall(word)
            chunks = []
            while True:
                got = s.recv(65536)
                if not got:
                    break
                chunks.append(got)
        text = b"".join(chunks)
        log.append(f"{word[:4].decode()} {len(text)} bytes {text[:30]!r}")
        time.sleep(0.1)
    return log


EXPIRY_TIMEOUT = 2.0  # seconds: the expiring client's session timeout
EXPIRY_PAUSE = 5.0  # seconds the expiring client stays stopped: well past its session timeout


def _expiring_client(conn: Any) -> None:
    """The client whose session expires (a process of its own, so it can be stopped): it owns
    an ephemeral znode, then checks /expiry every 0.3 s; past the pause kazoo re-attaches with
    the old session, is told it expired, and opens a new session."""
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=f"{HOST}:{PORT}", timeout=EXPIRY_TIMEOUT)
    states: list[str] = []
    zk.add_listener(lambda state: states.append(str(state)))
    zk.start(timeout=10)
    zk.create("/expiry/owner", b"me", ephemeral=True)
    conn.send(zk.client_id[0])
    conn.recv()  # resumed after the pause
    end = time.time() + 6.0
    while time.time() < end:
        with contextlib.suppress(Exception):  # the connection is being re-established
            zk.exists("/expiry")
        time.sleep(0.3)
    conn.send(f"states {' '.join(states)}; new session 0x{zk.client_id[0]:x}")
    zk.stop()
    zk.close()


def scenario_session_expiry() -> list[str]:
    """A session that expires: its client process is stopped (SIGSTOP) past its 2 s session
    timeout while a second client watches its ephemeral znode (NodeDeleted when the server
    expires the session and closes its connection), then resumed: the re-attach is answered
    timeout 0, session 0, and the client opens a new session."""
    import multiprocessing

    log = []
    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe()
    setup = client()
    setup.ensure_path("/expiry")
    setup.stop()
    setup.close()
    proc = ctx.Process(target=_expiring_client, args=(theirs,))
    proc.start()
    sid = ours.recv()
    log.append(f"expiring session 0x{sid:x}")
    watcher = client()
    log.append(f"watching owner: {watcher.exists('/expiry/owner', watch=lambda e: log.append(f'watch {e.type}')) is not None}")
    time.sleep(0.5)
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGSTOP)
    time.sleep(EXPIRY_PAUSE)
    os.kill(proc.pid, signal.SIGCONT)
    ours.send("resumed")
    log.append(ours.recv())
    proc.join(15)
    watcher.delete("/expiry", recursive=True)
    watcher.stop()
    watcher.close()
    return log


SCENARIOS: dict[str, Callable[[], list[str]]] = {
    "zk_extended_ops": scenario_extended_ops,
    "zk_session": scenario_session,
    "zk_four_letter_more": scenario_four_letter,
    "zk_session_expiry": scenario_session_expiry,
}


def main() -> int:
    wanted = sys.argv[1:] or list(SCENARIOS)
    OUT.mkdir(parents=True, exist_ok=True)
    for name in wanted:
        pcap = OUT / f"{name}.pcap"
        server = Server()
        try:
            rec = Recorder(pcap)
            try:
                lines = SCENARIOS[name]()
            finally:
                stats = rec.stop()
        finally:
            server.stop()
        lines.append(stats)
        print(f"== {name}: {pcap.stat().st_size} bytes")
        for line in lines:
            print("   ", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
