"""`kdissect spark`: decode captures with Apache Spark into the messages, transactions and
records tables (docs/spark.md), optionally followed by a Spark SQL report."""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
import warnings
from typing import TYPE_CHECKING, Any

import click

from kdissect.cliutil import current_filter_text, current_keylog, decode_options, make_console
from kdissect.errors import KdissectError, UsageError
from kdissect.text import shown

if TYPE_CHECKING:
    from kdissect.spark.progress import StatusLine

SIZE = re.compile(r"^\s*([0-9]{1,19})\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_PY_ERROR = re.compile(r"kdissect\.errors\.\w+: (.+)")
_LAST_PY_ERROR = re.compile(r"^(\w+(?:\.\w+)*(?:Error|Exception)): (.+)$", re.MULTILINE)


UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """"64M" -> 67108864 (K, M, G, T: powers of 1024; a plain number is bytes)."""
    m = SIZE.match(text)
    if m is None or int(m.group(1)) == 0:
        raise UsageError(f"--split-size takes a size such as 64M or 1G, not {text!r}")
    return int(m.group(1)) * UNITS[m.group(2).lower()]


def parse_conf(items: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf takes KEY=VALUE, not {item!r}")
        out[key.strip()] = value
    return out


@click.command("spark")
@click.argument("inputs", nargs=-1, required=True)
@click.option("-o", "--out", required=True, metavar="DIR",
              help="Output directory (local path or any URL Spark writes, e.g. hdfs://, s3a://).")
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option("-F", "--format", "fmt", type=click.Choice(["parquet", "json"]), default="parquet",
              show_default=True, help="Output table format.")
@click.option("--report", is_flag=True, help="Print Spark SQL summaries after writing the tables.")
@click.option("--overwrite", is_flag=True, help="Replace DIR if it exists (once the new tables are written).")
@click.option("--split-size", metavar="SIZE", help="Capture bytes per task (default: up to 128M).")
@click.option("--conf", "conf", multiple=True, metavar="KEY=VALUE", help="Extra Spark configuration; repeatable.")
@click.option("--log", "log_path", metavar="FILE", help="Where Spark's own messages go (default: a temporary file).")
@click.option("--progress/--no-progress", default=None,
              help="A progress line on standard error (default: when it is a terminal).")
@click.option("--no-color", is_flag=True, help="Plain text even on a terminal.")
@decode_options
def spark(inputs: tuple[str, ...], out: str, master: str, fmt: str, report: bool, overwrite: bool,
          split_size: str | None, conf: tuple[str, ...], log_path: str | None, progress: bool | None,
          no_color: bool, decode_as: tuple[str, ...], max_bytes: int, max_decompressed: int,
          show_secrets: bool) -> None:
    """Decode INPUT captures (files, directories, globs; local or hdfs://, s3a://, file://)
    with Apache Spark into the messages, transactions and records tables under DIR,
    partitioned by protocol and date. Java, local inputs and the output are checked before
    Spark starts; DIR appears only once all three tables are written."""
    from kdissect.protocols import parse_decode_as
    from kdissect.spark import inputs as spark_inputs
    from kdissect.spark import job, session
    from kdissect.spark.progress import StatusLine
    from kdissect.spark.worker import Config

    cfg = Config(parse_decode_as(decode_as), max_bytes, max_decompressed, show_secrets, current_filter_text(),
                 current_keylog())
    split = parse_size(split_size) if split_size else None
    spark_conf = parse_conf(conf)
    session.check_can_start()
    input_bytes = spark_inputs.check_local(inputs, master)
    job.check_out(out, overwrite, master)
    log = log_path or os.path.join(tempfile.gettempdir(), f"kdissect-spark-{os.getpid()}.log")
    console = make_console(no_color)
    line = StatusLine(sys.stderr.isatty() if progress is None else progress)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pyspark's warning about pandas 3
        try:
            _run(list(inputs), out, master, fmt, report, overwrite, split, spark_conf, log, cfg, console, line,
                 session.quick_start(input_bytes))
        finally:
            line.clear()


def _run(inputs: list[str], out: str, master: str, fmt: str, report: bool, overwrite: bool,
         split: int | None, conf: dict[str, str], log: str, cfg: Any, console: Any, line: StatusLine,
         fast_start: bool = False) -> None:
    from kdissect.spark import job, session
    from kdissect.spark.progress import Progress

    t0 = time.monotonic()
    line.show(f"starting Spark ({master})")
    mine = session.active() is None  # a session already running (a notebook, tests) is kept
    spark = session.start(master, conf, log_path=log, fast_start=fast_start)
    started = time.monotonic() - t0
    try:
        p = job.make_plan(spark, inputs, split)
        line.show(f"{len(p.files)} captures, {p.bytes / 1e6:.1f} MB, {p.tasks} tasks")
        with Progress.of(spark, p.bytes, line.show) as progress:
            result = _guarded(lambda: job.run(spark, p, out, cfg, fmt, overwrite, progress=progress), log)
        line.clear()
        took = time.monotonic() - t0
        c = result.counts
        console.print(f"{c['messages']} messages, {c['transactions']} transactions, {c['records']} records "
                      f"from {len(p.files)} captures ({p.bytes / 1e6:.1f} MB) in {took:.1f} s "
                      f"(Spark start-up {started:.1f} s) -> {out.rstrip('/')}/{{messages,transactions,records}}")
        if report:
            _print_report(spark, console, log)
    finally:
        line.clear()
        if mine:
            spark.stop()


def _guarded(fn: Any, log: str) -> Any:
    """Spark's errors as one line: a kdissect error raised on an executor keeps its text."""
    try:
        return fn()
    except KdissectError:
        raise
    except Exception as e:  # noqa: BLE001 - py4j/pyspark errors carry the executor's traceback
        text = str(e)
        mine = _PY_ERROR.findall(text)
        if mine:
            raise UsageError(mine[-1].strip()) from None
        last = _LAST_PY_ERROR.findall(text)
        what = f"{last[-1][0]}: {last[-1][1]}" if last else text.strip().splitlines()[0][:300]
        raise KdissectError(f"the Spark job failed: {what} (Spark's log: {log})") from None


def _print_report(spark: Any, console: Any, log: str) -> None:
    from rich.table import Table
    from rich.text import Text

    from kdissect.spark import report

    if not console.is_terminal:
        console.width = max(console.width, 160)
    for t in _guarded(lambda: report.run(spark), log):
        table = Table(title=t.title, title_justify="left")
        for col in t.columns:
            table.add_column(col, justify="left" if col in ("protocol", "op", "topic", "client_host") else "right")
        for row in t.rows:
            table.add_row(*(Text("" if v is None else shown(str(v))) for v in row))  # a topic is no markup
        console.print(table)
