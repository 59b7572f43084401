"""Compiled twin of kdissect/capture/l2l4.py's `decode` (see kdissect/accel.py): the same
TcpSegment, field for field, or None, for every frame.

Headers are read through a pointer into the frame's bytes; every read is preceded by a
comparison of its offset with the frame's length, as in the pure functions (whose `len(d) <
...` tests are the same ones). Frames this code does not take go to the pure `decode`, whose
answer (or exception) is then the answer: data other than bytes, a link type or wire length
that is not an int (bool included), a link type other than the ten of LINK_LAYERS (an entry
added to it at run time works), a link type beyond 64 bits or a wire length beyond 62.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from libc.stdint cimport int64_t, uint32_t

from kdissect.capture.l2l4 cimport TcpSegment

cdef enum:
    ETH_IPV4 = 0x0800
    ETH_IPV6 = 0x86DD
    NO_LINK = -1  # _link: too short for the link header, or a loopback family that is not IP
    OTHER_LINK = -2  # _link: a link type handled by the pure module only

cdef int64_t LIMIT = (<int64_t>1) << 62  # wire lengths beyond this take the pure path

cdef object _pure_decode = None  # l2l4's own decode


cdef int _resolve() except -1:
    """The pure module's decode. Looked up on the first call: this module is imported while
    l2l4 binds it, before l2l4's import ends."""
    global _pure_decode
    from kdissect import accel
    _pure_decode = accel.pure("kdissect.capture.l2l4", "decode")
    return 0


cdef inline unsigned int _be16(const unsigned char* p) noexcept nogil:
    return (<unsigned int>p[0] << 8) | p[1]


cdef inline uint32_t _be32(const unsigned char* p) noexcept nogil:
    return ((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8)
            | <uint32_t>p[3])


cdef inline uint32_t _le32(const unsigned char* p) noexcept nogil:
    return ((<uint32_t>p[3] << 24) | (<uint32_t>p[2] << 16) | (<uint32_t>p[1] << 8)
            | <uint32_t>p[0])


cdef inline bint _vlan(unsigned int etype) noexcept nogil:
    return etype == 0x8100 or etype == 0x88A8 or etype == 0x9100 or etype == 0x9200


cdef inline bint _ipv6_ext(unsigned int nxt) noexcept nogil:
    # hop-by-hop, routing, destination options, AH, mobility, HIP, shim6
    return (nxt == 0 or nxt == 43 or nxt == 60 or nxt == 51 or nxt == 135 or nxt == 139
            or nxt == 140)


cdef inline int _loopback(const unsigned char* p, Py_ssize_t n, bint big,
                          Py_ssize_t* off) noexcept nogil:
    """The ethertype of a BSD NULL (big false: host order written by a little-endian host
    first) or OpenBSD LOOP (big true) header, NO_LINK for none."""
    cdef uint32_t af
    if n < 4:
        return NO_LINK
    af = _be32(p) if big else _le32(p)
    if af > 0xFFFF:
        af = _le32(p) if big else _be32(p)
    off[0] = 4
    if af == 2:
        return ETH_IPV4
    if af == 10 or af == 24 or af == 28 or af == 30:
        return ETH_IPV6
    return NO_LINK


cdef inline int _link(long long linktype, const unsigned char* p, Py_ssize_t n,
                      Py_ssize_t* off) noexcept nogil:
    """The ethertype after the link-layer header (its length in off), NO_LINK when the frame
    has none, OTHER_LINK for a link type not handled here."""
    cdef unsigned int etype
    cdef Py_ssize_t o
    if linktype == 1:  # Ethernet, with any number of 802.1Q/802.1ad tags
        if n < 14:
            return NO_LINK
        etype = _be16(p + 12)
        o = 14
        while _vlan(etype) and n >= o + 4:
            etype = _be16(p + o + 2)
            o += 4
        off[0] = o
        return <int>etype
    if linktype == 113:  # Linux cooked SLL
        if n < 16:
            return NO_LINK
        off[0] = 16
        return <int>_be16(p + 14)
    if linktype == 276:  # Linux cooked SLL2
        if n < 20:
            return NO_LINK
        off[0] = 20
        return <int>_be16(p)
    if linktype == 0:
        return _loopback(p, n, False, off)
    if linktype == 108:
        return _loopback(p, n, True, off)
    if (linktype == 101 or linktype == 12 or linktype == 14 or linktype == 228
            or linktype == 229):  # raw IP
        if n < 1:
            return NO_LINK
        off[0] = 0
        return ETH_IPV4 if p[0] >> 4 == 4 else ETH_IPV6
    return OTHER_LINK


