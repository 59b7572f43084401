"""Fitted tables written without rich (render/fitted.py plain_lines): the same text rich writes
for the table on a console without colours, for every table whose columns keep their natural
widths, and None (rich lays it out) for the others; and `conversations` on a capture of many
conversations."""

from __future__ import annotations

import io
import struct
import time
from collections.abc import Iterator
from pathlib import Path

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from kdissect.cli import cli
from kdissect.render.fitted import Col, fitted_table, plain_lines

# column names are the program's own (printable); cells come from captures (anything)
names = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=12)
columns = st.lists(st.builds(Col, names.filter(lambda s: s.strip() == s and s),
                             st.none() | st.integers(0, 9), st.booleans()), min_size=1, max_size=6)
cells = st.text(st.characters(blacklist_categories=("Cs",)), max_size=14) | st.sampled_from(
    ["", "kafka", "127.0.0.1:9092", "1.2 KiB", "漢字", "é", "a\tb", "x\x1by", "[bold]no[/]", "  padded  "])


def rich_text(cols: list[Col], rows: list[list[str]], width: int) -> str:
    out = io.StringIO()
    Console(file=out, color_system=None, no_color=True, highlight=False, width=width).print(
        fitted_table(cols, rows, width).table)
    return out.getvalue()


@settings(max_examples=300, deadline=None)
@given(st.data(), columns, st.sampled_from([10_000, 60, 30]))
def test_plain_lines_are_what_rich_writes(data: st.DataObject, cols: list[Col], width: int) -> None:
    rows = data.draw(st.lists(st.lists(cells, min_size=len(cols), max_size=len(cols)), max_size=5))
    lines = plain_lines(cols, lambda: iter(rows), width)
    if lines is not None:
        assert "\n".join(lines) + "\n" == rich_text(cols, rows, width)
    else:  # rows to lay out, or columns squeezed or left out: rich does it
        assert not rows or rich_text(cols, rows, width).count("\n") >= 2


def test_plain_lines_keep_no_row() -> None:
    # The rows were all kept, made text again and transposed to size the columns, and the lines
    # made at once: `conversations -a` over 400,000 conversations took 1.09 GB (0.71 GB now, as
    # -F json). The rows are made twice, as they are read, and the lines one at a time.
    import tracemalloc

    cols = [Col("stream"), Col("client", 1, True), Col("bytes", 2)]

    def rows() -> Iterator[list[str]]:
        return ([str(i), f"10.0.{i // 256 % 256}.{i % 256}:{40000 + i % 9999}", f"{i * 7} B"] for i in range(50_000))

    tracemalloc.start()
    try:
        lines = plain_lines(cols, rows, 10_000)
        assert lines is not None
        count = sum(1 for _ in lines)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == 2 + 50_000 and peak < 4 << 20  # the rows alone, kept: 13 MB
    out = list(plain_lines(cols, rows, 10_000) or ())
    assert out == rich_text(cols, list(rows()), 10_000).splitlines()


def _conversations(n: int) -> bytes:
    """A pcap of n conversations, each a SYN and one segment of 10 bytes to port 9092."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101)]  # raw IPv4
    for i in range(n):
        src = struct.pack(">BBH", 10, 1, i)
        for flags, payload in ((0x02, b""), (0x18, struct.pack(">i", 6) + b"\x00\x12\x00\x00\x00\x01")):
            tcp = struct.pack(">HHIIBBHHH", 40000, 9092, 1000 if flags == 0x02 else 1001, 0, 5 << 4, flags,
                              65535, 0, 0) + payload
            ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0, src, bytes([10, 0, 0, 1])) + tcp
            out.append(struct.pack("<IIII", i, 0, len(ip), len(ip)) + ip)
    return b"".join(out)


def test_a_capture_of_many_conversations_lists_them_quickly(tmp_path: Path) -> None:
    # 20 000 conversations: rich took 14 s and 350 MB for the table; written a line at a time,
    # the listing costs what decoding the capture does.
    path = tmp_path / "many.pcap"
    path.write_bytes(_conversations(20_000))
    t0 = time.process_time()
    r = CliRunner().invoke(cli, ["conversations", str(path), "--no-color", "-d", "tcp.port==9092,kafka"])
    assert r.exit_code == 0, r.output
    assert time.process_time() - t0 < 8.0
    lines = r.stdout.splitlines()
    assert len(lines) == 2 + 20_000 and lines[0].startswith("stream ┃ protocol")
    assert lines[2].split(" │ ")[:2] == ["     0", "kafka   "] and lines[-1].lstrip().startswith("19999 │")
