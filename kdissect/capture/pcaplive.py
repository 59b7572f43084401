"""CaptureSource for a live interface through the system libpcap (ctypes, the library bpf.py
loads to compile filters): `sniff --backend pcap`, and the only backend where AF_PACKET does
not exist (macOS, the BSDs).

The handle is made with pcap_create and activated with the snap length, a read timeout, the
buffer size and nanosecond timestamps where the platform has them; the filter is compiled on
the handle and set with pcap_setfilter (libpcap runs it in the kernel where it can); packets
are read with pcap_next_ex and their link type is pcap_datalink's. On Linux libpcap keeps one
copy of each loopback packet itself.

The handle is non-blocking and waited on with select() on pcap_get_selectable_fd: on Linux
libpcap's TPACKET_V3 reader given a timeout blocks until the kernel hands over a ring block,
and the kernel does not hand over an empty one, so a blocking read would never return on an
idle interface. Elsewhere immediate mode is set, so that BPF hands over each packet as it comes
(select() on a BPF device does not honour the read timeout).
"""

from __future__ import annotations

import ctypes
import select
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from kdissect.capture import bpf
from kdissect.capture.livepacket import DRAIN_S, POLL_MS, Packet, Stats
from kdissect.capture.pcapfile import RawFrame
from kdissect.errors import UsageError

ERRBUF_SIZE = 256
TIMEOUT_MS = 50  # read timeout: on Linux, a ring block is handed over this long after its first packet
BATCH_PACKETS = 4096  # packets read at most before the batch is handed on
TSTAMP_PRECISION_NANO = 1
PCAP_ERROR = -1
PCAP_ERROR_NO_SUCH_DEVICE = -5
PCAP_ERROR_PERM_DENIED = -8
PCAP_ERROR_IFACE_NOT_UP = -9
PCAP_ERROR_PROMISC_PERM_DENIED = -11


class _Timeval(ctypes.Structure):
    # time_t and suseconds_t: long and long on Linux and the BSDs, long and int on macOS.
    _fields_ = [("sec", ctypes.c_long), ("frac", ctypes.c_int32 if sys.platform == "darwin" else ctypes.c_long)]


class _PktHdr(ctypes.Structure):
    _fields_ = [("ts", _Timeval), ("caplen", ctypes.c_uint32), ("len", ctypes.c_uint32)]


class _PcapStat(ctypes.Structure):
    _fields_ = [("recv", ctypes.c_uint), ("drop", ctypes.c_uint), ("ifdrop", ctypes.c_uint)]


def _declare(lib: Any) -> Any:
    vp, ci, cp = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
    lib.pcap_create.restype = vp
    lib.pcap_create.argtypes = [cp, cp]
    for fn in ("pcap_set_snaplen", "pcap_set_promisc", "pcap_set_timeout", "pcap_set_buffer_size",
               "pcap_set_tstamp_precision"):
        if hasattr(lib, fn):
            getattr(lib, fn).argtypes = [vp, ci]
    for fn in ("pcap_activate", "pcap_datalink", "pcap_get_tstamp_precision", "pcap_get_selectable_fd"):
        if hasattr(lib, fn):
            getattr(lib, fn).argtypes = [vp]
    lib.pcap_setnonblock.argtypes = [vp, ci, cp]
    if hasattr(lib, "pcap_set_immediate_mode"):
        lib.pcap_set_immediate_mode.argtypes = [vp, ci]
    lib.pcap_statustostr.restype = cp
    lib.pcap_statustostr.argtypes = [ci]
    lib.pcap_setfilter.argtypes = [vp, ctypes.POINTER(bpf._Program)]
    lib.pcap_next_ex.argtypes = [vp, ctypes.POINTER(ctypes.POINTER(_PktHdr)),
                                 ctypes.POINTER(ctypes.POINTER(ctypes.c_ubyte))]
    lib.pcap_stats.argtypes = [vp, ctypes.POINTER(_PcapStat)]
    return lib


