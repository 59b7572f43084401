"""Socket addresses as macOS and the BSDs lay them out (a length byte, then a one-byte family),
read by the interface list without running there."""

from __future__ import annotations

import ctypes
import socket
import struct
import sys

from kdissect.capture import ifaces


def test_family_of_a_bsd_sockaddr() -> None:
    sin = ctypes.create_string_buffer(bytes([16, socket.AF_INET]) + b"\0\0" + socket.inet_aton("10.1.2.3"), 16)
    assert ifaces._family(ctypes.addressof(sin), bsd=True) == socket.AF_INET
    linux = ctypes.create_string_buffer(struct.pack("=H", socket.AF_INET) + bytes(14), 16)
    assert ifaces._family(ctypes.addressof(linux), bsd=False) == socket.AF_INET
    assert ifaces._family(None, bsd=True) == -1


def test_link_facts_of_a_sockaddr_dl() -> None:
    # sdl_len, sdl_family, sdl_index, sdl_type, sdl_nlen, sdl_alen, sdl_slen
    for ift, hatype in ((ifaces.IFT_ETHER, ifaces.ARPHRD_ETHER), (ifaces.IFT_LOOP, ifaces.ARPHRD_LOOPBACK),
                        (209, -1)):
        dl = ctypes.create_string_buffer(bytes([20, ifaces.AF_LINK]) + (7).to_bytes(2, sys.byteorder)
                                         + bytes([ift, 3, 6, 0]) + b"en0" + bytes(9), 20)
        iface = ifaces.Interface("en0")
        ifaces._link_bsd(iface, ctypes.addressof(dl))
        assert (iface.index, iface.hatype) == (7, hatype)
