"""`kdissect spark` on a real Spark standalone cluster: a master and one worker started from
pyspark's own launcher (`bin/spark-class`), the worker in a working directory of its own and
the driver in another, the captures named by absolute path. The tables equal the
single-process decoding (test_spark_job's helpers), and the executor, not the driver, decoded
them."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import CAPTURES

pyspark = pytest.importorskip("pyspark")

from test_spark_job import _java_ok, expected, written  # noqa: E402

from kdissect.spark import inputs, job, session  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not _java_ok(), reason="no Java 17+ for Spark")]

SPARK_HOME = Path(pyspark.__file__).resolve().parent
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
REGISTERED = re.compile(r"Successfully registered with master")
TASK_DONE = re.compile(r"Finished task \S+ in stage")
LOOPBACK = "127.0.0.1"
QUICK_JVM = "-XX:TieredStopAtLevel=1"  # the JVM's quick compiler only: starts in a third of the time
START_SECONDS = 120.0  # a cold JVM on a busy 2-core machine
JOB_SECONDS = 300.0
STOP_SECONDS = 10.0
INPUTS = (CAPTURES / "kafka", CAPTURES / "zookeeper")


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path


@dataclass
class Cluster:
    url: str
    work: Path  # the worker's SPARK_WORKER_DIR: one directory per application and executor
    env: dict[str, str]


def _env(tmp: Path) -> dict[str, str]:
    """The environment of every process of the cluster and of the driver: everything on
    loopback, Spark's files in `tmp`, this interpreter (whose environment has kdissect) as the
    executors' Python, and no PYTHONPATH: executors import kdissect from the environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_SUBMIT_ARGS")}
    dirs = {"SPARK_LOG_DIR": "logs", "SPARK_PID_DIR": "pids", "SPARK_WORKER_DIR": "work"}
    for var, name in dirs.items():
        (tmp / name).mkdir()
        env[var] = str(tmp / name)
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP=LOOPBACK, PYSPARK_PYTHON=sys.executable,
               SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false", SPARK_DAEMON_JAVA_OPTS=QUICK_JVM)
    return env


def _start(name: str, cls: str, args: list[str], cwd: Path, env: dict[str, str]) -> Daemon:
    """`spark-class CLASS ARGS` in a process group of its own; with setpriv (util-linux) the
    JVM also gets SIGTERM when this process dies without running the fixture's finalizer."""
    log = Path(env["SPARK_LOG_DIR"]) / f"{name}.out"
    setpriv = shutil.which("setpriv")
    orphan_guard = [setpriv, "--pdeathsig", "TERM"] if setpriv else []
    with open(log, "wb") as out:
        proc = subprocess.Popen([*orphan_guard, str(SPARK_HOME / "bin" / "spark-class"), cls, *args], cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    return Daemon(name, proc, log)


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:] if log.exists() else ""


def _wait_for(d: Daemon, pattern: re.Pattern[str]) -> re.Match[str]:
    deadline = time.monotonic() + START_SECONDS
    while True:
        m = pattern.search(d.log.read_text(errors="replace"))
        if m is not None:
            return m
        if d.proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"the Spark {d.name} did not start (exit {d.proc.poll()}):\n{_tail(d.log)}")
        time.sleep(0.2)


def _stop(d: Daemon) -> None:
    """SIGTERM to the daemon's process group (the JVM and, for the worker, its executors and
    their Python workers), SIGKILL to whatever is left after a while."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(d.proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            d.proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("cluster")
    env = _env(tmp)
    daemons: list[Daemon] = []
    try:
        daemons.append(_start("master", MASTER_CLASS, ["--host", LOOPBACK, "--port", "0", "--webui-port", "0"],
                              tmp, env))
        url = _wait_for(daemons[0], MASTER_URL).group(1)
        worker_cwd = tmp / "worker-cwd"
        worker_cwd.mkdir()
        daemons.append(_start("worker", WORKER_CLASS,
                              [url, "--host", LOOPBACK, "--cores", "2", "--memory", "2g", "--webui-port", "0",
                               "--work-dir", env["SPARK_WORKER_DIR"]], worker_cwd, env))
        _wait_for(daemons[1], REGISTERED)
        yield Cluster(url, Path(env["SPARK_WORKER_DIR"]), env)
    finally:
        for d in reversed(daemons):
            _stop(d)


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A local session in this process that reads the written tables back."""
    log = tmp_path_factory.mktemp("reader") / "spark.log"
    s = session.start("local[1]", log_path=str(log), fast_start=True)
    yield s
    s.stop()


def _kdissect_spark(cluster: Cluster, out: Path, cwd: Path, log: Path) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own, its working directory not the worker's. The
    helpers' decoding cuts values at 256 bytes (the command keeps them whole unless told):
    the same --max-bytes also shows the options reach the executors."""
    env = {**cluster.env, "PYSPARK_SUBMIT_ARGS": session.submit_args("1g", fast_start=True)}
    cmd = [sys.executable, "-m", "kdissect", "spark", *map(str, INPUTS), "--out", str(out),
           "--master", cluster.url, "--max-bytes", "256", "--no-progress", "--log", str(log),
           "--conf", f"spark.driver.host={LOOPBACK}", "--conf", f"spark.executor.extraJavaOptions={QUICK_JVM}"]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=JOB_SECONDS)


def _differences(got: dict[str, list[str]], want: dict[str, list[str]]) -> str:
    """What differs between two sets of tables, briefly ("" when nothing): row counts and the
    start of the first rows only one side has (pytest's own diff of thousands of long rows
    takes minutes)."""
    out = []
    for name in job.TABLES:
        g, w = set(got[name]), set(want[name])
        if got[name] != want[name]:
            only = [f"{side}: {min(rows)[:400]}" for side, rows in (("missing", w - g), ("extra", g - w)) if rows]
            out.append(f"{name}: {len(got[name])} rows, want {len(want[name])}; {'; '.join(only)}")
    return "\n".join(out)


def _executor_ran_tasks(work: Path) -> bool:
    """An executor the worker launched (its log: work/APP/EXECUTOR/stderr) finished a task."""
    return any(TASK_DONE.search(p.read_text(errors="replace")) for p in work.glob("app-*/*/stderr"))


def test_tables_on_a_standalone_cluster_equal_single_process(cluster: Cluster, reader: Any,
                                                             tmp_path: Path) -> None:
    driver_cwd = tmp_path / "driver-cwd"
    driver_cwd.mkdir()
    out = tmp_path / "tables"
    res = _kdissect_spark(cluster, out, driver_cwd, tmp_path / "driver.log")
    assert res.returncode == 0, res.stderr + _tail(tmp_path / "driver.log")

    files = [f for d in INPUTS for f, _ in inputs.python_files([str(d)])]
    want = expected(files)
    assert want["messages"] and want["transactions"] and want["records"]
    line = (f"{len(want['messages'])} messages, {len(want['transactions'])} transactions, "
            f"{len(want['records'])} records from {len(files)} captures")
    assert line in res.stdout
    diff = _differences(written(reader, out), want)
    assert not diff, diff
    assert {d.name for d in (out / "messages").iterdir()} >= {"protocol=kafka", "protocol=zookeeper"}
    assert _executor_ran_tasks(cluster.work), "no executor of the worker ran a task"
