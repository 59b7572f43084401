"""Syntax tree -> one Python closure, built once; running it reads only the fields it names.

Semantics (docs/filters.md): a key may have several values (array elements, repeated fields);
`==`, `<`, `contains`, `matches`, `in` hold when ANY value satisfies them; `a != x` holds when
`a` exists and NO value equals x (so `not a == x` and `a != x` differ only when a is absent).
"""

from __future__ import annotations

import operator
import re
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from time import process_time
from typing import Any

from kdissect.filter import names
from kdissect.filter.errors import SHOWN_TEXT, FilterError, UnknownNameError
from kdissect.filter.keys import ALIASES, KDISSECT, PRESENT, atoms, compile_key
from kdissect.filter.names import Vocabulary, suggestions
from kdissect.filter.nodes import (
    WORD_LIT,
    And,
    Compare,
    Exists,
    FieldRef,
    In,
    Literal,
    Node,
    Not,
    Or,
    Range,
)
from kdissect.filter.parser import field_ref, is_number, parse
from kdissect.model import Message
from kdissect.text import cut

Predicate = Callable[[Message], bool]
Test = Callable[[Any, "str | None"], bool]
_HEX_BYTES = re.compile(r"[0-9a-fA-F]{2}([:.-]?[0-9a-fA-F]{2})*\Z")
_ORDER = {"<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge}


def compile_filter(expr: str, protocols: tuple[str, ...] | None = None) -> Predicate:
    """Parse and compile a display filter: Message -> bool. Raises FilterError when bad."""
    return compile_node(parse(expr), expr, protocols)


def compile_node(node: Node, expr: str = "", protocols: tuple[str, ...] | None = None) -> Predicate:
    return _Compiler(expr, protocols).node(node)


def compile_field(name: str, protocols: tuple[str, ...] | None = None) -> Callable[[Message], list[Any]]:
    """The finder of one field name given alone (`export -e`), the name checked as a filter's
    names are; FilterError (UnknownNameError with the closest names) when it is not one."""
    return _Compiler(name, protocols).key(field_ref(name, name, 0), False)


@dataclass(frozen=True, slots=True)
class Value:
    """A literal, read every way a field value may need it."""

    text: str
    lower: str
    num: int | float | None
    boolean: bool | None
    raw: bytes  # the text as UTF-8
    hexbytes: bytes | None  # "0a:1b:2c" / "0a1b2c" as bytes, for byte fields

    @classmethod
    def of(cls, lit: Literal) -> Value:
        text = lit.text
        num = _number(text) if is_number(text) else None
        boolean = {"true": True, "false": False}.get(text.lower()) if lit.kind == WORD_LIT else None
        hexbytes = bytes.fromhex(re.sub(r"[:.-]", "", text)) if _HEX_BYTES.match(text) else None
        return cls(text, text.lower(), num, boolean, text.encode("utf-8", "surrogatepass"), hexbytes)


def _number(text: str) -> int | float:
    t = text.lower().lstrip("+")
    neg = t.startswith("-")
    body = t[1:] if neg else t
    if body.startswith("0x"):
        n = int(body, 16)
        return -n if neg else n
    try:
        return int(t)
    except ValueError:
        return float(t)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _bytes(v: Any) -> bytes | None:
    return bytes(v) if isinstance(v, (bytes, bytearray, memoryview)) else None


def equals(val: Value) -> Test:
    def eq(v: Any, d: str | None) -> bool:
        if v is PRESENT or v is None:
            return False
        if isinstance(v, bool):
            return val.boolean is not None and v == val.boolean or (val.num is not None and v == val.num)
        if _is_num(v):
            if val.num is not None:
                return bool(v == val.num)
            return d is not None and (d == val.text or d.lower() == val.lower)
        if isinstance(v, str):
            return v == val.text
        b = _bytes(v)
        return b is not None and (b == val.raw or b == val.hexbytes)

    return eq


def ordered(op: str, val: Value) -> Test:
    cmp = _ORDER[op]

    def test(v: Any, d: str | None) -> bool:
        if _is_num(v):
            return val.num is not None and bool(cmp(v, val.num))
        if isinstance(v, str):
            return bool(cmp(v, val.text))
        b = _bytes(v)
        return b is not None and bool(cmp(b, val.raw))

    return test


def contains(val: Value) -> Test:
    def test(v: Any, d: str | None) -> bool:
        if isinstance(v, str):
            return val.text in v
        b = _bytes(v)
        if b is not None:
            return val.raw in b or (val.hexbytes is not None and val.hexbytes in b)
        return d is not None and val.text in d

    return test


# A regular expression's search of one value may take exponential or quadratic time (`(a+)+$`,
# even `a+b`, against a long run of a's, a 32 KB client id): on the main thread a timer stops it
# after MATCH_TIME_S and MATCH_S_PER_CHAR a character of the value (a linear search takes
# 1-50 ns a character; re checks signals as it goes) and the value counts as not matching, and so
# do, without a search, values at least as long as the shortest one stopped; once MATCH_BUDGET_S
# of CPU time went on stopped searches, every value. (The CPU time they took, not their limits: re
# notices the timer only every few thousand start positions, so a search of a megabyte whose
# every start position scans the rest of the value runs seconds past its limit.) The budget is the
# filter's, shared by all its `matches`: five of them on ten long paths took five budgets. A
# one-line warning says so, once a regular expression. Other threads (the tui's) search without a
# timer.
MATCH_TIME_S = 0.05
MATCH_S_PER_CHAR = 100e-9
MATCH_BUDGET_S = 1.0
# A value longer than twice this is first searched a window of this many characters at a time, each
# window alone and under the value's limit, before it is searched whole (under its limit again):
# the probe finds a search whose every start position scans far (`p+q` against a run of p's)
# within a window's length of its limit, where the whole search notices the timer only seconds
# late on a value of megabytes. The probe's results are not the value's.
MATCH_WINDOW = 1 << 16


class _Stopped(Exception):
    """A search ran past its time."""


class _Clock:
    """The timer of searches (in CPU time, SIGVTALRM): its handler stops the one running, if any."""

    searching = False
    installed = False

    @classmethod
    def stop(cls, _sig: int, _frame: Any) -> None:
        if cls.searching:
            cls.searching = False
            raise _Stopped

    @classmethod
    def ready(cls) -> bool:
        """Whether searches can be timed: on the main thread, the handler installed."""
        if threading.current_thread() is not threading.main_thread():
            return False
        if not cls.installed:
            signal.signal(signal.SIGVTALRM, cls.stop)
            cls.installed = True
        return True


def _timed(search: Callable[..., Any], s: str, limit: float) -> bool:
    """search(s) under the timer (_Stopped past limit); a long value probed a window at a time
    first (MATCH_WINDOW)."""
    _Clock.searching = True
    signal.setitimer(signal.ITIMER_VIRTUAL, limit)
    try:
        if len(s) > 2 * MATCH_WINDOW:
            for at in range(0, len(s), MATCH_WINDOW):
                search(s, at, at + MATCH_WINDOW)
            signal.setitimer(signal.ITIMER_VIRTUAL, limit)
        return search(s) is not None
    finally:
        _Clock.searching = False
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)


