"""Units of work: whole TCP conversations, never split. Pure Python.

Small captures are packed together up to a target size (at most 128 MB, as Spark's own file
splits, and at most a third of each core's share: decoding is work for the processor, and
three tasks a core let the cores finish together, with as many more as make the last round
one task a core); a capture larger than the target is shared by several tasks, each of which
reads the whole file and decodes only the conversations whose flow hash falls into its share
(Pipeline's flow_filter). The hash is CRC-32 of the canonical endpoints, the same in every
process (Python's hash() is salted per process).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass

MAX_SPLIT = 128 * 1024 * 1024
# A task decodes 16 MB in a few seconds: smaller ones cost Spark's per-task overhead more than
# they balance (a 19 MB capture on two cores in five ranges of 4 MB took 14.1-15.7 s, in two of
# 9.5 MB 13.5-13.6 s).
MIN_SPLIT = 16 * 1024 * 1024
# Tasks planned for each core. With one task a core, the cores finish only as evenly as the
# tasks' sizes are (three tasks of a third each on two cores take two thirds of one core's time,
# 1.5x); with three, the last task is a ninth of the work.
TASKS_PER_CORE = 3

Endpoint = tuple[bytes, int]


@dataclass(frozen=True, slots=True)
class Piece:
    """One capture file, or one share of it (share of shares)."""

    path: str
    size: int
    share: int = 0
    shares: int = 1


Unit = tuple[Piece, ...]


def conversation_key(a: Endpoint, b: Endpoint) -> bytes:
    """The bytes that name a conversation: its endpoints (canonical order: a <= b)."""
    return b"".join((a[0], a[1].to_bytes(2, "big"), b[0], b[1].to_bytes(2, "big")))


def flow_hash(a: Endpoint, b: Endpoint) -> int:
    return zlib.crc32(conversation_key(a, b))


def share_filter(share: int, shares: int) -> Callable[[Endpoint, Endpoint], bool] | None:
    """The flow_filter that keeps one share of a capture's conversations (None: keep all)."""
    if shares <= 1:
        return None

    def keep(a: Endpoint, b: Endpoint) -> bool:
        return flow_hash(a, b) % shares == share
    return keep


def split_size(total: int, parallelism: int, target: int | None = None) -> int:
    """Bytes per unit: `target` if given, else min(128 MB, max(16 MB, total / (3 × parallelism)))."""
    if target is not None:
        return max(1, target)
    return min(MAX_SPLIT, max(MIN_SPLIT, math.ceil(total / (TASKS_PER_CORE * max(1, parallelism)))))


def plan(files: list[tuple[str, int]], parallelism: int, target: int | None = None,
         max_shares: int | None = None, planned: int = 0) -> list[Unit]:
    """Units for (path, size) files: the shares of each file over the split size, ceil(size /
    split) of them and at most `max_shares` (default: the parallelism, since every share reads
    the whole file), then the other files packed in input order. `planned`: tasks of the same
    job planned elsewhere (byte ranges), which count towards a whole number of rounds."""
    split = split_size(sum(s for _, s in files), parallelism, target)
    cap = max(1, max_shares if max_shares is not None else parallelism)
    units: list[Unit] = []
    small: list[Piece] = []
    for path, size in files:
        if size > split and cap > 1:
            n = min(cap, math.ceil(size / split))
            units += [(Piece(path, size, k, n),) for k in range(n)]
        else:
            small.append(Piece(path, size))
    packs = _packed(small, split)
    # A last round of fewer tasks than cores leaves cores idle while it runs: as many more
    # packs as fill it (as the files allow), each smaller.
    n = min(len(small), len(packs) - (planned + len(units) + len(packs)) % -parallelism)
    if n > len(packs):
        even = _even(small, n)
        if len(even) > len(packs):
            packs = even
    return units + packs


def _packed(files: list[Piece], split: int) -> list[Unit]:
    """Files in input order, a pack closed before it would pass the split size."""
    units: list[Unit] = []
    pack: list[Piece] = []
    packed = 0
    for p in files:
        if pack and packed + p.size > split:
            units.append(tuple(pack))
            pack, packed = [], 0
        pack.append(p)
        packed += p.size
    if pack:
        units.append(tuple(pack))
    return units


def _even(files: list[Piece], n: int) -> list[Unit]:
    """Files in input order cut into at most n packs of about equal size: each file in the pack
    where the middle of its bytes falls (fewer packs where one file spans several)."""
    total = sum(p.size for p in files) or 1
    packs: list[list[Piece]] = [[] for _ in range(n)]
    before = 0
    for p in files:
        packs[min(n - 1, (2 * before + p.size) * n // (2 * total))].append(p)
        before += p.size
    return [tuple(pack) for pack in packs if pack]
