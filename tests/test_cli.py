"""The command line as a user meets it: help, errors, exit codes, pipes, JSON validity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from pcapgen import Pkt, TcpConn, ethernet, kafka_request, kafka_response, write_pcap
from support import CAPTURES

from kdissect.cli import cli

KDISSECT = [sys.executable, "-m", "kdissect"]


def run(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KDISSECT, *args], capture_output=True, text=True, timeout=120, **kw)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    c = TcpConn()
    pkts = c.handshake()
    for corr in range(1, 301):
        pkts.append(c.segment(True, kafka_request(18, 0, corr, "cli-test")))
        pkts.append(c.segment(False, kafka_response(corr, b"\x00\x00\x00\x00\x00\x00")))
    path = tmp_path_factory.mktemp("cap") / "api.pcap"
    write_pcap(str(path), [Pkt(1700000000 + i * 0.001, ethernet(p)) for i, p in enumerate(pkts)])
    return path


@pytest.mark.parametrize("name", cli.list_commands(click.Context(cli)))
def test_every_command_has_help(name: str) -> None:
    r = run(name, "--help")
    assert r.returncode == 0, r.stderr
    assert "Usage:" in r.stdout and len(r.stdout.splitlines()) > 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["read", "/nonexistent.pcap"], "cannot open"),
        (["read", "__FILE__"], "not a pcap or pcapng capture"),
        (["read", "__CAP__", "--decode-as", "9092=nosuch"], "unknown protocol"),
        (["read", "__CAP__", "--decode-as", "x=kafka"], "PORT=PROTOCOL"),
        (["export", "__CAP__", "--format", "xml"], "Invalid value"),
        (["nosuchcommand"], "No such command"),
        (["read", "__CAP__", "-c", "-1"], "-1 is not in the range x>=1. (see kdissect read --help)"),
        (["read", "__CAP__", "--bogus"], "No such option '--bogus'"),
        (["read", "__CAP__", "-o", "foo.bar:x"], "unknown preference 'foo.bar'"),
        (["export", "__CAP__", "-T"], "Option '-T' requires an argument"),
        (["read", "__CAP__", "-Y", 'kafka.client_id matches "' + "(" * 500 + ")" * 500 + '"'],
         "bad regular expression (nested too deeply)"),
        (["read", "__CAP__", "-Y", 'kafka.client_id matches "a{99999999999}"'],
         "bad regular expression (the repetition number is too large)"),
    ],
)
def test_bad_use_is_one_line_and_exit_2(capture: Path, args: list[str], message: str) -> None:
    args = [str(capture) if a == "__CAP__" else __file__ if a == "__FILE__" else a for a in args]
    r = run(*args)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("kdissect: error: "), r.stderr
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].strip() == "^"), r.stderr  # a filter's column


@pytest.mark.parametrize("command", ["read", "stats"])
def test_a_decompression_cap_past_what_the_codecs_take_is_a_usage_error(command: str) -> None:
    """--max-decompressed 2**63 ended in an internal error (exit 1) on the first compressed
    payload (zlib takes the cap as a C size); the largest cap allowed still reads."""
    rocketmq = str(CAPTURES / "rocketmq" / "gen_encoder_binary.pcap")
    r = run(command, rocketmq, "--max-decompressed", str(2**63))
    assert r.returncode == 2 and "--max-decompressed" in r.stderr and "Traceback" not in r.stderr
    r = run(command, rocketmq, "--max-decompressed", str(1 << 30))
    assert r.returncode == 0, r.stderr


def test_read_lists_messages_with_response_times(capture: Path) -> None:
    r = run("read", str(capture), "-c", "2")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2
    assert "ApiVersions v0 request corr=1 client=cli-test" in lines[0]
    assert "ApiVersions v0 response corr=1" in lines[1] and lines[1].endswith("(1.0 ms)")
    assert "\x1b[" not in r.stdout  # no colours when not on a terminal


def test_read_verbose_and_hex(capture: Path) -> None:
    r = run("read", str(capture), "-c", "1", "-V", "-x")
    assert "correlation_id: 1" in r.stdout
    assert "client_id: 'cli-test'" in r.stdout
    assert "0000  00 00 00 12 00 12 00 00" in r.stdout


def test_export_json_and_jsonl_agree(capture: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    r = run("export", str(capture), "-o", str(out))
    assert r.returncode == 0, r.stderr
    arr = json.loads(out.read_text())
    r2 = run("export", str(capture), "--format", "jsonl")
    lines = [json.loads(line) for line in r2.stdout.splitlines()]
    assert arr == lines
    assert len(arr) == 600
    first = arr[0]
    for key in ("frame", "frames", "ts", "stream", "src", "dst", "protocol", "kind", "summary",
                "fields", "diagnostics", "match"):
        assert key in first
    assert first["match"] == {"frame": 5, "kind": "response", "rtt_ms": 1.0}
    assert first["fields"]["header"]["api_key_name"] == "ApiVersions"


@pytest.mark.parametrize("command", ["read", "export --format jsonl"])
def test_pipe_into_head_ends_quietly(capture: Path, command: str) -> None:
    p = subprocess.run(["bash", "-o", "pipefail", "-c",
                        f"{sys.executable} -m kdissect {command} {capture} | head -1"],
                       capture_output=True, text=True, timeout=60)
    assert p.stderr == ""
    assert p.returncode == 0
    assert len(p.stdout.splitlines()) == 1


def test_cut_capture_warns_once(capture: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(capture.read_bytes()[:-7])
    r = run("export", str(cut), "--format", "jsonl")
    assert r.returncode == 0
    assert r.stderr.count("warning") == 1 and "cut" in r.stderr


CAPTURE_COMMANDS = [["read"], ["export"], ["export", "--format", "fields", "-e", "kdissect.frame"], ["stats"],
                    ["conversations"], ["follow", "-s", "0"], ["fields", "kafka", "--from"]]


@pytest.mark.parametrize("command", CAPTURE_COMMANDS)
def test_a_directory_is_one_line_and_exit_2(command: list[str], tmp_path: Path) -> None:
    r = run(*command, str(tmp_path))
    assert r.returncode == 2
    assert r.stderr == f"kdissect: error: cannot open {tmp_path}: it is a directory, not a capture file\n"


@pytest.mark.parametrize("command", CAPTURE_COMMANDS)
def test_standard_input_reads_like_the_file(capture: Path, command: list[str]) -> None:
    from_file = run(*command, str(capture))
    from_stdin = subprocess.run([*KDISSECT, *command, "-"], input=capture.read_bytes(), capture_output=True,
                                timeout=120)  # a pipe: not seekable
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert from_stdin.stdout.decode() == from_file.stdout.replace(str(capture), "standard input")
    assert from_stdin.stderr == b""


def test_gzip_on_standard_input(capture: Path) -> None:
    import gzip

    r = subprocess.run([*KDISSECT, "read", "-", "-c", "3"], input=gzip.compress(capture.read_bytes()),
                       capture_output=True, timeout=120)
    assert r.returncode == 0 and r.stderr == b""
    assert len(r.stdout.splitlines()) == 3


def test_a_fifo_is_read_like_a_file(capture: Path, tmp_path: Path) -> None:
    import os
    import time

    fifo = tmp_path / "cap.fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen([*KDISSECT, "stats", "--format", "json", str(fifo)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while True:  # the writer's end opens once kdissect holds the reading end
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    os.set_blocking(fd, True)
    with os.fdopen(fd, "wb") as f:
        f.write(capture.read_bytes())
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out)["messages"] == 600


def test_unsupported_link_type_is_reported_once(tmp_path: Path) -> None:
    path = tmp_path / "wifi.pcap"
    write_pcap(str(path), [Pkt(1.0 + i, b"\x00" * 60) for i in range(7)], linktype=147)
    r = run("read", str(path))
    assert r.returncode == 0 and r.stdout == ""
    assert r.stderr == f"kdissect: warning: {path}: link type 147 is not supported; 7 frames skipped\n"


def test_nothing_decoded_says_what_was_seen(tmp_path: Path) -> None:
    pkts: list[bytes] = []
    for cport, sport in ((50000, 2888), (50001, 3888), (50002, 2888)):
        c = TcpConn(cport=cport, sport=sport)
        pkts += c.handshake() + [c.segment(True, b"\x01\x02\x03" * 10), c.segment(False, b"\x04" * 9)]
    path = tmp_path / "zab.pcap"
    write_pcap(str(path), [Pkt(1.0 + i, ethernet(p)) for i, p in enumerate(pkts)])
    r = run("read", str(path))
    assert r.returncode == 0 and r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"kdissect: note: {path}: 15 TCP segments in 3 conversations, none recognised; ")
    assert "busiest server ports: 2888 (2 conversations, 10 segments), 3888 (1 conversation, 5 segments)" in line
    assert "ZooKeeper quorum (ZAB) traffic on 2888/3888 is not decoded" in line
    assert line.endswith("try --decode-as PORT=PROTO")


def test_standard_input_on_a_terminal_is_refused() -> None:
    import os
    import pty

    master, slave = pty.openpty()
    try:
        r = run("read", "-", stdin=slave)
    finally:
        os.close(master)
        os.close(slave)
    assert r.returncode == 2
    assert r.stderr == "kdissect: error: standard input is a terminal: pipe a capture into it, or name a file\n"


@pytest.mark.parametrize("command", ["read", "export"])
def test_a_count_beyond_any_capture_reads_it_all(capture: Path, command: str) -> None:
    everything = run(command, str(capture))
    r = run(command, str(capture), "-c", "99999999999999999999999")
    assert r.returncode == 0, r.stderr
    assert r.stdout == everything.stdout and r.stdout


def test_a_report_that_cannot_be_written_is_one_line_and_leaves_no_part_file(capture: Path, tmp_path: Path) -> None:
    path = tmp_path / "no-such-directory" / "report.html"
    r = run("report", str(capture), "-o", str(path))
    assert r.returncode == 2
    assert r.stderr.startswith(f"kdissect: error: cannot write {path}: ") and r.stderr.count("\n") == 1
    r = run("report", str(capture), "-o", str(tmp_path / "report.html"))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]  # no .part left behind


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux): a device that is always full")
@pytest.mark.parametrize("command", [["read"], ["export"], ["stats"], ["export", "-o", "/dev/full"],
                                     ["read", "-w", "/dev/full"], ["report", "-o", "/dev/full", "--overwrite"]],
                         ids=lambda c: " ".join(c))
def test_a_full_disk_is_one_line_and_exit_2(capture: Path, command: list[str]) -> None:
    with open("/dev/full", "w") as full:
        r = subprocess.run([*KDISSECT, command[0], str(capture), *command[1:]], stdout=full, stderr=subprocess.PIPE,
                           text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("kdissect: error: "), r.stderr
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].strip() == "^"), r.stderr  # a filter's column
    assert "No space left on device" in r.stderr
    assert os.path.exists("/dev/full") and not os.path.isfile("/dev/full")


def test_a_report_into_a_pipe_writes_to_it_and_leaves_it_a_pipe(capture: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen([*KDISSECT, "report", str(capture), "-o", str(fifo), "--overwrite"],
                            stderr=subprocess.PIPE, text=True)
    with open(fifo, "rb") as f:
        page = f.read()
    assert proc.wait(timeout=120) == 0
    assert page.startswith(b"<!DOCTYPE html>") and not fifo.is_file() and fifo.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


def test_the_hex_dump_of_a_big_message_is_written_as_it_is_made(tmp_path: Path) -> None:
    # 160 KiB in segments of 8 KiB: 10 240 dump lines, written 4096 at a time, the same as at once.
    c = TcpConn()
    msg = kafka_request(18, 0, 1, "big", bytes(range(256)) * 640)
    pkts = [*c.handshake(), *(c.segment(True, msg[i : i + 8192]) for i in range(0, len(msg), 8192))]
    path = tmp_path / "big.pcap"
    write_pcap(str(path), [Pkt(i * 0.001, ethernet(p)) for i, p in enumerate(pkts)])
    r = run("read", str(path), "-x", "--no-color")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert "ApiVersions v0 request corr=1 client=big" in lines[0]
    dump = lines[1:-2]
    assert len(dump) == -(-len(msg) // 16) and lines[-2:] == ["", ""]  # then a blank line
    rows = [ln[4:].split("  ", 1) for ln in dump]  # offset, then 16 bytes in 48 columns and the text
    assert [int(offset, 16) for offset, _ in rows] == list(range(0, len(msg), 16))
    assert "".join(rest[:48].replace(" ", "") for _, rest in rows) == msg.hex()


def test_export_into_a_directory_is_one_line_and_exit_2(capture: Path, tmp_path: Path) -> None:
    r = run("export", str(capture), "-o", str(tmp_path))
    assert r.returncode == 2
    assert r.stderr.startswith(f"kdissect: error: cannot write {tmp_path}: ") and r.stderr.count("\n") == 1


@pytest.mark.parametrize("command", [["read"], ["export", "-F", "jsonl"]], ids=["read", "export"])
def test_l_flushes_each_message_for_a_reader_of_a_live_pipe(capture: Path, command: list[str]) -> None:
    """With -l (tshark's), each message reaches the pipe as it is decoded, while the capture is
    still coming; the whole output is that of the file. PYTHONUNBUFFERED changes neither."""
    import os
    import select

    data = capture.read_bytes()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([*KDISSECT, *command, "-l", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(data[:len(data) // 60])  # a few messages: less than a buffer of output
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "no message before the end of the capture"
        first = proc.stdout.readline()
        proc.stdin.write(data[len(data) // 60:])
        proc.stdin.close()
        rest = proc.stdout.read()
        assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        proc.kill()
    whole = run(*command, str(capture))
    assert (first + rest).decode() == whole.stdout.replace(str(capture), "standard input")


def test_standard_output_is_written_in_blocks_off_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under PYTHONUNBUFFERED standard output has no buffer: main() gives it one."""
    import io

    from kdissect.cli import _buffered_stdout

    raw = io.FileIO(tmp_path / "out", "w")
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="utf-8", write_through=True))
    _buffered_stdout()
    assert isinstance(sys.stdout.buffer, io.BufferedWriter)
    sys.stdout.write("one line\n")
    assert (tmp_path / "out").read_bytes() == b""
    sys.stdout.flush()
    assert (tmp_path / "out").read_bytes() == b"one line\n"