def matches(val: Value, lit: Literal, expr: str, lost: list[float] | None = None) -> Test:
    """`lost`: the CPU time stopped searches took, shared by the filter's `matches` (a budget of its
    own when None)."""
    try:
        rx = re.compile(val.text)
    except (re.error, OverflowError) as e:  # OverflowError: a repetition count too large
        raise FilterError(f"bad regular expression ({e})", expr, lit.pos) from None
    except RecursionError:
        raise FilterError("bad regular expression (nested too deeply)", expr, lit.pos) from None
    search = rx.search
    spent = lost if lost is not None else [0.0]
    too_long = [sys.maxsize]  # values this long are not searched (0 once it was stopped)

    def found(s: str) -> bool:
        if len(s) >= too_long[0] or spent[0] >= MATCH_BUDGET_S:
            return False
        if not _Clock.ready():
            return search(s) is not None
        limit = MATCH_TIME_S + len(s) * MATCH_S_PER_CHAR
        began = process_time()
        try:
            return _timed(search, s, limit)
        except _Stopped:
            if too_long[0] == sys.maxsize:
                sys.stderr.write(f"kdissect: warning: the regular expression {val.text!r} took more than "
                                 f"{limit:.2g} s on a value of {len(s):,} characters: values as long count as "
                                 f"not matching (after {MATCH_BUDGET_S:g} s of such, every value)\n")
            spent[0] += process_time() - began
            too_long[0] = len(s)
            return False

    def test(v: Any, d: str | None) -> bool:
        if v is PRESENT or v is None:
            return False
        if isinstance(v, str):
            return found(v)
        b = _bytes(v)
        if b is not None:
            return found(b.decode("utf-8", "replace"))
        return found(str(v)) or (d is not None and found(d))

    return test


def in_range(lo: Value, hi: Value) -> Test:
    a, b = lo.num, hi.num

    def test(v: Any, d: str | None) -> bool:
        return _is_num(v) and a is not None and b is not None and a <= v <= b

    return test


def any_of(tests: list[Test]) -> Test:
    def test(v: Any, d: str | None) -> bool:
        return any(t(v, d) for t in tests)

    return test