def decode(frame):
    """The TCP segment in a frame, or None when there is none."""
    cdef const unsigned char* p
    cdef Py_ssize_t n, off = 0
    cdef long long linktype, wirelen
    cdef int64_t missing_wire
    cdef int etype, overflow = 0
    if _pure_decode is None:
        _resolve()
    d = frame.data
    lt = frame.linktype
    if type(d) is not bytes or type(lt) is not int:
        return _pure_decode(frame)
    linktype = PyLong_AsLongLongAndOverflow(lt, &overflow)
    if overflow:
        return _pure_decode(frame)
    p = <const unsigned char*>PyBytes_AS_STRING(d)
    n = PyBytes_GET_SIZE(d)
    etype = _link(linktype, p, n, &off)
    if etype == NO_LINK:
        return None
    if etype == OTHER_LINK:
        return _pure_decode(frame)
    wl = frame.wirelen
    if type(wl) is not int:
        return _pure_decode(frame)
    wirelen = PyLong_AsLongLongAndOverflow(wl, &overflow)
    if overflow or not -LIMIT < wirelen < LIMIT:
        return _pure_decode(frame)
    missing_wire = wirelen - n
    if etype == ETH_IPV4:
        return _ipv4(frame, <bytes>d, p, n, off, missing_wire)
    if etype == ETH_IPV6:
        return _ipv6(frame, <bytes>d, p, n, off, missing_wire)
    return None


cdef object _ipv4(object frame, bytes d, const unsigned char* p, Py_ssize_t n, Py_ssize_t off,
                  int64_t missing_wire):
    cdef Py_ssize_t ihl
    cdef int64_t total
    if n < off + 20 or p[off] >> 4 != 4 or p[off + 9] != 6:
        return None
    ihl = (p[off] & 0x0F) * 4
    if ihl < 20:  # a header length below the minimum: not a packet we can trust
        return None
    total = _be16(p + off + 2)
    if _be16(p + off + 6) & 0x1FFF:  # a non-first fragment carries no TCP header
        return None
    if total == 0:  # TCP segmentation offload: the length is left 0
        total = n - off + missing_wire
    return _tcp(frame, d, p, n, off + ihl, off + total, off + 12, 4)


cdef object _ipv6(object frame, bytes d, const unsigned char* p, Py_ssize_t n, Py_ssize_t off,
                  int64_t missing_wire):
    cdef unsigned int plen, nxt
    cdef int64_t end
    cdef Py_ssize_t pos, hlen
    if n < off + 40 or p[off] >> 4 != 6:
        return None
    plen = _be16(p + off + 4)
    nxt = p[off + 6]
    end = off + 40 + plen if plen else n + missing_wire
    pos = off + 40
    while _ipv6_ext(nxt) or nxt == 44:
        if n < pos + 8:
            return None
        if nxt == 44:  # fragment header: only the first fragment has the TCP header
            if _be16(p + pos + 2) & 0xFFF8:
                return None
            hlen = 8
        elif nxt == 51:
            hlen = (p[pos + 1] + 2) * 4
        else:
            hlen = (p[pos + 1] + 1) * 8
        nxt = p[pos]
        pos += hlen
    if nxt != 6:
        return None
    return _tcp(frame, d, p, n, pos, end, off + 8, 16)


cdef object _tcp(object frame, bytes d, const unsigned char* p, Py_ssize_t n, Py_ssize_t off,
                 int64_t end, Py_ssize_t addr, Py_ssize_t alen):
    """The segment whose TCP header is at off and whose IP packet ends at end (which may be
    beyond the frame's bytes); the addresses are the alen bytes at addr and addr + alen."""
    cdef Py_ssize_t start
    cdef int64_t avail, missing
    if n < off + 20:
        return None
    start = off + (p[off + 12] >> 4) * 4
    if start < off + 20 or start > end:  # a data offset below the header's minimum, or past the end
        return None
    avail = end if end < n else n
    if avail > start:
        payload = PyBytes_FromStringAndSize(<const char*>p + start, <Py_ssize_t>(avail - start))
    else:
        payload = b""
    missing = end - (avail if avail > start else start)
    if missing < 0:
        missing = 0
    # addr + 2 * alen <= off <= n: the IP header's checks put both addresses inside the frame.
    # The fields are those TcpSegment.__init__ sets, in C (l2l4.pxd).
    cdef TcpSegment seg = TcpSegment.__new__(TcpSegment)
    seg.frame = frame.number
    seg.ts = frame.ts
    seg.src = PyBytes_FromStringAndSize(<const char*>p + addr, alen)
    seg.sport = _be16(p + off)
    seg.dst = PyBytes_FromStringAndSize(<const char*>p + addr + alen, alen)
    seg.dport = _be16(p + off + 2)
    seg.seq = _be32(p + off + 4)
    seg.ack = _be32(p + off + 8)
    seg.flags = p[off + 13]
    seg.window = _be16(p + off + 14)
    seg.payload = payload
    seg.missing = missing
    return seg
