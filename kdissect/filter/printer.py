"""Syntax tree -> filter text that parses back to the same tree (canonical spelling, parentheses
only where precedence or the left-associative reading needs them)."""

from __future__ import annotations

from kdissect.filter.nodes import STRING_LIT, And, Compare, Exists, In, Literal, Node, Not, Or, Range

_QUOTE = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_LEVEL = {Or: 1, And: 2}


def to_text(node: Node) -> str:
    if isinstance(node, Or):
        return f"{_side(node.left, 1, False)} or {_side(node.right, 1, True)}"
    if isinstance(node, And):
        return f"{_side(node.left, 2, False)} and {_side(node.right, 2, True)}"
    if isinstance(node, Not):
        inner = to_text(node.expr)
        return f"not ({inner})" if isinstance(node.expr, (And, Or)) else f"not {inner}"
    if isinstance(node, Exists):
        return node.ref.name
    if isinstance(node, Compare):
        return f"{node.ref.name} {node.op} {literal_text(node.value)}"
    if isinstance(node, In):
        return f"{node.ref.name} in {{{', '.join(_item(i) for i in node.items)}}}"
    raise TypeError(f"not a filter node: {node!r}")


def _side(node: Node, level: int, right: bool) -> str:
    text = to_text(node)
    inner = _LEVEL.get(type(node), 3)
    if inner < level or (right and inner == level):
        return f"({text})"
    return text


def literal_text(lit: Literal) -> str:
    if lit.kind == STRING_LIT:
        return '"' + "".join(_char(c) for c in lit.text) + '"'
    return lit.text


def _char(c: str) -> str:
    if c in _QUOTE:
        return _QUOTE[c]
    if c.isprintable() or ord(c) > 0xFF:
        return c
    return f"\\x{ord(c):02x}"


def _item(item: Literal | Range) -> str:
    if isinstance(item, Range):
        return f"{item.lo.text}..{item.hi.text}"
    return literal_text(item)
