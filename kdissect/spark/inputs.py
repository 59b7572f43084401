"""Finding the captures: files, directories (searched recursively for capture files) and globs.

`hadoop_files` lists through Spark's Hadoop file systems from the driver (hdfs://, s3a://,
file://, ...: whatever the cluster is configured for) and reads no capture; `python_files`
lists local paths with glob, and URLs with fsspec when it is installed (the data source plans
its partitions in Python, without the JVM). `check_local` lists the local inputs before Spark
starts, so that a missing or unreadable capture is an error at once.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable
from typing import Any

from kdissect.errors import UsageError
from kdissect.spark.session import hadoop_errors

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp", ".pcap.gz", ".pcapng.gz")
GLOB_CHARS = frozenset("*?[{")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")  # one letter would be a Windows drive
_BRACES = re.compile(r"\{([^{}]*)\}")

FileList = list[tuple[str, int]]


def is_capture_name(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return not base.startswith((".", "_")) and base.lower().endswith(CAPTURE_SUFFIXES)


def _dedupe(files: FileList) -> FileList:
    seen: set[str] = set()
    out: FileList = []
    for path, size in files:
        if path not in seen:
            seen.add(path)
            out.append((path, size))
    return out


def _local_name(uri: str) -> str:
    """file:/a/b -> /a/b (local captures are named as plain paths); other URIs unchanged."""
    if uri.startswith("file:"):
        rest = uri[5:]
        return "/" + rest.lstrip("/") if rest.startswith("/") else rest
    return uri


def driver_path(uri: str, master: str) -> str | None:
    """The local path behind an input or output that the driver can check itself: a file:
    URL's path, or a plain path when Spark runs locally (on a cluster a plain path names the
    cluster's default file system, HDFS for instance); None for other URLs."""
    m = _SCHEME.match(uri)
    if m is None:
        return uri if master.startswith("local") else None
    return _local_name(uri) if m.group(1).lower() == "file" else None


def no_captures(inp: str) -> UsageError:
    return UsageError(f"{inp}: no captures there (files named *{', *'.join(CAPTURE_SUFFIXES)})")


def check_local(inputs: list[str] | tuple[str, ...], master: str) -> int | None:
    """Check the inputs the driver can see (driver_path) before Spark starts: each must exist,
    be readable and name at least one capture; UsageError (one line) at the first problem.
    The bytes of their captures when the driver sees all the inputs, else None."""
    files: FileList = []
    seen_all = True
    for inp in inputs:
        local = driver_path(inp, master)
        if local is None:
            seen_all = False
            continue
        found = _local_files(local)
        if not found:
            raise no_captures(inp)
        files += found
    return sum(size for _, size in _dedupe(files)) if seen_all else None


# -- through Spark's Hadoop file systems (the job) -----------------------------------------

def hadoop_files(spark: Any, inputs: list[str] | tuple[str, ...]) -> FileList:
    jvm = spark.sparkContext._jvm
    hconf = spark.sparkContext._jsc.hadoopConfiguration()
    out: FileList = []
    for inp in inputs:
        with hadoop_errors(spark, inp):
            found = _hadoop_input(jvm.org.apache.hadoop.fs.Path(inp), hconf)
        if found is None:
            raise UsageError(f"no such file or directory: {inp}")
        if not found:
            raise no_captures(inp)
        out += found
    return _dedupe(out)


def hadoop_head(spark: Any, uri: str) -> Callable[[int, int], bytes]:
    """A reader of (offset, n) bytes of a file through Spark's Hadoop file systems (the
    driver's view of the head of a capture it reads no more of)."""
    jvm = spark.sparkContext._jvm
    hconf = spark.sparkContext._jsc.hadoopConfiguration()

    def head(offset: int, n: int) -> bytes:
        with hadoop_errors(spark, uri):
            path = jvm.org.apache.hadoop.fs.Path(uri)
            stream = path.getFileSystem(hconf).open(path)
            try:
                stream.seek(offset)
                return bytes(stream.readNBytes(n))
            finally:
                stream.close()
    return head


def _hadoop_input(path: Any, hconf: Any) -> FileList | None:
    fs = path.getFileSystem(hconf)
    statuses = fs.globStatus(path)
    if not statuses:
        return None
    found: FileList = []
    for st in sorted(statuses, key=lambda s: s.getPath().toString()):
        if st.isDirectory():
            found += _hadoop_tree(fs, st.getPath())
        else:
            found.append((_local_name(st.getPath().toString()), st.getLen()))
    return found


def _hadoop_tree(fs: Any, root: Any) -> FileList:
    found: FileList = []
    it = fs.listFiles(root, True)
    while it.hasNext():
        st = it.next()
        name = st.getPath().toString()
        if is_capture_name(name):
            found.append((_local_name(name), st.getLen()))
    return sorted(found)


# -- in Python (the data source) -----------------------------------------------------------

def python_files(inputs: list[str] | tuple[str, ...]) -> FileList:
    out: FileList = []
    for inp in inputs:
        if "://" in inp and not inp.startswith("file://"):
            out += _fsspec_files(inp)
        else:
            out += _local_files(inp[len("file://"):] if inp.startswith("file://") else inp)
    return _dedupe(out)


def braces(pattern: str) -> list[str]:
    """'a/{x,y}/*.pcap' -> ['a/x/*.pcap', 'a/y/*.pcap'] (Hadoop's glob has braces, Python's not)."""
    m = _BRACES.search(pattern)
    if m is None:
        return [pattern]
    head, tail = pattern[:m.start()], pattern[m.end():]
    return [p for alt in m.group(1).split(",") for p in braces(head + alt + tail)]


def _expanded(inp: str) -> list[str]:
    if not GLOB_CHARS & set(inp):
        return [inp] if os.path.lexists(inp) else []
    return sorted({p for pat in braces(inp) for p in glob.glob(pat, recursive=True)})


def _local_files(inp: str) -> FileList:
    """The captures a local input names, each checked readable; UsageError otherwise."""
    paths = _expanded(inp)
    if not paths:
        raise UsageError(f"no such file or directory: {inp}")
    out: FileList = []
    for p in paths:
        if os.path.isdir(p):
            out += _local_tree(p)
        else:
            out.append(_readable(p))
    return out


def _local_tree(root: str) -> FileList:
    def fail(e: OSError) -> None:
        raise UsageError(f"cannot list {e.filename}: {e.strerror}") from None

    out: FileList = []
    for top, dirs, names in os.walk(root, onerror=fail):
        dirs.sort()
        out += [_readable(os.path.join(top, n)) for n in sorted(names) if is_capture_name(n)]
    return out


def _readable(path: str) -> tuple[str, int]:
    """(absolute path, size) of a file this process may read."""
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    if not os.access(path, os.R_OK):
        raise UsageError(f"cannot read {path}: permission denied")
    return os.path.abspath(path), size


def _fsspec_files(inp: str) -> FileList:
    try:
        import fsspec
    except ImportError:
        raise UsageError(f"{inp}: URLs need fsspec here (pip install fsspec), or use `kdissect spark`") from None
    fs, _, paths = fsspec.get_fs_token_paths(inp)
    proto = inp.split("://", 1)[0]
    out: FileList = []
    for p in paths:
        if fs.isdir(p):
            out += [(f"{proto}://{f}", int(fs.size(f))) for f in sorted(fs.find(p)) if is_capture_name(f)]
        else:
            out.append((f"{proto}://{p}", int(fs.size(p))))
    if not out:
        raise UsageError(f"no such file or directory: {inp}")
    return out
