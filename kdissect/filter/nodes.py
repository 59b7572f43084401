"""The display-filter syntax tree: frozen values, compared by value (the round-trip tests rely on
that). Positions are kept out of equality: they serve error messages only."""

from __future__ import annotations

from dataclasses import dataclass, field

STRING_LIT = "string"  # a quoted string
WORD_LIT = "word"  # a bare word: a number, true/false, an enum name, an unquoted value

# Comparison operators, by their canonical spelling; the word forms map onto them.
COMPARE_OPS = ("==", "!=", "<", ">", "<=", ">=", "contains", "matches")
OP_ALIASES = {"eq": "==", "ne": "!=", "lt": "<", "gt": ">", "le": "<=", "ge": ">=", "~": "matches"}


@dataclass(frozen=True, slots=True)
class FieldRef:
    name: str  # the full key: "kafka.error_code", "kdissect.rtt_ms", "zookeeper"
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Literal:
    kind: str  # STRING_LIT or WORD_LIT
    text: str
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Range:
    """lo..hi inside a set, both numbers, bounds included."""

    lo: Literal
    hi: Literal


@dataclass(frozen=True, slots=True)
class Exists:
    ref: FieldRef


@dataclass(frozen=True, slots=True)
class Compare:
    op: str  # one of COMPARE_OPS
    ref: FieldRef
    value: Literal


@dataclass(frozen=True, slots=True)
class In:
    ref: FieldRef
    items: tuple[Literal | Range, ...]


@dataclass(frozen=True, slots=True)
class Not:
    expr: Node


@dataclass(frozen=True, slots=True)
class And:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Or:
    left: Node
    right: Node


Node = Exists | Compare | In | Not | And | Or
