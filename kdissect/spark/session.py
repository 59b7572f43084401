"""Starting Spark quietly: a Java check first, the JVM's own stderr (log4j, launcher warnings,
Python worker tracebacks) into a log file, log level ERROR; Ctrl-C during a job that cancels
it cleanly; and Java exceptions from Hadoop's file systems as one line.

pyspark is imported only inside these functions.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
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
    # Arrow batches into the tasks of at most 64 MiB (whole captures, or packets by conversation)
    "spark.sql.execution.arrow.maxBytesPerBatch": str(64 << 20),
}


NO_FILE_SYSTEM = "no file system for {scheme}:// in this Spark"
UNREACHABLE = "cannot reach it"
DENIED = "permission denied"
# What a Java exception (or a subclass) means for a path; in a chain of causes the deepest one
# found here names the failure.
JAVA_FAILURES: dict[str, str] = {
    "java.io.FileNotFoundException": "no such file or directory",
    "org.apache.hadoop.fs.UnsupportedFileSystemException": NO_FILE_SYSTEM,
    "java.lang.ClassNotFoundException": NO_FILE_SYSTEM,
    "java.net.UnknownHostException": "unknown host",
    "java.net.ConnectException": UNREACHABLE,
    "java.net.NoRouteToHostException": UNREACHABLE,
    "java.net.SocketTimeoutException": UNREACHABLE,
    "org.apache.hadoop.net.ConnectTimeoutException": UNREACHABLE,
    "org.apache.hadoop.security.AccessControlException": DENIED,
    "java.nio.file.AccessDeniedException": DENIED,
}
# The Maven package of a file system's connector ({hadoop}: the Hadoop version Spark runs).
CONNECTORS = {
    "s3a": "org.apache.hadoop:hadoop-aws:{hadoop}",
    "abfs": "org.apache.hadoop:hadoop-azure:{hadoop}",
    "abfss": "org.apache.hadoop:hadoop-azure:{hadoop}",
    "wasb": "org.apache.hadoop:hadoop-azure:{hadoop}",
    "wasbs": "org.apache.hadoop:hadoop-azure:{hadoop}",
}
MAX_MESSAGE = 300


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


def check_can_start() -> None:
    """pyspark, and Java unless a session is already running: UsageError (one line) when missing."""
    check_pyspark()
    if active() is None:
        check_java()


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


# Local inputs of at most this many bytes start the JVM with its quick compiler only
# (fast_start): on 19 and 41 MB captures read by byte ranges, the optimizing compiler's threads
# took 9-12 CPU-seconds, more than all the JVM's work on the rows.
QUICK_START_BYTES = 64 << 20


def quick_start(input_bytes: int | None) -> bool:
    """Whether a job over inputs of this many bytes (None: not all known) starts fast."""
    return input_bytes is not None and input_bytes <= QUICK_START_BYTES


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
    # The executors' Python: --conf spark.pyspark.python (Spark's precedence), else PYSPARK_PYTHON,
    # else the driver's own (pyspark itself reads only the variable).
    python = (conf or {}).get("spark.pyspark.python")
    if python:
        os.environ["PYSPARK_PYTHON"] = python
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


# -- Ctrl-C ----------------------------------------------------------------------------------

CANCEL_EVERY = 0.2  # seconds


@contextlib.contextmanager
def cancel_on_interrupt(spark: Any) -> Iterator[Callable[[], None]]:
    """While the block runs, Ctrl-C makes it end with KeyboardInterrupt: at the `check()` it is
    given, or when the running Spark job returns cancelled. Another thread cancels Spark's jobs
    until the block has ended (a job being planned when Ctrl-C comes is cancelled once it
    starts). pyspark's own handler calls the JVM from inside the signal handler, in the middle
    of the call in progress, which breaks that connection and logs tracebacks. A second Ctrl-C
    interrupts at once. Outside the main thread the block runs as it is."""
    hit, ended = threading.Event(), threading.Event()

    def check() -> None:
        if hit.is_set():
            raise KeyboardInterrupt

    def handler(signum: int, frame: Any) -> None:
        check()
        hit.set()
        threading.Thread(target=_cancel_until, args=(spark, ended), name="kdissect-cancel", daemon=True).start()

    if threading.current_thread() is not threading.main_thread():
        yield check
        return
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield check
        check()
    except Exception:
        check()
        raise
    finally:
        ended.set()
        signal.signal(signal.SIGINT, previous)


def _cancel_until(spark: Any, ended: threading.Event) -> None:
    with contextlib.suppress(Exception):  # the JVM may be going away
        while not ended.is_set():
            spark.sparkContext.cancelAllJobs()
            ended.wait(CANCEL_EVERY)


# -- Java exceptions as one line ------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class JavaCause:
    name: str  # the exception's class
    kinds: frozenset[str]  # that class and its superclasses
    message: str


def java_causes(e: BaseException) -> list[JavaCause]:
    """The Java exception behind a py4j or pyspark exception and its causes, outermost first;
    [] for any other exception (or when the JVM is gone)."""
    t = getattr(e, "java_exception", None) or getattr(e, "_origin", None)
    out: list[JavaCause] = []
    with contextlib.suppress(Exception):
        while t is not None and len(out) < 16:
            kinds, cls = set(), t.getClass()
            while cls is not None:
                kinds.add(str(cls.getName()))
                cls = cls.getSuperclass()
            out.append(JavaCause(str(t.getClass().getName()), frozenset(kinds), str(t.getMessage() or "").strip()))
            t = t.getCause()
    return out


def path_failure(spark: Any, what: str, causes: list[JavaCause]) -> str:
    """One line for a Java exception about a path: what it means when JAVA_FAILURES knows it
    ("hdfs://nn/x: cannot reach it: Connection refused"), else its class and message."""
    for c in reversed(causes):
        meaning = next((JAVA_FAILURES[k] for k in c.kinds if k in JAVA_FAILURES), None)
        if meaning is None:
            continue
        scheme = what.split(":", 1)[0] if "://" in what else "file"
        line = f"{what}: {meaning.format(scheme=scheme)}: {_first_line(c.message)}"
        return line + _connector_hint(spark, scheme) if meaning == NO_FILE_SYSTEM else line
    last = causes[-1]
    return f"{what}: {last.name.rsplit('.', 1)[-1]}: {_first_line(last.message)}"


def _connector_hint(spark: Any, scheme: str) -> str:
    package = CONNECTORS.get(scheme)
    if package is None:
        return "; add the jar that holds it (--conf spark.jars=... or spark.jars.packages=...)"
    hadoop = "VERSION"
    with contextlib.suppress(Exception):
        hadoop = str(spark.sparkContext._jvm.org.apache.hadoop.util.VersionInfo.getVersion())
    return f"; add its connector: --conf spark.jars.packages={package.format(hadoop=hadoop)}"


def _first_line(text: str) -> str:
    return (text.splitlines() or [""])[0][:MAX_MESSAGE]


@contextlib.contextmanager
def hadoop_errors(spark: Any, what: str) -> Iterator[None]:
    """Java exceptions raised in the block (Hadoop file system calls about `what`) as one
    UsageError line (path_failure)."""
    try:
        yield
    except Exception as e:
        causes = java_causes(e)
        if not causes:
            raise
        raise UsageError(path_failure(spark, what, causes)) from None
