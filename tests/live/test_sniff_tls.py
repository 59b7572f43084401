"""`kdissect sniff --tls-keylog` on loopback: kazoo speaks TLS to a TLS-terminating proxy (Python's
`ssl`, OpenSSL) in front of a real ZooKeeper server. The proxy writes the session secrets to the
key log as each handshake completes, after sniff has started: sniff reads what was appended."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import export_jsonl, start_sniff
from test_sniff_zookeeper import free_port, zookeeper  # noqa: F401 - the fixture
from tlspeer import certificate

pytestmark = pytest.mark.live


def _pump(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    for s in (src, dst):
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def tls_proxy(zookeeper: int, tmp_path: Path) -> Iterator[tuple[int, int, Path]]:  # noqa: F811
    keylog = tmp_path / "keys.log"
    keylog.write_text("")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*certificate())
    ctx.keylog_filename = str(keylog)
    port = free_port()
    listener = socket.create_server(("127.0.0.1", port))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except OSError:
                continue
            try:
                client = ctx.wrap_socket(raw, server_side=True)
            except (OSError, ssl.SSLError):
                raw.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", zookeeper))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port, zookeeper, keylog
    stop.set()
    thread.join(5)
    listener.close()


def test_tls_is_decrypted_live_with_a_key_log_that_grows(tls_proxy: tuple[int, int, Path], tmp_path: Path) -> None:
    from kazoo.client import KazooClient

    port, zk_port, keylog = tls_proxy
    pcap = tmp_path / "tls.pcap"
    sn = start_sniff(["-i", "lo", "-f", f"tcp port {port}", "--tls-keylog", str(keylog), "-F", "jsonl",
                      "-w", str(pcap)])
    zk = KazooClient(hosts=f"127.0.0.1:{port}", use_ssl=True, verify_certs=False)
    zk.start(timeout=15)
    zk.ensure_path("/kd/tls")
    zk.set("/kd/tls", b"secret-value")
    assert zk.get("/kd/tls")[0] == b"secret-value"
    zk.delete("/kd/tls")
    zk.stop()
    zk.close()
    time.sleep(0.3)
    assert sn.stop() == 0, sn.stderr_lines
    assert keylog.read_text().count("CLIENT_TRAFFIC_SECRET_0") >= 1
    msgs = sn.messages()
    assert msgs and {m["protocol"] for m in msgs} == {"zookeeper"}  # found on a random port, decrypted
    assert all(m["tls"]["version"] == "TLS 1.3" for m in msgs)
    requests = [(m["info"]["op"], m["info"].get("path")) for m in msgs if m["kind"] == "request"]
    for op in [("connect", None), ("setData", "/kd/tls"), ("getData", "/kd/tls"), ("delete", "/kd/tls")]:
        assert op in requests, op
    get = next(m for m in msgs if m["kind"] == "response" and m["info"]["op"] == "getData")
    assert get["summary"] == "getData → 12 bytes v1"
    back = export_jsonl(pcap, "--tls-keylog", str(keylog))
    assert sorted((m["frame"], m["kind"], m["summary"]) for m in back) == \
        sorted((m["frame"], m["kind"], m["summary"]) for m in msgs)
    assert secrets_absent(sn.stdout, keylog)


def secrets_absent(text: str, keylog: Path) -> bool:
    secrets = [line.split()[2] for line in keylog.read_text().splitlines() if line.strip()]
    return not any(s.lower() in text.lower() for s in secrets)
