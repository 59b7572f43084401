"""The network interfaces of this host: names, indexes, link types, state and addresses, read
with getifaddrs(3) through ctypes (Linux; macOS and the BSDs, whose socket addresses start with
a length byte and describe links with AF_LINK)."""

from __future__ import annotations

import ctypes
import ctypes.util
import socket
import sys
from dataclasses import dataclass, field

BSD_SOCKADDR = sys.platform == "darwin" or "bsd" in sys.platform  # sa_len, sa_family: one byte each
AF_PACKET = int(getattr(socket, "AF_PACKET", -1))
AF_LINK = int(getattr(socket, "AF_LINK", 18))  # macOS and the BSDs
IFT_ETHER = 6
IFT_LOOP = 24

IFF_UP = 0x1
IFF_LOOPBACK = 0x8
IFF_RUNNING = 0x40
ARPHRD_ETHER = 1
ARPHRD_LOOPBACK = 772
ARPHRD_NAMES = {1: "ethernet", 772: "loopback", 65534: "none (raw IP)", 519: "raw IP", 776: "ipv6-in-ipv4",
                778: "gre", 823: "ip6gre", 768: "ipip", 65535: "void", 280: "can", 801: "802.11",
                803: "802.11 radiotap", 32: "infiniband", 512: "ppp"}


@dataclass(slots=True)
class Interface:
    name: str
    index: int = 0
    flags: int = 0
    hatype: int = -1  # ARPHRD_* (-1: unknown)
    mac: str = ""
    addresses: list[str] = field(default_factory=list)

    @property
    def up(self) -> bool:
        return bool(self.flags & IFF_UP)

    @property
    def state(self) -> str:
        if not self.up:
            return "down"
        return "up" if self.flags & (IFF_RUNNING | IFF_LOOPBACK) else "up, no carrier"

    @property
    def link(self) -> str:
        return ARPHRD_NAMES.get(self.hatype, f"arphrd {self.hatype}" if self.hatype >= 0 else "?")

    @property
    def ethernet_framing(self) -> bool:
        """Whether captured frames carry an Ethernet header (loopback on Linux does)."""
        return self.hatype in (ARPHRD_ETHER, ARPHRD_LOOPBACK)


class _Ifaddrs(ctypes.Structure):
    pass


_Ifaddrs._fields_ = [
    ("ifa_next", ctypes.POINTER(_Ifaddrs)), ("ifa_name", ctypes.c_char_p), ("ifa_flags", ctypes.c_uint),
    ("ifa_addr", ctypes.c_void_p), ("ifa_netmask", ctypes.c_void_p), ("ifa_ifu", ctypes.c_void_p),
    ("ifa_data", ctypes.c_void_p),
]

_ADDR: dict[int, tuple[int, int]] = {int(socket.AF_INET): (4, 4), int(socket.AF_INET6): (8, 16)}  # family -> (offset, length) in sockaddr


def _family(p: int | None, bsd: bool = BSD_SOCKADDR) -> int:
    if not p:
        return -1
    return ctypes.c_ubyte.from_address(p + 1).value if bsd else ctypes.c_ushort.from_address(p).value


def _raw(p: int, off: int, n: int) -> bytes:
    return ctypes.string_at(p + off, n)


def _address(ent: _Ifaddrs) -> str | None:
    fam = _family(ent.ifa_addr)
    if fam not in _ADDR or ent.ifa_addr is None:
        return None
    off, n = _ADDR[fam]
    addr = socket.inet_ntop(fam, _raw(ent.ifa_addr, off, n))
    if _family(ent.ifa_netmask) == fam and ent.ifa_netmask is not None:
        bits = sum(bin(b).count("1") for b in _raw(ent.ifa_netmask, off, n))
        return f"{addr}/{bits}"
    return addr


def _link(iface: Interface, p: int) -> None:
    """Facts from an AF_PACKET sockaddr_ll: index, ARPHRD type, hardware address."""
    raw = _raw(p, 0, 20)
    iface.index = int.from_bytes(raw[4:8], "little", signed=True)
    iface.hatype = int.from_bytes(raw[8:10], "little")
    halen = min(raw[11], 8)
    iface.mac = ":".join(f"{b:02x}" for b in raw[12 : 12 + halen])


def _link_bsd(iface: Interface, p: int) -> None:
    """Facts from an AF_LINK sockaddr_dl: index and interface type (Ethernet, loopback)."""
    raw = _raw(p, 0, 8)
    iface.index = int.from_bytes(raw[2:4], sys.byteorder)
    iface.hatype = {IFT_ETHER: ARPHRD_ETHER, IFT_LOOP: ARPHRD_LOOPBACK}.get(raw[4], -1)


def list_interfaces() -> list[Interface]:
    """Every interface, in kernel index order; an empty list where getifaddrs is unavailable."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    head = ctypes.POINTER(_Ifaddrs)()
    if not hasattr(libc, "getifaddrs") or libc.getifaddrs(ctypes.byref(head)) != 0:
        return []
    found: dict[str, Interface] = {}
    try:
        node = head
        while node:
            ent = node.contents
            name = (ent.ifa_name or b"?").decode(errors="replace")
            iface = found.setdefault(name, Interface(name))
            iface.flags |= ent.ifa_flags
            fam = _family(ent.ifa_addr)
            if fam == AF_PACKET and not BSD_SOCKADDR and ent.ifa_addr is not None:
                _link(iface, ent.ifa_addr)
            elif fam == AF_LINK and BSD_SOCKADDR and ent.ifa_addr is not None:
                _link_bsd(iface, ent.ifa_addr)
            else:
                addr = _address(ent)
                if addr is not None:
                    iface.addresses.append(addr)
            node = ent.ifa_next
    finally:
        libc.freeifaddrs(head)
    for iface in found.values():
        if not iface.index:
            iface.index = _index(iface.name)
    return sorted(found.values(), key=lambda i: (i.index, i.name))


def _index(name: str) -> int:
    try:
        return socket.if_nametoindex(name)
    except OSError:
        return 0


def find_interface(name: str) -> Interface | None:
    for iface in list_interfaces():
        if iface.name == name:
            return iface
    return None
