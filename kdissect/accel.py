"""The compiled core: C extensions built by Cython (setup.py), of two kinds.

- Twins: Cython sources beside the modules they speed up (kdissect/wire/_varint.pyx next to
  varint.py, ...), C-typed copies of the hottest pure-Python functions, which stay the
  reference: the same inputs give the same values, objects, diagnostics and exceptions. A
  module with a twin ends with `accel.bind(globals(), "<twin>", names)`, which puts the compiled
  functions in place of its own; the pure ones stay reachable through `pure()`, for the
  differential tests.
- Modules compiled as they are: the per-packet and per-message path (setup.py's MODULES), built
  from their unchanged Python source into an extension beside it, which Python's import system
  then prefers to the source.

The pure-Python path runs when the extensions were not built (no C compiler at install time)
or when KDISSECT_PURE=1 is set: then `prefer_source()` (called as the package loads) makes
every kdissect module load from its source, and `bind` binds no twin.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from importlib.machinery import EXTENSION_SUFFIXES, SOURCE_SUFFIXES, FileFinder, ModuleSpec, SourceFileLoader
from types import ModuleType
from typing import Any

PURE = os.environ.get("KDISSECT_PURE", "") not in ("", "0")
_pure: dict[tuple[str, str], Any] = {}  # (module, name) -> the pure function it replaced


def bind(namespace: dict[str, Any], twin: str, names: Iterable[str]) -> bool:
    """Replace `names` in a module's namespace by the functions of the compiled module `twin`
    ("kdissect.wire._varint"), unless it is absent or KDISSECT_PURE is set. Returns whether it
    did."""
    if PURE:
        return False
    try:
        module = importlib.import_module(twin)
    except ImportError:
        return False
    owner = namespace["__name__"]
    for name in names:
        _pure[(owner, name)] = namespace[name]
        namespace[name] = getattr(module, name)
    return True


def pure(module: str, name: str) -> Any:
    """The pure-Python `name` of `module`, whether or not a compiled twin replaced it."""
    owner = importlib.import_module(module)  # (binds the twin, if any, as it loads)
    return _pure.get((module, name)) or getattr(owner, name)


@contextlib.contextmanager
def pure_functions(module: str) -> Iterator[None]:
    """Inside: every function of `module` that a twin replaced is its pure self again, so that
    pure functions calling one another through the module run pure all the way down (the
    reference side of a differential test)."""
    owner = importlib.import_module(module)
    names = [name for mod, name in _pure if mod == module]
    bound = {name: getattr(owner, name) for name in names}
    try:
        for name in names:
            setattr(owner, name, _pure[(module, name)])
        yield
    finally:
        for name, fn in bound.items():
            setattr(owner, name, fn)


def compiled(module: str, name: str) -> Any | None:
    """The compiled `name` now in `module`, or None when the pure one runs."""
    return getattr(sys.modules[module], name) if (module, name) in _pure else None


def is_compiled(module: ModuleType) -> bool:
    """Whether a module was loaded from an extension (a twin, or a module compiled as it is)."""
    return str(getattr(module, "__file__", None) or "").endswith(tuple(EXTENSION_SUFFIXES))


def loaded() -> list[str]:
    """The compiled modules in use: twins and modules compiled as they are."""
    return sorted(name for name, module in list(sys.modules.items())
                  if name.startswith("kdissect.") and is_compiled(module))


class _SourceFirst:
    """A finder of kdissect's modules that looks for Python source only, ahead of the one that
    prefers an extension beside it (sys.meta_path)."""

    _finders: dict[str, FileFinder] = {}

    @classmethod
    def find_spec(cls, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if not name.startswith("kdissect.") or not path:
            return None
        for entry in path:
            finder = cls._finders.get(entry)
            if finder is None:
                finder = cls._finders[entry] = FileFinder(entry, (SourceFileLoader, SOURCE_SUFFIXES))
            spec = finder.find_spec(name, target)
            if spec is not None:
                return spec
        return None  # a twin has no source: the usual finders load it (bind never asks, when pure)


def prefer_source() -> None:
    """Load every kdissect module not yet loaded from its Python source (KDISSECT_PURE=1)."""
    if _SourceFirst not in sys.meta_path:
        sys.meta_path.insert(0, _SourceFirst)