def test_names_from_a_capture_are_text_not_markup_nor_terminal_control(tmp_path: Path) -> None:
    """A client id that looks like rich markup or holds control characters is shown as text by
    every text output (never a markup error, never a raw escape sequence)."""
    c = TcpConn()
    pkts = c.handshake()
    for corr, client in enumerate(("[/bold] [red]x", "evil\x1b[2J\r\nforged"), 1):
        pkts.append(c.segment(True, kafka_request(18, 0, corr, client)))
    path = tmp_path / "names.pcap"
    write_pcap(str(path), [Pkt(i * 0.001, ethernet(p)) for i, p in enumerate(pkts)])
    wide = {**os.environ, "COLUMNS": "1000"}  # (a table's cells are not folded)
    outputs = [run(*cmd, str(path), "--decode-as", "9092=kafka", env=wide) for cmd in (
        ("read",), ("read", "-V"), ("stats",), ("conversations",), ("expert",),
        ("export", "-T", "fields", "-e", "kafka.client_id", "-e", "kdissect.summary"))]
    for r in outputs:
        assert r.returncode == 0, r.stderr
        assert "\x1b" not in r.stdout and "\r" not in r.stdout
    assert "[/bold] [red]x" in outputs[2].stdout and "evil\\x1b[2J\\r\\nforged" in outputs[2].stdout
    assert outputs[5].stdout.splitlines()[1] == "evil\\x1b[2J\\r\\nforged\tApiVersions v0 request corr=2 client=evil\\x1b[2J\\r\\nforged"
