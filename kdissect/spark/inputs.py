"""Finding the captures: files, directories (searched recursively for capture files) and globs.

`hadoop_files` lists through Spark's Hadoop file systems from the driver (hdfs://, s3a://,
file://, ...: whatever the cluster is configured for) and reads no capture; `python_files`
lists local paths with glob, and URLs with fsspec when it is installed (the data source plans
its partitions in Python, without the JVM).
"""

from __future__ import annotations

import glob
import os
from typing import Any

from kdissect.errors import UsageError

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp", ".pcap.gz", ".pcapng.gz")
GLOB_CHARS = frozenset("*?[{")

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


# -- through Spark's Hadoop file systems (the job) -----------------------------------------

def hadoop_files(spark: Any, inputs: list[str] | tuple[str, ...]) -> FileList:
    jvm = spark.sparkContext._jvm
    hconf = spark.sparkContext._jsc.hadoopConfiguration()
    out: FileList = []
    for inp in inputs:
        path = jvm.org.apache.hadoop.fs.Path(inp)
        fs = path.getFileSystem(hconf)
        statuses = fs.globStatus(path)
        if not statuses:
            raise UsageError(f"no such file or directory: {inp}")
        for st in sorted(statuses, key=lambda s: s.getPath().toString()):
            if st.isDirectory():
                out += _hadoop_tree(fs, st.getPath())
            else:
                out.append((_local_name(st.getPath().toString()), st.getLen()))
    return _dedupe(out)


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


def _local_files(inp: str) -> FileList:
    paths = sorted(glob.glob(inp, recursive=True)) if GLOB_CHARS & set(inp) else [inp]
    if not paths or not os.path.exists(paths[0]):
        raise UsageError(f"no such file or directory: {inp}")
    out: FileList = []
    for p in paths:
        if os.path.isdir(p):
            for top, dirs, names in os.walk(p):
                dirs.sort()
                out += [(os.path.abspath(os.path.join(top, n)), os.path.getsize(os.path.join(top, n)))
                        for n in sorted(names) if is_capture_name(n)]
        else:
            out.append((os.path.abspath(p), os.path.getsize(p)))
    return out


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
