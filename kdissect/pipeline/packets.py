"""The packets of selected messages, written to a pcapng file (`read -w`, `export -w`,
`follow -w` with -Y), or every packet of one stream (`follow -w`).

Two passes over the capture. The first is the ordinary decoding run: each message that is
selected marks the numbers of all the frames that carried it in a `FrameSet`, a bitmap of one
bit per frame of the capture (1 GB of capture, about a million frames, costs 128 KiB). The
second pass reads the capture again and copies the marked frames, in capture order, into the
pcapng file. No packet bytes are held between the passes, so memory stays flat however far
apart a message's frames are (a request and its late response, a message spread over minutes
of a slow connection). Standard input and pipes cannot be read twice: writing packets needs a
capture file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence

from kdissect.capture.l2l4 import decode
from kdissect.capture.pcapfile import STDIN, RawFrame, open_capture
from kdissect.capture.pcapwriter import PcapngWriter
from kdissect.errors import KdissectError, UsageError
from kdissect.model import Message
from kdissect.stream.flow import Conversation
from kdissect.stream.reassembly import Event
from kdissect.stream.tracker import Tracker


class FrameSet:
    """A set of frame numbers (1-based) as a bitmap that grows with the largest number."""

    def __init__(self) -> None:
        self._bits = bytearray()
        self.count = 0
        self.last = 0  # the largest number in the set (0: empty)

    def add(self, number: int) -> None:
        if number <= 0:
            return
        byte, bit = divmod(number, 8)
        if byte >= len(self._bits):
            self._bits.extend(bytes(max(byte + 1 - len(self._bits), len(self._bits))))
        if not self._bits[byte] >> bit & 1:
            self._bits[byte] |= 1 << bit
            self.count += 1
            self.last = max(self.last, number)

    def __contains__(self, number: int) -> bool:
        byte, bit = divmod(number, 8)
        return 0 <= byte < len(self._bits) and bool(self._bits[byte] >> bit & 1)

    def __len__(self) -> int:
        return self.count


class PacketSelection:
    """Which frames to write: those of the messages that pass the display filter, and with
    `with_peer` those of each such message's request or response too.

    `select` passes the messages through, keeping those that match; a matched response
    marks its request (already seen: the response links to it), a matched request the
    response it was linked to, which the ordered output delivers after it."""

    def __init__(self, with_peer: bool = False) -> None:
        self.frames = FrameSet()
        self.with_peer = with_peer
        self._awaited: set[tuple[int, int]] = set()  # (stream, first frame) of peers still to come
        self._source: Iterator[Message] | None = None

    def select(self, messages: Iterable[Message],
               keep: Callable[[Message], bool] | None) -> Iterator[Message]:
        """The messages that pass `keep` (all when None), their frames marked."""
        self._source = iter(messages)
        for m in self._source:
            if keep is None or keep(m):
                self._take(m)
                yield m
            else:
                self._peer(m)

    def complete(self) -> None:
        """When the reader of `select` stopped early (-c): read on until the responses of the
        requests already taken have come."""
        if self._source is None:
            return
        while self._awaited:
            m = next(self._source, None)
            if m is None:
                return
            self._peer(m)

    def _mark(self, m: Message) -> None:
        for n in m.frames:
            self.frames.add(n)

    def _take(self, m: Message) -> None:
        self._mark(m)
        self._awaited.discard((m.stream, m.frame))
        if not self.with_peer:
            return
        if m.peer is not None:
            self._mark(m.peer)
        elif m.to_server and m.match is not None:
            self._awaited.add((m.stream, m.match.frame))

    def _peer(self, m: Message) -> None:
        key = (m.stream, m.frame)
        if key in self._awaited:
            self._awaited.discard(key)
            self._mark(m)


def check_writable(paths: Sequence[str], out: str) -> None:
    """Refuse, before decoding anything, what a second pass cannot do: standard input or a pipe
    as the capture, or an output file that is one of the captures."""
    for p in paths:
        if p == STDIN:
            raise UsageError("-w reads the capture twice: it needs a capture file, not standard input")
        try:
            st = os.stat(p)
        except OSError:
            continue  # the first pass says, in one line, why it cannot be opened
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"-w reads the capture twice: {p} is not a regular file")
        if os.path.exists(out) and os.path.samefile(p, out):
            raise UsageError(f"-w {out}: that is the capture being read")
    try:
        with open(out, "ab"):
            pass
    except OSError as e:
        raise UsageError(f"cannot write {out}: {e.strerror or e}") from None


class _Numbering:
    """The layer above TCP for a pass that only numbers the streams: nothing is reassembled."""

    def opened(self, conv: Conversation[None]) -> None:
        conv.make_passive()

    def events(self, conv: Conversation[None], side: int, events: list[Event]) -> None:
        """Never called: every conversation is passive."""

    def closed(self, conv: Conversation[None]) -> None:
        """Nothing is attached to a conversation here."""


class StreamFrames:
    """The frames of one TCP stream (numbered as the decoding pass numbers them, as Wireshark's
    tcp.stream): its handshake, acknowledgements and end too. Asked of every frame in capture
    order while the packets are copied, it tracks conversations without reassembling them."""

    def __init__(self, stream: int) -> None:
        self.stream = stream
        self._tracker: Tracker[None] = Tracker(_Numbering())

    def __call__(self, f: RawFrame) -> bool:
        seg = decode(f)
        return seg is not None and self._tracker.segment(seg).index == self.stream


def _numbered(frames: FrameSet) -> Callable[[RawFrame], bool]:
    return lambda f: f.number in frames


def write_packets(paths: str | Sequence[str], frames: FrameSet | StreamFrames, out: str) -> int:
    """Copy the frames of the capture (several files: merged as in the first pass) that are in
    `frames`, or of a stream, into a pcapng file at `out`; the number of packets written."""
    with PcapngWriter(out) as writer, open_capture(paths) as cap:
        if isinstance(frames, FrameSet):
            if not frames:
                return 0
            keep, last = _numbered(frames), frames.last
        else:
            keep, last = frames, 1 << 62
        try:
            for f in cap:
                if keep(f):
                    writer.write(f.data, f.wirelen, f.ts, f.linktype)
                if f.number >= last:
                    break
        except OSError as e:
            raise KdissectError(f"cannot write {out}: {e.strerror or e}") from None
        return writer.packets
