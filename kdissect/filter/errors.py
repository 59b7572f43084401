"""The one error a display filter raises: what is wrong, where, with a caret under the spot."""

from __future__ import annotations

from kdissect.errors import UsageError

# The CLI prints "kdissect: error: <message>"; the caret line is indented to match.
CLI_PREFIX = "kdissect: error: "


class FilterError(UsageError):
    """A display filter that does not parse or names something unknown."""

    def __init__(self, message: str, expr: str, pos: int, prefix: str = CLI_PREFIX) -> None:
        self.reason = message
        self.expr = expr
        self.pos = max(0, min(pos, len(expr)))
        head = f"filter: {message} at column {self.pos + 1}: "
        caret = " " * (len(prefix) + len(head) + self.pos) + "^"
        super().__init__(f"{head}{expr}\n{caret}")


class UnknownNameError(FilterError):
    """A field name no protocol has, or a name no value of an enum field has: an error block as
    tshark writes it (what is unknown, the expression, a caret under it, the closest names)."""

    def __init__(self, message: str, expr: str, pos: int, close: list[str]) -> None:
        super().__init__(message, expr, pos)
        self.close = close
        lines = [f"-Y: {message}", self.expr, " " * self.pos + "^"]
        if close:
            lines.append(f"did you mean {close[0]}?")
        self.args = ("\n".join(lines),)
