"""CaptureSource for a live interface (Linux): an AF_PACKET socket with a TPACKET_V3 memory-mapped
receive ring and the capture filter compiled to classic BPF and run in the kernel.

Why not a packet-per-syscall socket: the kernel writes packets into a shared ring of blocks and
hands over a whole block at once (when full or after `RETIRE_MS`), so the cost per packet in
Python is one struct unpack and one slice; timestamps come from the kernel (nanoseconds), and
the ring absorbs bursts while the decoder catches up. PACKET_STATISTICS reports the packets the
kernel dropped because the ring was full.

Link types: interfaces with Ethernet framing (Ethernet, and loopback on Linux) are captured with
their link header (LINKTYPE_ETHERNET, 1); anything else (tun, WireGuard, GRE, `any`) is captured
from the network header on (LINKTYPE_RAW, 101), IPv4 and IPv6 only.
"""

from __future__ import annotations

import errno
import mmap
import select
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Protocol

from kdissect.capture import bpf
from kdissect.capture.ifaces import ARPHRD_LOOPBACK, Interface, find_interface
from kdissect.capture.livepacket import DRAIN_S, POLL_MS, Packet, Stats
from kdissect.capture.pcapfile import RawFrame
from kdissect.errors import UsageError

SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_STATISTICS = 6
PACKET_VERSION = 10
TPACKET_V3 = 2
ETH_P_ALL = 0x0003
SO_ATTACH_FILTER = 26
TP_STATUS_KERNEL = 0
TP_STATUS_USER = 1
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101

BLOCK_SIZE = 1 << 20  # a 64 KiB loopback/GSO packet fits whole
FRAME_SIZE = 2048  # nominal: TPACKET_V3 packs packets of any size into a block
RETIRE_MS = 50  # a block that is not full is handed over after this long
MAX_BACKLOG = 1 << 30  # bytes of packets waiting for the decoder

_U32 = struct.Struct("=I").unpack_from
_BLOCK = struct.Struct("=III").unpack_from  # block_status, num_pkts, offset_to_first_pkt (at +8)
# tpacket3_hdr: next_offset, sec, nsec, snaplen, len, status, mac, net, hv1 (rxhash, vlan_tci, vlan_tpid)
_HDR = struct.Struct("=IIIIIIHHIIH").unpack_from
_STATS = struct.Struct("=III")  # tp_packets, tp_drops, tp_freeze_q_cnt


def parse_block(buf: bytes | mmap.mmap, base: int, end: int, linktype: int, first: int) -> list[Packet]:
    """The packets of one TPACKET_V3 block at buf[base:end], numbered from `first`."""
    _, count, offset = _BLOCK(buf, base + 8)
    out: list[Packet] = []
    p = base + offset
    for _ in range(count):
        if p + 48 > end:
            break
        nxt, sec, nsec, snap, wlen, status, mac, _net, _hash, tci, tpid = _HDR(buf, p)
        if p + mac + snap > end:
            break
        data = buf[p + mac : p + mac + snap]
        if status & TP_STATUS_VLAN_VALID and linktype == LINKTYPE_ETHERNET and len(data) >= 12:
            tag = struct.pack(">HH", tpid if status & TP_STATUS_VLAN_TPID_VALID else 0x8100, tci & 0xFFFF)
            data = data[:12] + tag + data[12:]
            wlen += 4
        ns = sec * 1_000_000_000 + nsec
        out.append(Packet(RawFrame(first + len(out), sec + nsec * 1e-9, linktype, bytes(data),
                                   max(wlen, len(data))), ns))
        if not nxt:
            break
        p += nxt
    return out


class Source(Protocol):
    """What the sniffer reads: LiveCapture (AF_PACKET) or pcaplive.PcapCapture (libpcap)."""

    interface: str
    linktype: int
    stats: Stats

    def batches(self, stop: Callable[[], bool], poll_ms: int = POLL_MS,
                drain_s: float = DRAIN_S) -> Iterator[list[Packet]]: ...

    def read_stats(self) -> Stats: ...

    def __enter__(self) -> Source: ...

    def __exit__(self, *exc: object) -> None: ...


BACKENDS = ("tpacket", "pcap")


