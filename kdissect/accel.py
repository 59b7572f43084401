"""The compiled core: C extensions built by Cython from the `_*.pyx` sources beside the
modules they speed up (kdissect/wire/_varint.pyx next to varint.py, ...).

Each compiled module is a twin of pure-Python functions that stay the reference: the same
inputs give the same values, objects, diagnostics and exceptions. A module with a twin ends
with `accel.bind(globals(), "<twin>", names)`, which puts the compiled functions in place of
its own; the pure ones stay reachable through `pure()`, for the differential tests. The pure
path runs when an extension was not built (no C compiler at install time) or when
KDISSECT_PURE=1 is set.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from typing import Any

PURE = os.environ.get("KDISSECT_PURE", "") not in ("", "0")
_bound: dict[str, list[str]] = {}  # compiled module -> the names it replaced
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
    names = list(names)
    for name in names:
        _pure[(owner, name)] = namespace[name]
        namespace[name] = getattr(module, name)
    _bound[twin] = names
    return True


def pure(module: str, name: str) -> Any:
    """The pure-Python `name` of `module`, whether or not a compiled twin replaced it."""
    owner = importlib.import_module(module)  # (binds the twin, if any, as it loads)
    return _pure.get((module, name)) or getattr(owner, name)


def compiled(module: str, name: str) -> Any | None:
    """The compiled `name` now in `module`, or None when the pure one runs."""
    return getattr(sys.modules[module], name) if (module, name) in _pure else None


def loaded() -> list[str]:
    """The compiled modules in use."""
    return sorted(_bound)