def load() -> Any:
    """libpcap with the live-capture functions declared; a UsageError where it is missing."""
    lib = bpf.libpcap()
    if lib is None or not hasattr(lib, "pcap_create"):
        raise UsageError("the pcap backend needs libpcap (the libpcap0.8 package on Debian); "
                         "install it, or use --backend tpacket on Linux")
    if not getattr(lib, "_kdissect_live", False):
        _declare(lib)
        lib._kdissect_live = True
    return lib


def linktype_of(dlt: int, platform: str = sys.platform) -> int:
    """The LINKTYPE_ written to files for a DLT_ value from pcap_datalink (they differ only for
    raw IP and OpenBSD's loopback)."""
    if platform.startswith("openbsd"):
        return {12: 108, 14: 101}.get(dlt, dlt)
    return {12: 101, 14: 101}.get(dlt, dlt)


def _activation_error(name: str, status: int, detail: str) -> UsageError:
    if status == PCAP_ERROR_NO_SUCH_DEVICE:
        return UsageError(f"no such interface: {name!r} (`kdissect interfaces` lists them)")
    if status == PCAP_ERROR_IFACE_NOT_UP:
        return UsageError(f"interface {name} is down")
    if status in (PCAP_ERROR_PERM_DENIED, PCAP_ERROR_PROMISC_PERM_DENIED):
        return UsageError(f"no permission to capture on {name}: run as root or give the Python "
                          "interpreter CAP_NET_RAW (setcap cap_net_raw+ep <python>)"
                          + (f" ({detail})" if detail else ""))
    return UsageError(f"cannot capture on {name}: {detail or 'libpcap error ' + str(status)}")


