"""Builds the compiled core with Cython (see kdissect/accel.py and docs/architecture.md).

Two kinds of extension:
- twins: the Cython sources kdissect/**/_*.pyx, C-typed copies of the hottest functions;
- the modules of MODULES, compiled as they are from their Python source: the per-packet and
  per-message path, whose cost is the interpreter's, spread over many small functions.

Everything else is in pyproject.toml. The extensions are optional: without a C compiler the
install goes on and kdissect runs its pure-Python path. KDISSECT_ASAN=1 builds them with
AddressSanitizer for the fuzz runs (docs/testing.md).
"""

import os
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent
TWINS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "kdissect").rglob("_*.pyx"))
# Compiled from their Python source, unchanged. Every recursion in them is bounded by the
# input's structure or an explicit depth limit (a compiled function does not count towards
# Python's recursion limit): tests/test_compiled_modules.py checks both. A module is listed
# when compiling it makes a command measurably faster (docs/benchmarks.md); the live capture
# (capture/live, ring), -w (pipeline/packets, capture/pcapwriter), -T fields and Spark's range
# reader were tried and gained nothing.
MODULES = (
    "capture/l2l4", "capture/pcapfile",
    "stream/flow", "stream/reassembly", "stream/tracker",
    "framing/length_prefixed",
    "pipeline/core", "pipeline/counters", "pipeline/decoder", "pipeline/decoding", "pipeline/detect",
    "pipeline/output",
    "dissect/base", "dissect/matcher",
    "model", "diagnostics", "text",
    "wire/reader", "wire/varint",
    "kafka/body", "kafka/conversation", "kafka/dissector", "kafka/headers", "kafka/ops", "kafka/plan",
    "kafka/records", "kafka/records_common", "kafka/records_legacy", "kafka/records_v2", "kafka/summary",
    "kafka/topicids",
    "zookeeper/dissector", "zookeeper/framer", "zookeeper/jute", "zookeeper/multi", "zookeeper/packets", "zookeeper/probe",
    "zookeeper/session", "zookeeper/summary",
    "pulsar/commands", "pulsar/dissector", "pulsar/match", "pulsar/payload", "pulsar/protowire",
    "pulsar/summary",
    "rocketmq/dissector", "rocketmq/extfields", "rocketmq/header", "rocketmq/message", "rocketmq/probe", "rocketmq/summary",
    "render/text", "render/timecol",
    "analysis/conversations", "analysis/expected", "analysis/sketch", "analysis/stats", "analysis/throughput",
    "expert/engine", "expert/series", "expert/tree",
    "expert/analyzers/brokers", "expert/analyzers/consumers", "expert/analyzers/network",
    "expert/analyzers/producers", "expert/analyzers/pulsar", "expert/analyzers/rocketmq",
    "expert/analyzers/traffic", "expert/analyzers/zookeeper",
    "filter/evaluator", "filter/keys",
    "tls/connection", "tls/crypto", "tls/handshake",
    "render/positions",
)
# Hostile input: every index is bounds-checked and C integer arithmetic raises on overflow, so
# a bad length becomes a Python exception (a diagnostic), never a read outside a buffer.
TWIN_DIRECTIVES = {
    "language_level": 3,
    "boundscheck": True,
    "wraparound": False,
    "initializedcheck": True,
    "overflowcheck": True,
    "cdivision": False,
    "embedsignature": True,
}
# A module compiled as it is keeps Python's semantics: annotations are not C types (an `int`
# stays unbounded), functions are ordinary bound functions (introspection, pickling by name).
MODULE_DIRECTIVES = {"language_level": 3, "annotation_typing": False, "binding": True}


class BuildInParallel(build_ext):
    """Compiles the C files on every core."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1


def extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError:
        return []
    flags = ["-O2", "-g0"]  # no debug information: a fifth of the size
    link: list[str] = []
    if os.environ.get("KDISSECT_ASAN") == "1":
        flags = ["-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer"]
        link = ["-fsanitize=address"]
    optional = os.environ.get("KDISSECT_REQUIRE_COMPILED") != "1"

    def ext(src: str) -> Extension:
        name = src.rsplit(".", 1)[0].replace("/", ".")
        return Extension(name, [src], extra_compile_args=flags, extra_link_args=link, optional=optional)

    threads = os.cpu_count() or 1
    return (cythonize([ext(src) for src in TWINS], compiler_directives=TWIN_DIRECTIVES, quiet=True,
                      nthreads=threads)
            + cythonize([ext(f"kdissect/{m}.py") for m in MODULES], compiler_directives=MODULE_DIRECTIVES,
                        quiet=True, nthreads=threads))


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildInParallel})
