"""Units of work: whole TCP conversations, never split. Pure Python.

Small captures are packed together up to a target size (at most 128 MB, as Spark's own file
splits, and at most a third of each core's share: decoding is work for the processor, and
three tasks a core let the cores finish together); a capture larger than the target is
shared by several tasks, each of which reads the whole file and decodes only the conversations
whose flow hash falls into its share (Pipeline's flow_filter). The hash is CRC-32 of the
canonical endpoints, the same in every process (Python's hash() is salted per process).
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
         max_shares: int | None = None) -> list[Unit]:
    """Units for (path, size) files, in input order. A file over the split size gets
    ceil(size / split) shares, at most `max_shares` (default: the parallelism, since every
    share reads the whole file)."""
    split = split_size(sum(s for _, s in files), parallelism, target)
    cap = max(1, max_shares if max_shares is not None else parallelism)
    units: list[Unit] = []
    pack: list[Piece] = []
    packed = 0
    for path, size in files:
        if size > split and cap > 1:
            n = min(cap, math.ceil(size / split))
            units += [(Piece(path, size, k, n),) for k in range(n)]
            continue
        if pack and packed + size > split:
            units.append(tuple(pack))
            pack, packed = [], 0
        pack.append(Piece(path, size))
        packed += size
    if pack:
        units.append(tuple(pack))
    return units
