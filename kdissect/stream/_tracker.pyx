"""Compiled twin of kdissect/stream/tracker.py's per-segment sequence analysis, `_first_seq` and
`_analyse` (see kdissect/accel.py): the same changes to the conversation's sequence state and
the same trouble counted, for every segment.

The segment's numbers and the sides' sequence state are read into C once the types are checked:
a TcpSegment whose seq, ack, flags and window are ints below 2**32, whose missing is an int
below 2**62 and whose payload is bytes and time a float, and sides that are SeqStates holding
what the tracker stores there (None or a 32-bit number, float times, an int window from -1 and
an int count of duplicate ACKs). Anything else goes, untouched, to the pure function. What
changes is written back as the pure functions write it (the segment's own objects where they
store them); SYN, FIN and RST segments go through the pure `_control`, trouble through the
conversation's Trouble.
"""

cimport cython
from cpython.long cimport PyLong_AsLongLongAndOverflow
from libc.stdint cimport int64_t, uint64_t

from kdissect.capture.l2l4 cimport TcpSegment
from kdissect.stream.flow cimport SeqState

cdef enum:
    FIN = 0x01
    SYN = 0x02
    RST = 0x04
    ACK = 0x10
    SYN_FIN = SYN | FIN
    CONTROL = SYN | FIN | RST

cdef uint64_t MASK = 0xFFFFFFFF
cdef uint64_t HALF = 0x80000000
cdef int64_t MISSING_LIMIT = (<int64_t>1) << 62
cdef double FAST_RETRANSMISSION_S = 0  # tracker's, as _resolve finds it
cdef object OUT_OF_ORDER_S = None  # tracker's

cdef object _pure_first_seq = None
cdef object _pure_analyse = None
cdef object _control = None


cdef int _resolve() except -1:
    """The pure functions and the tracker's thresholds. Looked up on the first call: this module
    is imported while tracker binds it, before tracker's import ends."""
    global _pure_first_seq, _pure_analyse, _control, FAST_RETRANSMISSION_S, OUT_OF_ORDER_S
    from kdissect import accel
    from kdissect.stream import tracker
    _pure_first_seq = accel.pure("kdissect.stream.tracker", "_first_seq")
    _pure_analyse = accel.pure("kdissect.stream.tracker", "_analyse")
    _control = tracker._control
    FAST_RETRANSMISSION_S = tracker.FAST_RETRANSMISSION_S
    OUT_OF_ORDER_S = tracker.OUT_OF_ORDER_S
    return 0


@cython.overflowcheck(False)  # (below 2**33 and above 0 by construction)
cdef inline uint64_t _sub32(uint64_t a, uint64_t b) noexcept nogil:
    """(a - b) modulo 2**32, as Python's (a - b) & 0xFFFFFFFF, without leaving C's range."""
    return ((a & MASK) + (MASK + 1) - (b & MASK)) & MASK


cdef inline bint _int_in(object v, int64_t low, int64_t high, int64_t* out) except -1:
    """Whether v is an int (bool excluded) in low..high; its value in out."""
    cdef int overflow = 0
    cdef long long x
    if type(v) is not int:
        return False
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow or not low <= x <= high:
        return False
    out[0] = x
    return True


cdef inline bint _u32(object v, uint64_t* out) except -1:
    """Whether v is an int in 0..2**32-1 (bool excluded); its value in out."""
    cdef int64_t x
    if not _int_in(v, 0, 0xFFFFFFFF, &x):
        return False
    out[0] = <uint64_t>x
    return True


cdef inline bint _seq_or_none(object v, bint* none, uint64_t* out) except -1:
    """Whether v is None or an int in 0..2**32-1; which, and its value."""
    if v is None:
        none[0] = True
        out[0] = 0
        return True
    none[0] = False
    return _u32(v, out)


cdef struct Side:
    bint no_high, no_ack
    uint64_t high, ack
    double high_ts, ack_ts
    int64_t window, dupacks


cdef inline bint _side(SeqState s, Side* out) except -1:
    """Whether s holds what the tracker stores in a side's state; its values in out."""
    if not _seq_or_none(s.high, &out.no_high, &out.high) or not _seq_or_none(s.ack, &out.no_ack, &out.ack):
        return False
    if type(s.high_ts) is not float or type(s.ack_ts) is not float:
        return False
    if not _int_in(s.window, -1, 0xFFFFFFFF, &out.window) or not _int_in(s.dupacks, 0, MISSING_LIMIT - 1, &out.dupacks):
        return False
    out.high_ts = s.high_ts
    out.ack_ts = s.ack_ts
    return True


cdef struct Seg:
    uint64_t seq, ack, flags, window
    int64_t seglen
    double ts


cdef inline bint _seg(TcpSegment seg, Seg* out) except -1:
    """Whether seg's numbers are those decode gives; its values in out."""
    if not _u32(seg.seq, &out.seq) or not _u32(seg.ack, &out.ack) or not _u32(seg.flags, &out.flags):
        return False
    if not _u32(seg.window, &out.window):
        return False
    cdef int64_t missing
    if not _int_in(seg.missing, 0, MISSING_LIMIT - 1, &missing):
        return False
    if type(seg.payload) is not bytes or len(<bytes>seg.payload) >= MISSING_LIMIT or type(seg.ts) is not float:
        return False
    out.seglen = len(<bytes>seg.payload) + missing
    out.ts = seg.ts
    return True


