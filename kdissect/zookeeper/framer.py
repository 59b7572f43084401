"""The ZooKeeper framer: length-prefixed jute packets, or a plain-text four-letter-word exchange.

A client that opens a connection with one of the admin words (ruok, stat, mntr...) sends it with
no length prefix, and the server answers plain text and closes the connection. So at the start
of a stream the framer looks at the first four bytes: in the client direction, a known word
switches the direction to text mode (each chunk is passed on as it arrives); in the server
direction, text mode follows the client's choice through a TextLink shared by both directions of
one conversation, and the whole reply becomes one PDU at the end of the stream. Without a link
(or before the client's bytes were seen) the server direction recognises a text reply by its
first bytes, but only at a stream start captured from its beginning. Otherwise every byte goes to
a LengthPrefixedFramer.
"""

from __future__ import annotations

from kdissect.diagnostics import TRANSPORT
from kdissect.framing.length_prefixed import (
    BoundaryProbe,
    ChunkIndex,
    LengthPrefixedFramer,
    Run,
    extend_run,
    gap_diag,
    overlap_diag,
)
from kdissect.model import Diagnostic, Pdu
from kdissect.stream.reassembly import Buffered
from kdissect.text import plural
from kdissect.zookeeper import fourlw

UNDECIDED, BINARY, TEXT = "undecided", "binary", "text"


class TextLink:
    """Shared by the two directions of one conversation: the admin word the client sent."""

    __slots__ = ("word",)

    def __init__(self) -> None:
        self.word: str | None = None


class ZkFramer:
    """The Framer protocol over a LengthPrefixedFramer, with a text mode for admin words."""

    def __init__(self, max_frame: int, to_server: bool, link: TextLink | None = None) -> None:
        self.to_server = to_server
        self.max_frame = max_frame
        self.inner = LengthPrefixedFramer(max_frame, to_server, min_frame=8 if to_server else 16, empty=False)
        self.link = link if link is not None else TextLink()
        self.mode = UNDECIDED
        self.held: list[tuple[bytes, int, float]] = []  # chunks seen before the mode is known
        self.buf = bytearray()  # text mode
        self.base = 0
        self.index = ChunkIndex()
        self.diags: list[Diagnostic] = []
        self.run: Run | None = None  # a gap or overlap last in diags (see LengthPrefixedFramer.run)
        self.synced = True  # whether the stream start was captured (the pipeline says)
        # where the text kept counts (the capture's pool once set_pool gives it), and len(buf) as
        # last added there
        self.pool = Buffered()
        self.counted = 0

    # -- the Framer interface ---------------------------------------------------------

    def set_probe(self, probe: BoundaryProbe | None, synced: bool) -> None:
        self.inner.set_probe(probe, synced)
        self.synced = synced

    def set_pool(self, pool: Buffered) -> None:
        self.inner.set_pool(pool)
        self.pool.used -= self.counted
        self.pool, self.counted = pool, 0
        self._count()

    def note(self, diag: Diagnostic) -> None:
        if self.mode == BINARY:
            self.inner.note(diag)
        else:
            self.diags.append(diag)

    def overlap(self, length: int, frame: int) -> None:
        if self.mode == BINARY:
            self.inner.overlap(length, frame)
            return
        length, first, _, count = extend_run(self.diags, self.run, "tcp.overlap", -1, length, frame, frame)
        self._add(overlap_diag(length, first or 0, frame, count), -1, length, first, frame, count)

    def _add(self, diag: Diagnostic, end: int, n: int, first: int | None, last: int | None, count: int) -> None:
        self.diags.append(diag)
        self.run = (diag, end, n, first, last, count)

    def feed(self, data: bytes, frame: int, ts: float) -> list[Pdu]:
        if self.mode == BINARY:
            return self.inner.feed(data, frame, ts)
        if self.mode == TEXT:
            return self._text(data, frame, ts)
        self.held.append((data, frame, ts))
        head = b"".join(c for c, _, _ in self.held)
        if len(head) < 4 and not (self.link.word and not self.to_server):
            return []
        self.mode = self._choose(head)
        return self._replay()

    def gap(self, lost: int, frame_before: int, frame_after: int) -> list[Pdu]:
        if self.mode == TEXT:  # gaps one after another (no text between them) are one
            at = self.base + len(self.buf)
            lost, first, _, count = extend_run(self.diags, self.run, "tcp.gap", at, lost, frame_before, frame_after)
            self._add(gap_diag(lost, first or 0, frame_after), at, lost, first, frame_after, count)
            return []
        out = self._replay_binary() if self.mode == UNDECIDED else []
        return out + self.inner.gap(lost, frame_before, frame_after)

    def flush(self) -> list[Pdu]:
        if self.mode == UNDECIDED:
            head = b"".join(c for c, _, _ in self.held)
            self.mode = TEXT if (not self.to_server and self.link.word) or self._text_start(head) else BINARY
            out = self._replay()
        else:
            out = []
        if self.mode == BINARY:
            return out + self.inner.flush()
        return out + self._emit()

    # -- internals --------------------------------------------------------------------

    def _choose(self, head: bytes) -> str:
        if self.to_server:
            if fourlw.is_word(head):
                self.link.word = fourlw.word_of(head)
                return TEXT
            return BINARY
        return TEXT if self.link.word or self._text_start(head) else BINARY

    def _text_start(self, head: bytes) -> bool:
        """A server reply in plain text: its first four bytes read as a length are too large."""
        if self.to_server or not self.synced or len(head) < 4:
            return False
        return int.from_bytes(head[:4], "big") > self.max_frame and fourlw.looks_like_text(head)

    def _replay(self) -> list[Pdu]:
        if self.mode == BINARY:
            return self._replay_binary()
        held, self.held = self.held, []
        for data, frame, ts in held:
            self.buf += data
            self.index.add(self.base + len(self.buf), frame, ts)
        self._count()
        return self._emit() if self._full() else []

    def _replay_binary(self) -> list[Pdu]:
        self.mode = BINARY
        for d in self.diags:
            self.inner.note(d)
        self.diags = []
        out: list[Pdu] = []
        held, self.held = self.held, []
        for data, frame, ts in held:
            out += self.inner.feed(data, frame, ts)
        return out

    def _text(self, data: bytes, frame: int, ts: float) -> list[Pdu]:
        self.buf += data
        self.index.add(self.base + len(self.buf), frame, ts)
        self._count()
        return self._emit() if self._full() else []

    def _full(self) -> bool:
        """Whether the text kept goes out now: a client's at once, a reply at max_frame, or once
        the capture keeps more than its pool allows (the reply is then cut, and says so)."""
        if self.to_server or len(self.buf) >= self.max_frame:
            return True
        pool = self.pool
        if pool.used <= pool.limit or not self.buf:
            return False
        self.diags.append(TRANSPORT(
            "framing.unbuffered", f"reply cut after {plural(len(self.buf), 'byte')}: the capture's unfinished "
            f"messages and out-of-order segments already take {pool.limit >> 20} MiB"))
        return True

    def _count(self) -> None:
        """Bring the pool up to date with the text kept now."""
        now = len(self.buf)
        self.pool.used += now - self.counted
        self.counted = now

    def _emit(self) -> list[Pdu]:
        if not self.buf:
            return []
        n = len(self.buf)
        frames, ts0, ts1 = self.index.span(self.base, self.base + n)
        pdu = Pdu(bytes(self.buf), frames, ts0, ts1, self.to_server, self.diags)
        self.diags = []
        self.base += n
        self.buf.clear()
        self._count()
        self.index.drop_before(self.base)
        return [pdu]
