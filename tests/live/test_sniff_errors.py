"""`kdissect sniff` refuses bad use with one clear line and exit code 2, never a traceback."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys

import pytest
from conftest import require_live


def sniff(*args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, sys.executable, "-m", "kdissect", "sniff", *args, "--duration", "1"],
                          capture_output=True, text=True, timeout=30)


def one_error_line(res: subprocess.CompletedProcess[str], text: str) -> None:
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kdissect: error: ") and text in lines[0], res.stderr
    assert res.stdout == ""


def has_lo() -> bool:
    try:
        socket.if_nametoindex("lo")
        return True
    except OSError:
        return False


def test_no_such_interface() -> None:
    one_error_line(sniff("-i", "kd-none0"), "no such interface: 'kd-none0'")


@pytest.mark.skipif(not has_lo(), reason="no loopback interface")
def test_bad_filter() -> None:
    from kdissect.capture import bpf

    if bpf._libpcap() is None:
        pytest.skip("libpcap is not installed")
    one_error_line(sniff("-i", "lo", "-f", "tcp prt 9092"), "bad capture filter 'tcp prt 9092'")


@pytest.mark.live
def test_no_permission_without_cap_net_raw() -> None:
    require_live()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    # root, but with CAP_NET_RAW removed from the bounding set
    res = sniff("-i", "lo", prefix=(setpriv, "--inh-caps=-all", "--bounding-set=-net_raw"))
    if res.returncode == 0 or "setpriv:" in res.stderr:
        pytest.skip(f"cannot drop CAP_NET_RAW here: {res.stderr.strip()}")
    one_error_line(res, "no permission to capture on lo")
    assert "CAP_NET_RAW" in res.stderr


@pytest.mark.live
def test_sigterm_and_sigint_stop_cleanly() -> None:
    require_live()
    import signal
    import time

    for sig in (signal.SIGTERM, signal.SIGINT):
        proc = subprocess.Popen([sys.executable, "-m", "kdissect", "sniff", "-i", "lo", "-f", "tcp port 9",
                                 "-F", "jsonl"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ))
        assert proc.stderr is not None
        assert "capturing on lo" in proc.stderr.readline()
        t0 = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=10)
        assert time.monotonic() - t0 < 3
        assert proc.returncode == 0 and out == ""
        assert err.strip().splitlines() == ["kdissect: 0 packets, 0 messages, 0 dropped by the kernel"]
