"""What a reader of newline-ended lines (Hadoop's, behind Spark's text source) gives for the
splits of a file: each split holds the lines that start in it (after its start, but for the
first split, and up to its end included), each line without its newline."""

from __future__ import annotations


def line_splits(blob: bytes, cuts: list[int]) -> list[tuple[int, list[bytes]]]:
    """(split start, its lines) for the splits [cuts[k], cuts[k+1]) in which a line starts."""
    starts = [0, *(i + 1 for i, c in enumerate(blob) if c == 0x0A and i + 1 < len(blob))] if blob else []
    ends = [*starts[1:], len(blob)]
    out = []
    for s, e in zip(cuts, cuts[1:], strict=False):
        lines = [blob[a:b].removesuffix(b"\n") for a, b in zip(starts, ends, strict=True)
                 if (a > s or a == s == 0) and a <= e]
        if lines:
            out.append((s, lines))
    return out


def block_bytes(lines: list[bytes]) -> bytes:
    """A split's lines with their newlines back."""
    return b"\n".join(lines) + b"\n"
