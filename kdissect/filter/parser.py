"""Display-filter parser: tokens -> syntax tree, by recursive descent.

    expr     := and_expr (("or" | "||") and_expr)*
    and_expr := unary (("and" | "&&") unary)*
    unary    := ("not" | "!") unary | "(" expr ")" | test
    test     := FIELD [ CMP value | "contains" value | "matches" value | ["not"] "in" set ]
    set      := "{" item ([","] item)* "}"      item := value | NUMBER..NUMBER
    value    := STRING | WORD

`and` binds tighter than `or`; both associate to the left. `a not in {...}` is `not a in {...}`.
"""

from __future__ import annotations

import re

from kdissect.filter.errors import SHOWN_TEXT, FilterError
from kdissect.filter.lexer import (
    COMMA,
    END,
    LBRACE,
    LPAREN,
    OP,
    RBRACE,
    RPAREN,
    STRING,
    WORD,
    Token,
    tokenize,
)
from kdissect.filter.nodes import (
    COMPARE_OPS,
    OP_ALIASES,
    STRING_LIT,
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
from kdissect.text import cut

KEYWORDS = frozenset({"and", "or", "not", "in", "contains", "matches", "eq", "ne", "lt", "gt", "le", "ge"})
FIELD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*\Z")
NUMBER_RE = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|\d+(\.\d*)?([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?)\Z")
_OR, _AND, _NOT = ("or", "||"), ("and", "&&"), ("not", "!")
# `not`s and parentheses inside one another: the parser, the compiler and the compiled filter
# recurse once for each (a chain of `and`s or `or`s is a loop, however long).
MAX_NESTING = 100


def parse(expr: str) -> Node:
    """The syntax tree of a display filter; FilterError (with the position) when it is bad."""
    p = _Parser(expr, tokenize(expr))
    if p.peek().kind == END:
        raise FilterError("empty filter", expr, 0)
    node = p.expr()
    tok = p.peek()
    if tok.kind != END:
        raise FilterError(f"unexpected {_describe(tok)}", expr, tok.pos)
    return node


def is_number(text: str) -> bool:
    return NUMBER_RE.match(text) is not None


def field_ref(text: str, src: str, pos: int) -> FieldRef:
    """A field name written at `pos` of `src`; FilterError when it cannot be one."""
    if not FIELD_RE.match(text) or is_number(text):
        raise FilterError(f"{cut(text, SHOWN_TEXT)!r} is not a field name", src, pos)
    return FieldRef(text, pos)


def _describe(tok: Token) -> str:
    if tok.kind == END:
        return "end of filter"
    if tok.kind == STRING:
        return "string"
    return repr(cut(tok.text, SHOWN_TEXT))


class _Parser:
    def __init__(self, expr: str, tokens: list[Token]) -> None:
        self.src = expr
        self.toks = tokens
        self.i = 0
        self.nesting = 0

    def peek(self) -> Token:
        return self.toks[self.i]

    def next(self) -> Token:
        tok = self.toks[self.i]
        if tok.kind != END:
            self.i += 1
        return tok

    def at(self, words: tuple[str, ...]) -> bool:
        tok = self.peek()
        return tok.kind in (WORD, OP) and tok.text in words

    def fail(self, what: str, tok: Token) -> FilterError:
        return FilterError(f"expected {what}", self.src, tok.pos)

    def expr(self) -> Node:
        node = self.and_expr()
        while self.at(_OR):
            self.next()
            node = Or(node, self.and_expr())
        return node

    def and_expr(self) -> Node:
        node = self.unary()
        while self.at(_AND):
            self.next()
            node = And(node, self.unary())
        return node

    def unary(self) -> Node:
        if not self.at(_NOT) and self.peek().kind != LPAREN:
            return self.test()
        tok = self.next()
        if self.nesting == MAX_NESTING:
            raise FilterError(f"nested deeper than {MAX_NESTING} levels", self.src, tok.pos)
        self.nesting += 1
        if tok.kind == LPAREN:
            node = self.expr()
            if self.peek().kind != RPAREN:
                raise self.fail("')'", self.peek())
            self.next()
        else:
            node = Not(self.unary())
        self.nesting -= 1
        return node

    def test(self) -> Node:
        ref = self.field()
        tok = self.peek()
        if tok.kind == OP and tok.text in ("==", "!=", "<", ">", "<=", ">=", "~") or (
                tok.kind == WORD and (tok.text in OP_ALIASES or tok.text in COMPARE_OPS)):
            self.next()
            return Compare(OP_ALIASES.get(tok.text, tok.text), ref, self.value())
        if tok.kind == WORD and tok.text == "in":
            self.next()
            return In(ref, self.set())
        if tok.kind == WORD and tok.text == "not" and self.toks[self.i + 1].text == "in":
            self.i += 2
            return Not(In(ref, self.set()))
        return Exists(ref)

    def field(self) -> FieldRef:
        tok = self.peek()
        if tok.kind != WORD or tok.text in KEYWORDS:
            raise self.fail("a field name", tok)
        ref = field_ref(tok.text, self.src, tok.pos)
        self.next()
        return ref

    def value(self) -> Literal:
        tok = self.peek()
        if tok.kind == STRING:
            self.next()
            return Literal(STRING_LIT, tok.text, tok.pos)
        if tok.kind == WORD and tok.text not in KEYWORDS:
            self.next()
            return Literal(WORD_LIT, tok.text, tok.pos)
        raise self.fail("a value", tok)

    def set(self) -> tuple[Literal | Range, ...]:
        if self.peek().kind != LBRACE:
            raise self.fail("'{'", self.peek())
        self.next()
        items: list[Literal | Range] = []
        while self.peek().kind != RBRACE:
            if items and self.peek().kind == COMMA:
                self.next()
            if self.peek().kind in (RBRACE, END) and items:
                break
            items.append(self.item())
        if self.peek().kind != RBRACE:
            raise self.fail("'}'", self.peek())
        if not items:
            raise self.fail("a value", self.peek())
        self.next()
        return tuple(items)

    def item(self) -> Literal | Range:
        lit = self.value()
        if lit.kind == WORD_LIT and ".." in lit.text:
            lo, _, hi = lit.text.partition("..")
            if is_number(lo) and is_number(hi):
                return Range(Literal(WORD_LIT, lo, lit.pos), Literal(WORD_LIT, hi, lit.pos + len(lo) + 2))
        return lit