def _chain(node: And | Or) -> list[Node]:
    """The operands of a chain of one operator, left to right: `a and b and c` parses as
    And(And(a, b), c), and is compiled as one list rather than closures nested as deep as the
    chain is long."""
    kind = type(node)
    right: list[Node] = []
    left: Node = node
    while isinstance(left, kind):
        right.append(left.right)
        left = left.left
    return [left, *reversed(right)]


class _Compiler:
    def __init__(self, expr: str, protocols: tuple[str, ...] | None) -> None:
        self.expr = expr
        self.protocols = protocols
        self.lost = [0.0]  # CPU time the stopped searches of all its `matches` took (MATCH_BUDGET_S)

    def node(self, node: Node) -> Predicate:
        if isinstance(node, (And, Or)):
            preds = [self.node(n) for n in _chain(node)]
            if len(preds) == 2:
                a, b = preds
                return (lambda m: a(m) and b(m)) if isinstance(node, And) else (lambda m: a(m) or b(m))
            if isinstance(node, And):
                return lambda m: all(p(m) for p in preds)
            return lambda m: any(p(m) for p in preds)
        if isinstance(node, Not):
            a = self.node(node.expr)
            return lambda m: not a(m)
        if isinstance(node, Exists):
            find = self.key(node.ref, False)
            return lambda m: bool(find(m))
        if isinstance(node, Compare):
            return self.compare(node)
        if isinstance(node, In):
            find = self.key(node.ref, True)
            tests = [self.item(node.ref, i) for i in node.items]
            return _any_value(find, any_of(tests))
        raise TypeError(f"not a filter node: {node!r}")

    def key(self, ref: FieldRef, valued: bool) -> Callable[[Message], list[Any]]:
        self.check_name(ref)
        find = compile_key(ref.name, self.expr, ref.pos, self.protocols)
        if valued and "." not in ref.name:
            raise FilterError(f"a protocol name ({cut(ref.name, SHOWN_TEXT)}) takes no value", self.expr, ref.pos)
        return find

    def check_name(self, ref: FieldRef) -> None:
        """A name no protocol has: an error with the closest known names."""
        name = ALIASES.get(ref.name, ref.name)
        proto = name.partition(".")[0]
        vocs = names.vocabularies(self.protocols)
        if proto == "kdissect" or proto not in vocs or vocs[proto].knows(name):
            return
        raise UnknownNameError(f'"{cut(ref.name, SHOWN_TEXT)}" is neither a field nor a protocol name.', self.expr, ref.pos,
                               suggestions(ref.name, _known_names(vocs)))

    def check_value(self, ref: FieldRef, lit: Literal) -> None:
        """A word compared with an enum key that names none of its values: an error with the
        closest names."""
        if is_number(lit.text) or ref.name.partition(".")[0] == "kdissect":
            return
        voc = names.vocabularies(self.protocols).get(ref.name.partition(".")[0])
        known = voc.values_of(ref.name) if voc is not None else None
        if not known or lit.text.lower() in {n.lower() for n in known}:
            return
        raise UnknownNameError(f'"{cut(lit.text, SHOWN_TEXT)}" is not a value of {ref.name}.', self.expr, lit.pos,
                               suggestions(lit.text, known))

    def compare(self, node: Compare) -> Predicate:
        find = self.key(node.ref, True)
        if node.op in ("==", "!="):
            self.check_value(node.ref, node.value)
        val = Value.of(node.value)
        op = node.op
        if op == "!=":
            eq = equals(val)
            return lambda m: _none_equal(find(m), eq)
        if op == "==":
            test = equals(val)
        elif op in _ORDER:
            test = ordered(op, val)
        elif op == "contains":
            test = contains(val)
        else:
            test = matches(val, node.value, self.expr, self.lost)
        return _any_value(find, test)

    def item(self, ref: FieldRef, item: Literal | Range) -> Test:
        if isinstance(item, Range):
            return in_range(Value.of(item.lo), Value.of(item.hi))
        self.check_value(ref, item)
        return equals(Value.of(item))


def _known_names(vocs: dict[str, Vocabulary]) -> list[str]:
    out = [f"kdissect.{k}" for k in KDISSECT] + list(ALIASES)
    for voc in vocs.values():
        out += [voc.name, *voc.all_names()]
    return out


def _any_value(find: Callable[[Message], list[Any]], test: Test) -> Predicate:
    def pred(m: Message) -> bool:
        return any(test(v, d) for v, d in atoms(find(m)))

    return pred


def _none_equal(nodes: list[Any], eq: Test) -> bool:
    vals = atoms(nodes)
    return bool(vals) and not any(eq(v, d) for v, d in vals)
