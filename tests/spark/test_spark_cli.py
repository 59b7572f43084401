"""`kdissect spark` fails fast and in one line, never leaves a partial output directory, and
shows progress: the checks before Spark starts (where starting Spark raises), Hadoop's errors
about URLs, a job that fails half-way, and the progress line. One SparkSession for the
module's Spark tests."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support import CAPTURES
from test_spark_job import _java_ok

from kdissect.errors import UsageError
from kdissect.spark import inputs, job, session
from kdissect.spark.progress import Progress, Snapshot, StatusLine, line, share_bytes
from kdissect.spark.units import Piece
from kdissect.spark.worker import Config

PULSAR = sorted((CAPTURES / "pulsar").glob("*.pcap"))


def needs_spark(test: Any) -> Any:
    return pytest.mark.slow(pytest.mark.skipif(not _java_ok(), reason="no Java 17+ for Spark")(test))


class SparkStarted(Exception):
    pass


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting Spark raises SparkStarted; Java and pyspark count as present."""
    def start(*args: Any, **kwargs: Any) -> None:
        raise SparkStarted()

    monkeypatch.setattr(session, "start", start)
    monkeypatch.setattr(session, "check_can_start", lambda: None)


def _invoke(*args: str) -> Any:
    from click.testing import CliRunner

    from kdissect.cli import cli

    return CliRunner().invoke(cli, ["spark", *args])


def _error(*args: str) -> str:
    res = _invoke(*args)
    assert isinstance(res.exception, UsageError), res.exception
    return str(res.exception)


# -- before Spark starts ------------------------------------------------------------------------