def _first_seq(conv, side, seg):
    """tracker._first_seq(conv, side, seg)."""
    cdef Seg s
    cdef Py_ssize_t me, peer
    if _pure_analyse is None:
        _resolve()
    first = conv.first_seq
    if (type(seg) is not TcpSegment or type(side) is not int or not 0 <= side <= 1
            or type(first) is not list or len(first) != 2 or not _seg(seg, &s)):
        return _pure_first_seq(conv, side, seg)
    me = side
    peer = 1 - me
    if first[me] is None:
        first[me] = seg.seq if s.flags & SYN else _sub32(s.seq, 1)
    elif s.flags & (SYN | ACK) == SYN | ACK:
        first[me] = seg.seq
    if first[peer] is None and s.flags & ACK:
        first[peer] = _sub32(s.ack, 1)


def _analyse(conv, side, seg):
    """tracker._analyse(conv, side, seg)."""
    cdef Seg s
    cdef Side fwd, rev
    cdef Py_ssize_t me
    if _pure_analyse is None:
        _resolve()
    seqs = conv.seqs
    if (type(seg) is not TcpSegment or type(side) is not int or not 0 <= side <= 1
            or type(seqs) is not tuple or len(seqs) != 2
            or type(seqs[0]) is not SeqState or type(seqs[1]) is not SeqState):
        return _pure_analyse(conv, side, seg)
    me = side
    cdef SeqState f = <SeqState>seqs[me]
    cdef SeqState r = <SeqState>seqs[1 - me]
    if not _seg(<TcpSegment>seg, &s) or not _side(f, &fwd) or not _side(r, &rev):
        return _pure_analyse(conv, side, seg)
    if s.flags & CONTROL:
        _control(conv, side, seg)  # (it changes neither side's SeqState)
    elif not s.window:
        conv.troubles().zero_windows.add(side, seg.frame, seg.ts)
    syn_ts = conv.syn_ts
    if syn_ts is not None and s.flags & (SYN | ACK) == ACK:
        rtt = seg.ts - syn_ts
        if rtt:
            conv.first_rtt, conv.syn_ts = rtt, None
    if s.seglen or s.flags & SYN_FIN:
        _sequence(conv, side, <TcpSegment>seg, &s, f, &fwd, &rev)
    elif fwd.no_high or 0 < _sub32(s.seq, fwd.high) < HALF:  # the first, or past the highest
        f.high, f.high_ts = seg.seq, seg.ts
    elif (not fwd.no_ack and s.ack == fwd.ack and not fwd.no_high and s.seq == fwd.high and s.window
          and <int64_t>s.window == fwd.window and not s.flags & CONTROL):
        f.dupacks = f.dupacks + 1
    if s.flags & ACK:
        if fwd.no_ack or s.ack != fwd.ack:
            f.ack, f.dupacks = seg.ack, 0
        f.ack_ts = seg.ts
    f.window = seg.window


cdef int _sequence(object conv, object side, TcpSegment seg, Seg* s, SeqState f, Side* fwd,
                   Side* rev) except -1:
    """tracker._sequence: retransmission counted, the side's highest sequence number advanced."""
    cdef uint64_t end = (s.seq + <uint64_t>s.seglen + (1 if s.flags & SYN_FIN else 0)) & MASK
    cdef bint acked = not rev.no_ack and 0 < _sub32(rev.ack, s.seq) < HALF
    if (fwd.no_high or s.seq != fwd.high or acked) and _retransmitted(conv, seg, s, fwd, rev, end):
        conv.troubles().retransmissions.add(side, seg.frame, seg.ts)
    if fwd.no_high or (0 < _sub32(end, fwd.high) < HALF
                       and not (s.seglen == 1 and s.seq == fwd.high and rev.window == 0)):
        f.high, f.high_ts = end, seg.ts  # advanced, unless by a zero-window probe
    return 0


cdef bint _retransmitted(object conv, TcpSegment seg, Seg* s, Side* fwd, Side* rev, uint64_t end) except -1:
    """tracker._retransmitted."""
    cdef int64_t before = -1 if fwd.no_high else <int64_t>_sub32(fwd.high, 1)
    cdef double since
    if s.seglen <= 1 and <int64_t>s.seq == before and not s.flags & CONTROL:
        return False  # a keep-alive
    if s.seglen and not rev.no_ack and _sub32(rev.ack, (s.seq + <uint64_t>s.seglen) & MASK) < HALF:
        return True  # its bytes were acknowledged already
    if fwd.no_high or not _sub32(s.seq, fwd.high) & HALF or (s.seglen > 1 and <int64_t>s.seq == before):
        return False  # it advances the stream
    if (rev.dupacks >= 2 and not rev.no_ack and rev.ack == s.seq
            and 0 <= s.ts - rev.ack_ts < FAST_RETRANSMISSION_S):
        return True  # a fast retransmission
    since = s.ts - fwd.high_ts
    return not (0 <= since < (conv.first_rtt or OUT_OF_ORDER_S) and end != fwd.high)  # else out of order