def default_backend() -> str:
    """The TPACKET_V3 ring where AF_PACKET exists (Linux), libpcap elsewhere."""
    return "tpacket" if hasattr(socket, "AF_PACKET") else "pcap"


def open_live(backend: str, interface: str, bpf_filter: str = "", buffer_mib: int = 64) -> Source:
    """A capture on `interface` with the named backend ("tpacket" or "pcap")."""
    if backend == "pcap":
        from kdissect.capture.pcaplive import PcapCapture

        return PcapCapture(interface, bpf_filter, buffer_mib)
    if not hasattr(socket, "AF_PACKET"):
        raise UsageError("the tpacket backend needs Linux (AF_PACKET); use --backend pcap")
    return LiveCapture(interface, bpf_filter, buffer_mib)


def _resolve(name: str) -> tuple[Interface, bool, int]:
    """(interface, cooked, loopback index for `any`) or a UsageError."""
    if name == "any":
        lo = next((i for i in _all_up() if i.hatype == ARPHRD_LOOPBACK), None)
        return Interface("any", 0, 1), True, lo.index if lo else 0
    iface = find_interface(name)
    if iface is None:
        raise UsageError(f"no such interface: {name!r} (`kdissect interfaces` lists them)")
    if not iface.up:
        raise UsageError(f"interface {name} is down")
    return iface, not iface.ethernet_framing, 0


def _all_up() -> list[Interface]:
    from kdissect.capture.ifaces import list_interfaces

    return [i for i in list_interfaces() if i.up]


def _open_socket(name: str, cooked: bool) -> socket.socket:
    kind = socket.SOCK_DGRAM if cooked else socket.SOCK_RAW
    # Protocol 0 receives nothing until bind(): the filter and ring are in place before any packet.
    proto = socket.htons(ETH_P_ALL) if name == "any" else 0
    try:
        return socket.socket(socket.AF_PACKET, kind, proto)
    except PermissionError:
        raise UsageError(f"no permission to capture on {name}: run as root or give the Python "
                         "interpreter CAP_NET_RAW (setcap cap_net_raw+ep <python>)") from None
    except OSError as e:
        raise UsageError(f"cannot capture on {name}: {e.strerror or e}") from None


