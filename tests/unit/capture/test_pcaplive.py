"""The libpcap capture backend's pieces that need no privileges: loading libpcap, link type
mapping, and the one-line errors for libpcap's activation statuses."""

from __future__ import annotations

import pytest

from kdissect.capture import bpf, pcaplive
from kdissect.errors import UsageError


def test_missing_libpcap_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bpf, "_libpcap", lambda: None)
    with pytest.raises(UsageError, match=r"the pcap backend needs libpcap \(the libpcap0.8 package"):
        pcaplive.PcapCapture("lo")


def test_libpcap_declares_the_live_functions() -> None:
    if bpf.libpcap() is None:
        pytest.skip("libpcap is not installed")
    lib = pcaplive.load()
    assert lib is pcaplive.load() is bpf.libpcap()  # one library, loaded once
    assert lib.pcap_create.restype is not None and lib.pcap_next_ex.argtypes is not None


@pytest.mark.parametrize(("dlt", "platform", "linktype"), [
    (1, "linux", 1), (113, "linux", 113), (276, "linux", 276), (0, "darwin", 0),
    (12, "linux", 101), (12, "darwin", 101), (14, "freebsd14", 101),
    (12, "openbsd7", 108), (14, "openbsd7", 101),
])
def test_dlt_to_linktype(dlt: int, platform: str, linktype: int) -> None:
    assert pcaplive.linktype_of(dlt, platform) == linktype


@pytest.mark.parametrize(("status", "detail", "message"), [
    (pcaplive.PCAP_ERROR_NO_SUCH_DEVICE, "", "no such interface: 'eth9' (`kdissect interfaces` lists them)"),
    (pcaplive.PCAP_ERROR_IFACE_NOT_UP, "", "interface eth9 is down"),
    (pcaplive.PCAP_ERROR_PERM_DENIED, "socket: Operation not permitted",
     "no permission to capture on eth9: run as root or give the Python interpreter CAP_NET_RAW"),
    (pcaplive.PCAP_ERROR, "boom", "cannot capture on eth9: boom"),
    (-42, "", "cannot capture on eth9: libpcap error -42"),
])
def test_activation_errors(status: int, detail: str, message: str) -> None:
    err = pcaplive._activation_error("eth9", status, detail)
    assert str(err).startswith(message) and "\n" not in str(err)
