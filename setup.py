"""Builds the compiled core (kdissect/**/_*.pyx, see kdissect/accel.py) with Cython.

Everything else is in pyproject.toml. The extensions are optional: without a C compiler the
install goes on and kdissect runs its pure-Python path. KDISSECT_ASAN=1 builds them with
AddressSanitizer for the fuzz runs (docs/testing.md).
"""

import os
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).parent
SOURCES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "kdissect").rglob("_*.pyx"))
# Hostile input: every index is bounds-checked and C integer arithmetic raises on overflow, so
# a bad length becomes a Python exception (a diagnostic), never a read outside a buffer.
DIRECTIVES = {
    "language_level": 3,
    "boundscheck": True,
    "wraparound": False,
    "initializedcheck": True,
    "overflowcheck": True,
    "cdivision": False,
    "embedsignature": True,
}


def extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError:
        return []
    flags = ["-O2"]
    link: list[str] = []
    if os.environ.get("KDISSECT_ASAN") == "1":
        flags = ["-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer"]
        link = ["-fsanitize=address"]
    exts = [
        Extension(src[:-4].replace("/", "."), [src], extra_compile_args=flags, extra_link_args=link,
                  optional=os.environ.get("KDISSECT_REQUIRE_COMPILED") != "1")
        for src in SOURCES
    ]
    return cythonize(exts, compiler_directives=DIRECTIVES, quiet=True)


setup(ext_modules=extensions())
