"""The one error a display filter raises: what is wrong, where, with a caret under the spot."""

from __future__ import annotations

from kdissect.errors import UsageError

# The CLI prints "kdissect: error: <message>"; the caret line is indented to match.
CLI_PREFIX = "kdissect: error: "
# Characters of the expression an error shows around its spot, and of a name or word it quotes:
# a longer one is cut, with "…" where it is cut (a filter is user input, of any length).
SHOWN_EXPR = 160
SHOWN_TEXT = 80


def _around(expr: str, pos: int) -> tuple[str, int]:
    """The part of expr an error shows (at most SHOWN_EXPR characters around pos, with "…" at
    either side cut off) and pos within it."""
    if len(expr) <= SHOWN_EXPR:
        return expr, pos
    start = max(0, min(pos - SHOWN_EXPR // 2, len(expr) - SHOWN_EXPR))
    end = start + SHOWN_EXPR
    lead = "…" if start else ""
    return lead + expr[start:end] + ("…" if end < len(expr) else ""), pos - start + len(lead)


class FilterError(UsageError):
    """A display filter that does not parse or names something unknown."""

    def __init__(self, message: str, expr: str, pos: int, prefix: str = CLI_PREFIX) -> None:
        self.reason = message
        self.expr = expr
        self.pos = max(0, min(pos, len(expr)))
        head = f"filter: {message} at column {self.pos + 1}: "
        shown, at = _around(expr, self.pos)
        caret = " " * (len(prefix) + len(head) + at) + "^"
        super().__init__(f"{head}{shown}\n{caret}")


class UnknownNameError(FilterError):
    """A field name no protocol has, or a name no value of an enum field has: an error block as
    tshark writes it (what is unknown, the expression, a caret under it, the closest names)."""

    def __init__(self, message: str, expr: str, pos: int, close: list[str]) -> None:
        super().__init__(message, expr, pos)
        self.close = close
        shown, at = _around(expr, self.pos)
        lines = [f"-Y: {message}", shown, " " * at + "^"]
        if close:
            lines.append(f"did you mean {close[0]}?")
        self.args = ("\n".join(lines),)