class LiveCapture:
    """Packets from one interface (or `any`), filtered in the kernel. Use as a context manager."""

    def __init__(self, interface: str, bpf_filter: str = "", buffer_mib: int = 64) -> None:
        iface, cooked, lo_index = _resolve(interface)
        self.interface = interface
        self.linktype = LINKTYPE_RAW if cooked else LINKTYPE_ETHERNET
        dlt = bpf.DLT_RAW if cooked else bpf.DLT_EN10MB
        insns = bpf.program(bpf_filter, dlt, iface.hatype == ARPHRD_LOOPBACK, cooked, lo_index)
        self.blocks = max(4, (buffer_mib << 20) // BLOCK_SIZE)
        self.stats = Stats()
        self._next_block = 0
        self._number = 0
        self._sock = _open_socket(interface, cooked)
        try:
            self._setup(insns)
            if interface != "any":
                self._sock.bind((interface, ETH_P_ALL))
        except OSError as e:
            self._sock.close()
            raise UsageError(f"cannot capture on {interface}: {e.strerror or e}") from None

    def _setup(self, insns: list[bpf.Insn]) -> None:
        s = self._sock
        fprog, _keep = bpf.pack(insns)
        s.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
        s.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V3)
        frames = BLOCK_SIZE // FRAME_SIZE * self.blocks
        req = struct.pack("=7I", BLOCK_SIZE, self.blocks, FRAME_SIZE, frames, RETIRE_MS, 0, 0)
        try:
            s.setsockopt(SOL_PACKET, PACKET_RX_RING, req)
        except OSError as e:
            if e.errno != errno.ENOMEM:
                raise
            raise UsageError(f"cannot allocate a {self.blocks} MiB capture ring; "
                             "use a smaller --buffer-size") from None
        self._ring = mmap.mmap(s.fileno(), BLOCK_SIZE * self.blocks, mmap.MAP_SHARED,
                               mmap.PROT_READ | mmap.PROT_WRITE)

    def __enter__(self) -> LiveCapture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sock.fileno() < 0:
            return
        self.read_stats()
        self._ring.close()
        self._sock.close()

    def read_stats(self) -> Stats:
        """Fold the kernel's counters (reset on every read) into `stats`."""
        if self._sock.fileno() >= 0:
            packets, drops, _ = _STATS.unpack(self._sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 12))
            self.stats.received += packets
            self.stats.dropped += drops
        return self.stats

    def _take(self) -> list[Packet] | None:
        """The packets of the next block if the kernel has handed it over, else None."""
        ring = self._ring
        base = self._next_block * BLOCK_SIZE
        if not _U32(ring, base + 8)[0] & TP_STATUS_USER:
            return None
        packets = parse_block(ring, base, base + BLOCK_SIZE, self.linktype, self._number + 1)
        ring[base + 8 : base + 12] = b"\0\0\0\0"  # TP_STATUS_KERNEL: the block goes back
        self._next_block = (self._next_block + 1) % self.blocks
        self._number += len(packets)
        return packets

    def _pending(self) -> bool:
        """Whether the block the kernel is filling holds packets (it hands it over within RETIRE_MS)."""
        base = self._next_block * BLOCK_SIZE
        return bool(_U32(self._ring, base + 12)[0])

    def batches(self, stop: Callable[[], bool], poll_ms: int = POLL_MS,
                drain_s: float = DRAIN_S) -> Iterator[list[Packet]]:
        """One list per ring block handed over by the kernel, and an empty list after `poll_ms`
        without traffic so that the caller can check its own limits. Once `stop()` is true, what
        the kernel has already captured is drained (at most one ring's worth, waiting at most
        `drain_s` for the last partly filled block), then the iteration ends."""
        poller = select.poll()
        poller.register(self._sock.fileno(), select.POLLIN | select.POLLERR)
        drain_until: float | None = None
        drained = 0
        while True:
            if drain_until is None and stop():
                drain_until = time.monotonic() + drain_s
            packets = self._take()
            if packets is not None:
                yield packets
                drained += drain_until is not None
                if drained >= self.blocks:
                    return
                continue
            if drain_until is None:
                poller.poll(poll_ms)
                yield []
                continue
            left = drain_until - time.monotonic()
            if left <= 0 or not self._pending():
                return
            poller.poll(int(left * 1000) + 1)


class Drainer:
    """Empties the kernel ring on a thread of its own, so that a decoder that falls behind costs
    memory (up to `max_backlog` bytes of packets) rather than kernel drops. Packets beyond the
    backlog limit are counted in `overflow`, never silently lost."""

    def __init__(self, cap: Source, stop: Callable[[], bool], max_backlog: int = MAX_BACKLOG) -> None:
        self.cap = cap
        self.max_backlog = max_backlog
        self.backlog = 0  # bytes queued
        self.overflow = 0  # packets dropped because the backlog was full
        self._stop = stop
        self._queue: deque[list[Packet]] = deque()
        self._cond = threading.Condition()
        self._finished = False
        self._aborted = False
        self._thread = threading.Thread(target=self._run, name="kdissect-capture", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for batch in self.cap.batches(lambda: self._aborted or self._stop()):
                if self._aborted:
                    break
                if batch:
                    self._put(batch)
        finally:
            with self._cond:
                self._finished = True
                self._cond.notify()

    def _put(self, batch: list[Packet]) -> None:
        size = sum(len(p.frame.data) for p in batch)
        with self._cond:
            if self.backlog + size > self.max_backlog:
                self.overflow += len(batch)
                return
            self._queue.append(batch)
            self.backlog += size
            self._cond.notify()

    def batches(self, poll_s: float = POLL_MS / 1000) -> Iterator[list[Packet]]:
        """The captured batches in order; an empty list after `poll_s` without any; ends once
        the capture thread has stopped (after its drain) and everything has been handed out."""
        while True:
            with self._cond:
                if not self._queue and not self._finished:
                    self._cond.wait(poll_s)
                if not self._queue and self._finished:
                    return
                batch = self._queue.popleft() if self._queue else []
                self.backlog -= sum(len(p.frame.data) for p in batch)
            yield batch

    def close(self) -> None:
        """Stop the capture thread now (no drain) and wait for it."""
        self._aborted = True
        self._thread.join()
