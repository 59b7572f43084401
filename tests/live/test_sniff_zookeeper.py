"""`kdissect sniff` on loopback while kazoo talks to a real ZooKeeper server (Debian's
`zookeeper` package) bound to 127.0.0.1 with a temporary data directory."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import export_jsonl, require_live, start_sniff

pytestmark = pytest.mark.live
ZK_JAR = Path("/usr/share/java/zookeeper.jar")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[int]:
    require_live()
    java = shutil.which("java")
    if java is None or not ZK_JAR.exists():
        pytest.skip("ZooKeeper is not installed (apt-get install zookeeper)")
    pytest.importorskip("kazoo")
    port = free_port()
    cfg = tmp_path / "zoo.cfg"
    (tmp_path / "data").mkdir()
    cfg.write_text(f"tickTime=2000\ndataDir={tmp_path / 'data'}\nclientPort={port}\n"
                   "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n")
    proc = subprocess.Popen([java, "-Xmx128m", "-Dzookeeper.admin.enableServer=false", "-cp", str(ZK_JAR),
                             "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.skip("ZooKeeper did not start")
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_zookeeper_session_is_decoded_live(zookeeper: int, tmp_path: Path) -> None:
    from kazoo.client import KazooClient

    port = zookeeper
    pcap = tmp_path / "zk.pcap"
    sn = start_sniff(["-i", "lo", "-f", f"tcp port {port}", "--decode-as", f"{port}=zookeeper",
                      "-F", "jsonl", "-w", str(pcap)])
    zk = KazooClient(hosts=f"127.0.0.1:{port}")
    zk.start(timeout=10)
    zk.ensure_path("/kd/live")
    zk.set("/kd/live", b"hello")
    assert zk.get("/kd/live")[0] == b"hello"
    assert zk.get_children("/kd") == ["live"]
    zk.delete("/kd/live")
    zk.stop()
    zk.close()
    time.sleep(0.3)
    assert sn.stop() == 0, sn.stderr_lines
    assert " 0 dropped by the kernel" in sn.summary
    msgs = sn.messages()
    assert {m["protocol"] for m in msgs} == {"zookeeper"}
    requests = [(m["info"]["op"], m["info"].get("path")) for m in msgs if m["kind"] == "request"]
    for op in [("connect", None), ("create", "/kd"), ("create", "/kd/live"), ("setData", "/kd/live"),
               ("getData", "/kd/live"), ("getChildren", "/kd"), ("delete", "/kd/live"), ("closeSession", None)]:
        assert op in requests, op
    # Each response follows its request (same xid), with a response time.
    for i, m in enumerate(msgs):
        if m["kind"] == "response":
            reqs = [r for r in msgs[:i] if r["kind"] == "request" and r["info"]["corr"] == m["info"]["corr"]
                    and r["frame"] == m["match"]["frame"]]
            assert len(reqs) == 1 and reqs[0]["info"]["op"] == m["info"]["op"], m
            assert m["match"]["rtt_ms"] >= 0
    get = next(m for m in msgs if m["kind"] == "response" and m["info"]["op"] == "getData")
    assert get["summary"] == "getData → 5 bytes v1"
    assert not [d for m in msgs for d in m["diagnostics"] if d["severity"] == "error"]
    back = export_jsonl(pcap, "--decode-as", f"{port}=zookeeper")
    assert sorted((m["frame"], m["kind"], m["summary"]) for m in back) == \
        sorted((m["frame"], m["kind"], m["summary"]) for m in msgs)
