"""Which field names exist: each protocol's key table (`Dissector.field_keys()`), its aliases
(Wireshark's names, `field_aliases()`) and the symbolic names of its enum keys
(`value_names(path)`), as the display-filter layer needs them.

A protocol without a key table (field_keys() is None) accepts every name below it. With one, a
name exists when it is a key of the table (with the `_name`, `_text` and `.value` spellings of
docs/filters.md), matches one of its `*` patterns, lies below one of its `bytes` keys (decoders
break some out further), or is an info fact every protocol sets. The two methods are
part of the Dissector interface (dissect/base.py): a protocol without aliases returns none, one
without enum tables None for every key.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

# Info facts every dissector sets (docs/architecture.md), and the raw field the per-PDU boundary
# appends to a message that breaks.
COMMON = frozenset({"op", "op_code", "version", "corr", "error", "error_code", "undecoded"})
OPEN_TYPES = frozenset({"bytes", "raw"})
Aliases = dict[str, tuple[str, tuple[str, ...]]]


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """One protocol's names: `exact` (full keys), `patterns` (keys with `*`), `open` (keys whose
    inside is not tabled), `aliases` and the enum names of its keys."""

    name: str
    exact: frozenset[str] | None  # None: no key table, every name accepted
    patterns: tuple[str, ...]
    open: tuple[str, ...]
    aliases: Aliases
    enum_names: Callable[[str], Iterable[str] | None] | None

    def knows(self, key: str) -> bool:
        if self.exact is None or key == self.name or key in self.exact or key in self.aliases:
            return True
        path = key[len(self.name) + 1 :]
        if path in COMMON:
            return True
        for base in _bases(key):
            if base in self.exact or any(fnmatch.fnmatchcase(base, p) for p in self.patterns):
                return True
        return any(key.startswith(o + ".") for o in self.open)

    def all_names(self) -> list[str]:
        return sorted({*(self.exact or ()), *self.aliases})

    def values_of(self, key: str) -> tuple[str, ...] | None:
        """The enum names a key compares with, when the tables know them (an alias: its
        targets' names, when they all have the same)."""
        if self.enum_names is None or self.exact is None:
            return None
        get = self.enum_names
        if key in self.aliases:
            found = {_names(get, _target_path(t)) for t in self.aliases[key][1]}
            return found.pop() if len(found) == 1 else None
        return _names(get, key[len(self.name) + 1 :])


def _names(get: Callable[[str], Iterable[str] | None], path: str) -> tuple[str, ...] | None:
    names = get(path)
    return tuple(names) if names is not None else None


def _target_path(target: str) -> str:
    return target[5:] if target.startswith("info:") else target


def _bases(key: str) -> tuple[str, ...]:
    """The key and, for the `_name`, `_text` and `.value` spellings, the key they are spelled from."""
    out = [key]
    if key.endswith(("_name", "_text")):
        out.append(key[:-5])
    if key.endswith(".value"):
        out.append(key[:-6])
    return tuple(out)


_CACHE: dict[int, tuple[Any, Vocabulary]] = {}


def vocabulary(dissector: Any) -> Vocabulary:
    """A dissector's names, built once per dissector object."""
    hit = _CACHE.get(id(dissector))
    if hit is not None and hit[0] is dissector:
        return hit[1]
    voc = _build(dissector)
    _CACHE[id(dissector)] = (dissector, voc)
    return voc


def _build(d: Any) -> Vocabulary:
    keys = d.field_keys()
    aliases: Aliases = dict(d.field_aliases())
    if keys is None:
        return Vocabulary(d.name, None, (), (), aliases, None)
    names = [k.key for k in keys if k.type != "alias"]
    return Vocabulary(
        d.name,
        frozenset(n for n in names if "*" not in n),
        tuple(n for n in names if "*" in n),
        tuple(k.key for k in keys if k.type in OPEN_TYPES),
        aliases,
        d.value_names,
    )


def vocabularies(protocols: Iterable[str] | None = None) -> dict[str, Vocabulary]:
    """The vocabulary of each registered protocol (of those named, when given)."""
    from kdissect import protocols as registry

    wanted = set(protocols) if protocols is not None else None
    return {d.name: vocabulary(d) for d in registry.dissectors() if wanted is None or d.name in wanted}


def suggestions(word: str, candidates: Iterable[str]) -> list[str]:
    """The closest candidate to a misspelt word (difflib's ratio; case ignored when nothing is
    close as written); none when nothing is near."""
    pool = list(dict.fromkeys(candidates))
    found = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if not found:
        lower = {c.lower(): c for c in pool}
        found = [lower[c] for c in difflib.get_close_matches(word.lower(), list(lower), n=1, cutoff=0.5)]
    return found
