"""Starting Spark quietly: a Java check first, the JVM's own stderr (log4j, launcher warnings,
Python worker tracebacks) into a log file, log level ERROR, and a poller for a progress line.

pyspark is imported only inside these functions.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

from kdissect.errors import UsageError

MIN_JAVA = 17  # Spark 4 runs on Java 17 and 21
JRE_HINT = "install a JRE (Debian: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')

QUIET_CONF = {
    "spark.ui.showConsoleProgress": "false",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.python.worker.reuse": "true",
    # partitioned writes without sorting each task's rows first (while <= 16 partitions open)
    "spark.sql.maxConcurrentOutputFileWriters": "16",
}


def java_major(version_text: str) -> int | None:
    """17 from 'openjdk version "17.0.15"', 8 from 'java version "1.8.0_392"'."""
    m = _VERSION.search(version_text)
    if m is None:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def check_java() -> str:
    """The java binary Spark will use; UsageError (exit 2, one line) when absent or too old."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        where = f"JAVA_HOME={home} has no bin/java" if home else "no java on PATH"
        raise UsageError(f"Spark needs Java {MIN_JAVA} or newer: {where}; {JRE_HINT}")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        raise UsageError(f"Spark needs Java {MIN_JAVA} or newer: {java} does not run ({e}); {JRE_HINT}") from None
    major = java_major(out.stderr + out.stdout)
    if major is None or major < MIN_JAVA:
        found = f"Java {major}" if major else "an unknown Java version"
        raise UsageError(f"Spark needs Java {MIN_JAVA} or newer, {java} is {found}; {JRE_HINT}")
    return java


def check_pyspark() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise UsageError("kdissect spark needs pyspark >= 4.0: pip install 'kdissect[spark]'") from None


@contextlib.contextmanager
def _stderr_to(path: str) -> Iterator[None]:
    """Point file descriptor 2 at `path` while the block runs: the JVM started inside keeps
    writing there, this process gets its terminal back."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def _log4j_conf() -> str:
    return str(resources.files("kdissect.spark").joinpath("log4j2.properties"))


def active() -> Any:
    """The SparkSession already running in this process, if any."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    return SparkSession.getActiveSession()


def submit_args(driver_memory: str | None, fast_start: bool = False) -> str:
    """PYSPARK_SUBMIT_ARGS for the driver JVM pyspark launches: the driver's JVM options
    must be given to spark-submit (SparkSession.builder's config comes too late for them).
    fast_start: the JVM's quick compiler only: start-up takes a third of the time, but the
    JVM's part of a big job (caching, Parquet) runs about twice as slow; for small inputs."""
    opts = [f"-Dlog4j2.configurationFile=file:{_log4j_conf()}"]
    if fast_start:
        opts.append("-XX:TieredStopAtLevel=1")
    args = ["--driver-java-options", shlex.quote(" ".join(opts))]
    if driver_memory:
        args += ["--driver-memory", driver_memory]
    return " ".join([*args, "pyspark-shell"])


def start(master: str, conf: dict[str, str] | None = None, log_path: str | None = None,
          app_name: str = "kdissect", driver_memory: str | None = "4g", fast_start: bool = False) -> Any:
    """A SparkSession (the active one if there is one), started quietly."""
    check_pyspark()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", submit_args(driver_memory, fast_start))
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name)
    for k, v in {**QUIET_CONF, **(conf or {})}.items():
        builder = builder.config(k, v)
    ctx = _stderr_to(log_path) if log_path else contextlib.nullcontext()
    with ctx, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pyspark on pandas 3
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@dataclass(slots=True)
class Status:
    stage: int
    done: int
    total: int
    running: int


class Poller:
    """Calls `show(Status)` every `every` seconds with the active stages' task counts."""

    def __init__(self, spark: Any, show: Callable[[Status], None], every: float = 0.5) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.show = show
        self.every = every
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kdissect-progress", daemon=True)

    def __enter__(self) -> Poller:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=2)

    def _run(self) -> None:
        while not self.stop.wait(self.every):
            with contextlib.suppress(Exception):  # the JVM may be going away
                status = self._status()
                if status is not None:
                    self.show(status)

    def _status(self) -> Status | None:
        ids = list(self.tracker.getActiveStageIds())
        if not ids:
            return None
        infos = [i for i in (self.tracker.getStageInfo(s) for s in ids) if i is not None]
        if not infos:
            return None
        return Status(max(ids), sum(i.numCompletedTasks for i in infos), sum(i.numTasks for i in infos),
                      sum(i.numActiveTasks for i in infos))
