"""Classic BPF programs for live capture: compile a capture filter with libpcap (through ctypes,
so no compiler of our own), prepend the in-kernel checks live capture needs, and pack the result
for SO_ATTACH_FILTER.

An instruction is a tuple (code, jt, jf, k) exactly as in `struct sock_filter`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import struct
from functools import cache
from typing import Any

from kdissect.errors import UsageError

Insn = tuple[int, int, int, int]

SNAPLEN = 262_144
DLT_EN10MB = 1
DLT_RAW = 12  # libpcap's DLT for raw IP on Linux (written to files as LINKTYPE_RAW, 101)
PCAP_NETMASK_UNKNOWN = 0xFFFFFFFF

# Opcodes and kernel ancillary offsets (linux/filter.h).
LDH_ABS = 0x28  # BPF_LD | BPF_H | BPF_ABS
LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
RET_K = 0x06  # BPF_RET | BPF_K
SKF_AD_OFF = -0x1000
SKF_AD_PROTOCOL = 0
SKF_AD_PKTTYPE = 4
SKF_AD_IFINDEX = 8
PACKET_OUTGOING = 4
ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
BPF_MAXINSNS = 4096


def _anc(offset: int) -> int:
    return (SKF_AD_OFF + offset) & 0xFFFFFFFF


ACCEPT_ALL: list[Insn] = [(RET_K, 0, 0, SNAPLEN)]


class _Insn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("bf_len", ctypes.c_uint), ("bf_insns", ctypes.POINTER(_Insn))]


@cache
def _libpcap() -> Any:
    name = ctypes.util.find_library("pcap")
    candidates = [name] if name else []
    candidates += ["libpcap.so.1", "libpcap.so.0.8", "libpcap.so"]
    for cand in candidates:
        try:
            lib = ctypes.CDLL(cand)
        except OSError:
            continue
        lib.pcap_open_dead.restype = ctypes.c_void_p
        lib.pcap_open_dead.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.pcap_compile.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Program), ctypes.c_char_p,
                                     ctypes.c_int, ctypes.c_uint32]
        lib.pcap_geterr.restype = ctypes.c_char_p
        lib.pcap_geterr.argtypes = [ctypes.c_void_p]
        lib.pcap_freecode.argtypes = [ctypes.POINTER(_Program)]
        lib.pcap_close.argtypes = [ctypes.c_void_p]
        return lib
    return None


def libpcap() -> Any:
    """The system libpcap through ctypes (loaded once), or None where it is not installed."""
    return _libpcap()


def compile_filter(expr: str, dlt: int, snaplen: int = SNAPLEN) -> list[Insn]:
    """Compile a tcpdump-syntax capture filter for a link type; UsageError when it is invalid."""
    if not expr.strip():
        return [(RET_K, 0, 0, snaplen)]
    lib = _libpcap()
    if lib is None:
        raise UsageError("a capture filter (-f) needs libpcap (the libpcap0.8 package); "
                         "capture without -f or install it")
    handle = lib.pcap_open_dead(dlt, snaplen)
    if not handle:
        raise UsageError("libpcap could not open a handle to compile the filter")
    prog = _Program()
    try:
        if lib.pcap_compile(handle, ctypes.byref(prog), expr.encode(), 1, PCAP_NETMASK_UNKNOWN) != 0:
            err = (lib.pcap_geterr(handle) or b"invalid").decode(errors="replace")
            raise UsageError(f"bad capture filter {expr!r}: {err}")
        insns = [(i.code, i.jt, i.jf, i.k) for i in prog.bf_insns[: prog.bf_len]]
        lib.pcap_freecode(ctypes.byref(prog))
    finally:
        lib.pcap_close(handle)
    return insns


def live_prefix(loopback: bool, cooked: bool, lo_index: int = 0) -> list[Insn]:
    """Checks run in the kernel before the user's filter.

    - loopback: a packet sent on `lo` is seen twice (going out and coming in); keep one copy.
    - cooked (SOCK_DGRAM, e.g. `any`): keep IPv4 and IPv6 only, the filter was compiled for raw
      IP; on `any`, drop the outgoing copy on the loopback device (`lo_index`).
    Every block ends by falling through to the program that follows it (jumps are relative, so
    prepending never moves the user's program's own jump targets)."""
    out: list[Insn] = []
    if loopback:
        out += [(LDH_ABS, 0, 0, _anc(SKF_AD_PKTTYPE)), (JEQ_K, 0, 1, PACKET_OUTGOING), (RET_K, 0, 0, 0)]
    if cooked:
        out += [(LDH_ABS, 0, 0, _anc(SKF_AD_PROTOCOL)), (JEQ_K, 2, 0, ETH_P_IP), (JEQ_K, 1, 0, ETH_P_IPV6),
                (RET_K, 0, 0, 0)]
        if lo_index:
            out += [(LDH_ABS, 0, 0, _anc(SKF_AD_PKTTYPE)), (JEQ_K, 0, 3, PACKET_OUTGOING),
                    (LD_W_ABS, 0, 0, _anc(SKF_AD_IFINDEX)), (JEQ_K, 0, 1, lo_index), (RET_K, 0, 0, 0)]
    return out


def program(expr: str, dlt: int, loopback: bool, cooked: bool, lo_index: int = 0) -> list[Insn]:
    insns = live_prefix(loopback, cooked, lo_index) + compile_filter(expr, dlt)
    if len(insns) > BPF_MAXINSNS:
        raise UsageError(f"capture filter {expr!r} is too long ({len(insns)} BPF instructions)")
    return insns


def run(insns: list[Insn], packet: bytes, anc: dict[int, int] | None = None) -> int:
    """Interpret a program on a packet like the kernel does (for tests): the snap length it
    returns, 0 to drop. `anc` maps ancillary offsets (SKF_AD_*) to their values."""
    a = x = pc = 0
    try:
        while pc < len(insns):
            code, jt, jf, k = insns[pc]
            cls = code & 0x07
            if cls == 0x06:  # ret
                return k if code & 0x18 == 0 else a
            if cls in (0x00, 0x01):  # ld / ldx
                a, x = _load(code, k, a, x, packet, anc or {})
            elif cls == 0x05:  # jmp
                pc += _jump(code, jt, jf, k, a, x)
            elif cls == 0x04:  # alu: only what libpcap emits for port/host tests
                a = _alu(code, a, x if code & 0x08 else k)
            elif cls == 0x07:  # misc: tax / txa
                a, x = (a, a) if code & 0xF8 == 0 else (x, x)
            pc += 1
    except IndexError:  # an out-of-bounds load ends the program with "drop"
        return 0
    return 0


def _load(code: int, k: int, a: int, x: int, p: bytes, anc: dict[int, int]) -> tuple[int, int]:
    size = {0x00: 4, 0x08: 2, 0x10: 1}[code & 0x18]
    mode = code & 0xE0
    if code & 0x07 == 0x01:  # ldx
        if mode == 0xA0:  # msh: 4*([k]&0xf)
            return a, (p[k] & 0x0F) * 4
        return a, k if mode == 0x00 else x
    if mode == 0x00:  # imm
        return k, x
    if mode == 0x20 and k >= _anc(0):
        return anc[k - _anc(0)], x
    off = k + (x if mode == 0x40 else 0)
    if off + size > len(p):
        raise IndexError(off)
    return int.from_bytes(p[off : off + size], "big"), x


def _jump(code: int, jt: int, jf: int, k: int, a: int, x: int) -> int:
    op = code & 0xF0
    if op == 0x00:  # ja
        return k
    val = x if code & 0x08 else k
    cond = {0x10: a == val, 0x20: a > val, 0x30: a >= val, 0x40: bool(a & val)}.get(op, False)
    return jt if cond else jf


_ALU = {0x00: lambda a, v: a + v, 0x10: lambda a, v: a - v, 0x50: lambda a, v: a & v,
        0x40: lambda a, v: a | v, 0x60: lambda a, v: a << v, 0x70: lambda a, v: a >> v,
        0x20: lambda a, v: a * v}


def _alu(code: int, a: int, v: int) -> int:
    return int(_ALU[code & 0xF0](a, v)) & 0xFFFFFFFF


def pack(insns: list[Insn]) -> tuple[bytes, Any]:
    """(struct sock_fprog bytes, the instruction buffer that must stay alive while attaching)."""
    buf = (_Insn * len(insns))(*(_Insn(c, t, f, k) for c, t, f, k in insns))
    fprog = struct.pack("HL", len(insns), ctypes.addressof(buf))
    return fprog, buf