def test_bad_inputs_fail_before_spark(no_spark: None, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no capture here\n")
    dangling = tmp_path / "dangling"
    dangling.mkdir()
    (dangling / "gone.pcap").symlink_to(tmp_path / "missing.pcap")
    out = str(tmp_path / "out")
    cases = {
        "/nonexistent/x.pcap": "no such file or directory: /nonexistent/x.pcap",
        "file:///nonexistent/x.pcap": "no such file or directory: /nonexistent/x.pcap",
        f"{tmp_path}/*.pcapng": f"no such file or directory: {tmp_path}/*.pcapng",
        str(empty): f"{empty}: no captures there (files named *.pcap, *.pcapng, *.cap, *.dmp, "
                    "*.pcap.gz, *.pcapng.gz)",
        str(dangling): f"cannot read {dangling}/gone.pcap: No such file or directory",
    }
    for inp, want in cases.items():
        assert _error(str(PULSAR[0]), inp, "--out", out) == want
    assert not os.path.exists(out)
    # on a cluster a plain path is the cluster's: Spark checks it
    assert isinstance(_invoke("/nonexistent/x.pcap", "--out", out, "--master", "yarn").exception, SparkStarted)


def test_existing_output_fails_before_spark_unless_overwrite(no_spark: None, tmp_path: Path) -> None:
    out = tmp_path / "tables"
    (out / "messages").mkdir(parents=True)
    assert _error(str(PULSAR[0]), "--out", str(out)) == f"{out} already exists (--overwrite replaces it)"
    blocker = tmp_path / "plain-file"
    blocker.write_text("")
    assert _error(str(PULSAR[0]), "--out", str(blocker / "tables")) == \
        f"cannot write {blocker}/tables: {blocker} is not a directory"
    assert _error(str(PULSAR[0]), "--out", "/", "--overwrite") == \
        "/ is a file system's root: write the tables into a directory below it"
    empty = tmp_path / "empty"
    empty.mkdir()
    for args in (["--out", str(out), "--overwrite"], ["--out", str(tmp_path / "new")], ["--out", str(empty)]):
        assert isinstance(_invoke(f"{CAPTURES}/{{pulsar,zookeeper}}", *args).exception, SparkStarted)


@needs_spark
def test_small_local_inputs_start_the_jvm_with_its_quick_compiler(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    """Inputs the driver sees, of at most QUICK_START_BYTES together, start Spark fast (the
    JVM's quick compiler only); bigger ones, or ones it cannot see, do not."""
    started: list[Any] = []

    def start(*args: Any, **kwargs: Any) -> None:
        started.append(kwargs.get("fast_start"))
        raise SparkStarted()
    monkeypatch.setattr(session, "start", start)
    monkeypatch.setattr(session, "check_can_start", lambda: None)
    size = sum(p.stat().st_size for p in PULSAR)
    assert inputs.check_local([str(CAPTURES / "pulsar"), str(PULSAR[0])], "local[2]") == size
    assert inputs.check_local([str(PULSAR[0]), "hdfs://nn/x.pcap"], "local[2]") is None
    out = str(tmp_path / "out")
    for limit in (size, size - 1):
        monkeypatch.setattr(session, "QUICK_START_BYTES", limit)
        assert isinstance(_invoke(str(CAPTURES / "pulsar"), "--out", out).exception, SparkStarted)
    assert isinstance(_invoke("hdfs://nn/x.pcap", "--out", out).exception, SparkStarted)
    assert started == [True, False, False]
    assert "-XX:TieredStopAtLevel=1" in session.submit_args("4g", fast_start=True)
    assert "TieredStopAtLevel" not in session.submit_args("4g")


def test_command_line_is_one_line_and_exit_2(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "x").write_text("")
    for args, want in ((["/nonexistent.pcap", "--out", str(tmp_path / "o")],
                        "kdissect: error: no such file or directory: /nonexistent.pcap"),
                       ([str(PULSAR[0]), "--out", str(tmp_path / "tables")],
                        f"kdissect: error: {tmp_path}/tables already exists (--overwrite replaces it)")):
        proc = subprocess.run([sys.executable, "-m", "kdissect", "spark", *args], capture_output=True, text=True,
                              timeout=60)
        assert (proc.returncode, proc.stderr, proc.stdout) == (2, want + "\n", "")


def test_driver_paths_and_braces() -> None:
    assert inputs.driver_path("/a/b.pcap", "local[2]") == "/a/b.pcap"
    assert inputs.driver_path("file:///a/b.pcap", "yarn") == "/a/b.pcap"
    assert inputs.driver_path("/a/b.pcap", "yarn") is None  # the cluster's default file system
    assert inputs.driver_path("hdfs://nn:8020/a", "local[*]") is None
    assert inputs.braces("d/{a,b}/x{1,2}.pcap") == ["d/a/x1.pcap", "d/a/x2.pcap", "d/b/x1.pcap", "d/b/x2.pcap"]


# -- progress ----------------------------------------------------------------------------------

def test_progress_line_from_tracker_and_counters() -> None:
    stages = {7: SimpleNamespace(numCompletedTasks=3, numTasks=10), 8: SimpleNamespace(numCompletedTasks=1, numTasks=4)}
    tracker = SimpleNamespace(getActiveStageIds=lambda: list(stages), getStageInfo=stages.get)
    counters: Any = SimpleNamespace(decoded=SimpleNamespace(value=12_345_678), messages=SimpleNamespace(value=98765))
    p = Progress(tracker, counters, 45_600_000, print)
    p.phase = "writing messages"
    assert line(p.snapshot()) == "writing messages: 4/14 tasks, 12.3 of 45.6 MB decoded, 98,765 messages"
    stages.clear()  # between stages: the last task counts stay
    p.phase = "counting"
    assert p.snapshot() == Snapshot("counting", 4, 14, 12_345_678, 45_600_000, 98765)
    assert line(Snapshot("decoding")) == "decoding: 0 messages"


def test_shares_of_a_capture_add_up_to_its_size() -> None:
    assert sum(share_bytes(Piece("x", 1001, k, 3)) for k in range(3)) == 1001
    assert share_bytes(Piece("x", 1001)) == 1001


def test_status_line_rewrites_in_place_and_is_quiet_when_disabled() -> None:
    buf = io.StringIO()
    s = StatusLine(True, buf)
    s.show("starting Spark (local[2])")
    s.show("3 tasks")
    s.clear()
    assert buf.getvalue() == "\rstarting Spark (local[2])\r3 tasks" + " " * 18 + "\r" + " " * 7 + "\r"
    quiet = io.StringIO()
    StatusLine(False, quiet).show("anything")
    assert quiet.getvalue() == ""


# -- with Spark ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("pyspark")
    log = tmp_path_factory.mktemp("spark") / "spark.log"
    s = session.start("local[2]", {"spark.sql.shuffle.partitions": "2"}, log_path=str(log), fast_start=True)
    yield s
    s.stop()


@needs_spark
def test_urls_hadoop_cannot_read_are_one_line(spark: Any, tmp_path: Path) -> None:
    hadoop = spark.sparkContext._jvm.org.apache.hadoop.util.VersionInfo.getVersion()
    cases = {
        "s3a://bucket/caps/": "s3a://bucket/caps/: no file system for s3a:// in this Spark: Class "
                              "org.apache.hadoop.fs.s3a.S3AFileSystem not found; add its connector: "
                              f"--conf spark.jars.packages=org.apache.hadoop:hadoop-aws:{hadoop}",
        "foo://host/x.pcap": 'foo://host/x.pcap: no file system for foo:// in this Spark: No FileSystem for '
                             'scheme "foo"; add the jar that holds it (--conf spark.jars=... or '
                             'spark.jars.packages=...)',
        "hdfs://127.0.0.1:1/caps": "hdfs://127.0.0.1:1/caps: cannot reach it: Connection refused",
        "hdfs://nohost.invalid:8020/caps": "hdfs://nohost.invalid:8020/caps: unknown host: nohost.invalid",
        f"file://{tmp_path}/none.pcap": f"no such file or directory: file://{tmp_path}/none.pcap",
    }
    for url, want in cases.items():
        with pytest.raises(UsageError) as e:
            inputs.hadoop_files(spark, [url])
        assert str(e.value) == want
    res = _invoke(str(PULSAR[0]), "--out", "gs://bucket/tables")
    assert isinstance(res.exception, UsageError)
    assert str(res.exception) == ("gs://bucket/tables: no file system for gs:// in this Spark: Class "
                                  "org.apache.hadoop.fs.gs.GoogleHadoopFileSystem not found; add the jar that "
                                  "holds it (--conf spark.jars=... or spark.jars.packages=...)")


def _plan(spark: Any, tmp_path: Path) -> job.Plan:
    src = tmp_path / "in"
    src.mkdir()
    for f in PULSAR:
        shutil.copy(f, src)
    p = job.make_plan(spark, [str(src)], split=1, max_shares=1)  # a task per capture at least
    assert p.tasks >= len(PULSAR) == 3
    return p


def _siblings(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(out.name))


@needs_spark
def test_failed_job_leaves_no_output_and_keeps_the_old(spark: Any, tmp_path: Path) -> None:
    p = _plan(spark, tmp_path)
    os.unlink(p.files[1][0])  # gone between listing and decoding: its task fails
    out = tmp_path / "out"
    with pytest.raises(Exception, match="No such file"):
        job.run(spark, p, str(out), Config())
    assert _siblings(out) == []
    (out / "messages").mkdir(parents=True)
    (out / "messages" / "old.parquet").write_text("the tables of an earlier run")
    with pytest.raises(Exception, match="No such file"):
        job.run(spark, p, str(out), Config(), overwrite=True)
    assert _siblings(out) == ["out"] and [f.name for f in (out / "messages").iterdir()] == ["old.parquet"]


@needs_spark
def test_overwrite_replaces_at_the_end_and_counts_progress(spark: Any, tmp_path: Path) -> None:
    p = _plan(spark, tmp_path)
    out = tmp_path / "out"
    (out / "messages").mkdir(parents=True)
    (out / "messages" / "old.parquet").write_text("the tables of an earlier run")
    shown: list[str] = []
    progress = Progress.of(spark, p.bytes, shown.append)
    result = job.run(spark, p, str(out), Config(), overwrite=True, progress=progress)
    assert _siblings(out) == ["out"] and sorted(f.name for f in out.iterdir()) == list(sorted(job.TABLES))
    assert not (out / "messages" / "old.parquet").exists()
    assert spark.read.parquet(str(out / "messages")).count() == result.counts["messages"] == 197
    snap = progress.snapshot()
    assert (snap.phase, snap.decoded, snap.messages) == ("decoding", p.bytes, 197)  # (the tasks write as they decode)


def _interrupt_once_running(spark: Any) -> None:
    tracker = spark.sparkContext.statusTracker()
    for _ in range(600):
        if tracker.getActiveStageIds():
            os.kill(os.getpid(), signal.SIGINT)
            return
        time.sleep(0.05)


@needs_spark
def test_ctrl_c_cancels_the_job_and_removes_the_staging_directory(spark: Any, tmp_path: Path) -> None:
    p = _plan(spark, tmp_path)
    out = tmp_path / "out"
    threading.Thread(target=_interrupt_once_running, args=(spark,), daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        job.run(spark, p, str(out), Config())
    assert _siblings(out) == []
    assert spark.range(3).count() == 3  # the session's connection to the JVM still works


@needs_spark
def test_command_progress_on_request_and_quiet_otherwise(spark: Any, tmp_path: Path) -> None:
    quiet = _invoke(str(PULSAR[0]), "--out", str(tmp_path / "a"), "--no-color")
    assert quiet.exit_code == 0, quiet.output
    assert "\r" not in quiet.output
    loud = _invoke(str(PULSAR[0]), "--out", str(tmp_path / "b"), "--no-color", "--progress")
    assert loud.exit_code == 0, loud.output
    assert "\rstarting Spark" in loud.output and "1 captures, 0.0 MB, 1 tasks" in loud.output