class PcapCapture:
    """Packets from one interface through libpcap. Use as a context manager."""

    def __init__(self, interface: str, bpf_filter: str = "", buffer_mib: int = 64) -> None:
        self._lib = lib = load()
        self.interface = interface
        self.stats = Stats()
        self.error: str | None = None  # why reading stopped early, if it did
        self._number = 0
        err = ctypes.create_string_buffer(ERRBUF_SIZE)
        self._p: int | None = lib.pcap_create(interface.encode(), err)
        if not self._p:
            raise UsageError(f"cannot capture on {interface}: {err.value.decode(errors='replace')}")
        try:
            self._tick = self._activate(buffer_mib)
            self.linktype = linktype_of(lib.pcap_datalink(self._p))
            self._set_filter(bpf_filter)
            if lib.pcap_setnonblock(self._p, 1, err) != 0:
                raise UsageError(f"cannot capture on {interface}: {err.value.decode(errors='replace')}")
        except BaseException:
            self.close()
            raise

    def _geterr(self) -> str:
        return str((self._lib.pcap_geterr(self._p) or b"").decode(errors="replace"))

    def _activate(self, buffer_mib: int) -> int:
        """Activate the handle; nanoseconds per tick of the timestamps it gives."""
        lib, p = self._lib, self._p
        lib.pcap_set_snaplen(p, bpf.SNAPLEN)
        lib.pcap_set_promisc(p, 0)
        lib.pcap_set_timeout(p, TIMEOUT_MS)
        lib.pcap_set_buffer_size(p, buffer_mib << 20)
        if not sys.platform.startswith("linux") and hasattr(lib, "pcap_set_immediate_mode"):
            lib.pcap_set_immediate_mode(p, 1)
        nano = hasattr(lib, "pcap_set_tstamp_precision") and \
            lib.pcap_set_tstamp_precision(p, TSTAMP_PRECISION_NANO) == 0
        status = lib.pcap_activate(p)
        if status < 0:
            detail = self._geterr() if status == PCAP_ERROR else ""
            if not detail:
                detail = str((lib.pcap_statustostr(status) or b"").decode(errors="replace"))
            raise _activation_error(self.interface, status, detail)
        if nano and hasattr(lib, "pcap_get_tstamp_precision"):
            nano = lib.pcap_get_tstamp_precision(p) == TSTAMP_PRECISION_NANO
        return 1 if nano else 1000

    def _set_filter(self, expr: str) -> None:
        if not expr.strip():
            return
        lib, prog = self._lib, bpf._Program()
        if lib.pcap_compile(self._p, ctypes.byref(prog), expr.encode(), 1, bpf.PCAP_NETMASK_UNKNOWN) != 0:
            raise UsageError(f"bad capture filter {expr!r}: {self._geterr() or 'invalid'}")
        try:
            if lib.pcap_setfilter(self._p, ctypes.byref(prog)) != 0:
                raise UsageError(f"cannot set the capture filter on {self.interface}: {self._geterr()}")
        finally:
            lib.pcap_freecode(ctypes.byref(prog))

    def __enter__(self) -> PcapCapture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._p:
            self.read_stats()
            self._lib.pcap_close(self._p)
            self._p = None

    def read_stats(self) -> Stats:
        """libpcap's counters since the start (ps_recv, ps_drop: the kernel's drops)."""
        if self._p:
            st = _PcapStat()
            if self._lib.pcap_stats(self._p, ctypes.byref(st)) == 0:
                self.stats.received, self.stats.dropped = st.recv, st.drop
        return self.stats

    def _read(self) -> list[Packet]:
        """The packets libpcap holds now (at most BATCH_PACKETS); stops at an error, kept in
        `error`."""
        lib, p, tick, linktype = self._lib, self._p, self._tick, self.linktype
        hdr = ctypes.POINTER(_PktHdr)()
        data = ctypes.POINTER(ctypes.c_ubyte)()
        out: list[Packet] = []
        while len(out) < BATCH_PACKETS:
            rc = lib.pcap_next_ex(p, ctypes.byref(hdr), ctypes.byref(data))
            if rc != 1:
                if rc < 0:
                    self.error = self._geterr() or f"libpcap error {rc}"
                break
            h = hdr.contents
            ns = h.ts.sec * 1_000_000_000 + h.ts.frac * tick
            self._number += 1
            # seconds + nanoseconds * 1e-9, as the file readers compute it: the same float again
            ts = h.ts.sec + (h.ts.frac * tick) * 1e-9
            out.append(Packet(RawFrame(self._number, ts, linktype, ctypes.string_at(data, h.caplen),
                                      max(h.len, h.caplen)), ns))
        return out

    def _wait(self, ms: float) -> bool:
        """Wait at most `ms` for libpcap's descriptor to be readable; whether it is."""
        fd = self._lib.pcap_get_selectable_fd(self._p) if hasattr(self._lib, "pcap_get_selectable_fd") else -1
        if fd < 0:
            time.sleep(ms / 1000)
            return True
        try:
            return bool(select.select([fd], [], [], ms / 1000)[0])
        except InterruptedError:
            return False

    def batches(self, stop: Callable[[], bool], poll_ms: int = POLL_MS,
                drain_s: float = DRAIN_S) -> Iterator[list[Packet]]:
        """Lists of packets as libpcap hands them over, and an empty list after `poll_ms`
        without any, so that the caller can check its own limits. Once `stop()` is true, what
        libpcap has already captured is read (for at most `drain_s`, until twice the ring block
        timeout passes without a packet), then the iteration ends; it ends at once on a read
        error."""
        drain_until: float | None = None
        while self._p and self.error is None:
            if drain_until is None and stop():
                drain_until = time.monotonic() + drain_s
            batch = self._read()
            if batch:
                yield batch
                if drain_until is not None and time.monotonic() >= drain_until:
                    return
                continue
            if drain_until is None:
                self._wait(poll_ms)
                yield []
                continue
            left = drain_until - time.monotonic()
            if left <= 0 or not self._wait(min(left * 1000, 2 * TIMEOUT_MS)):
                return
