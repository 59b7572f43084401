"""Display-filter tokens: words, quoted strings, operators and punctuation.

A word is a run of letters, digits and `_ . : / - + @ [ ]`: field keys (`kafka.error_code`),
numbers (`-1`, `0x1f`, `2.5`), bare values (`NOT_LEADER_OR_FOLLOWER`, `/brokers/ids`,
`127.0.0.1:9092`, `[::1]:2181`, `1..10`) and the keyword operators (`and`, `contains`, ...). Strings are
double-quoted with backslash escapes, or raw (`r"\\d+"`: backslashes kept).
"""

from __future__ import annotations

from dataclasses import dataclass

from kdissect.filter.errors import FilterError

WORD, STRING, OP, LPAREN, RPAREN, LBRACE, RBRACE, COMMA, END = (
    "word", "string", "op", "(", ")", "{", "}", ",", "end")

WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:/-+@[]")
# Longest first, so that "==" wins over "=" and "<=" over "<".
SYMBOLS = ("==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "~")
PUNCT = {"(": LPAREN, ")": RPAREN, "{": LBRACE, "}": RBRACE, ",": COMMA}
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'", "a": "\a",
           "b": "\b", "f": "\f", "v": "\v"}


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str  # the value: a word, a decoded string, an operator symbol
    pos: int  # 0-based offset in the expression


def tokenize(expr: str) -> list[Token]:
    out: list[Token] = []
    i, n = 0, len(expr)
    while i < n:
        c = expr[i]
        if c.isspace():
            i += 1
        elif c in PUNCT:
            out.append(Token(PUNCT[c], c, i))
            i += 1
        elif c == '"' or (c == "r" and expr.startswith('r"', i)):
            tok, i = _string(expr, i)
            out.append(tok)
        elif c in WORD_CHARS:
            j = i
            while j < n and expr[j] in WORD_CHARS:
                j += 1
            out.append(Token(WORD, expr[i:j], i))
            i = j
        else:
            sym = next((s for s in SYMBOLS if expr.startswith(s, i)), None)
            if sym is None:
                raise FilterError(f"unexpected character {c!r}", expr, i)
            out.append(Token(OP, sym, i))
            i += len(sym)
    out.append(Token(END, "", n))
    return out


def _string(expr: str, start: int) -> tuple[Token, int]:
    raw = expr[start] == "r"
    i = start + (2 if raw else 1)
    buf: list[str] = []
    while i < len(expr):
        c = expr[i]
        if c == '"':
            return Token(STRING, "".join(buf), start), i + 1
        if c == "\\" and i + 1 < len(expr):
            if raw:
                buf.append(expr[i : i + 2])
            else:
                buf.append(_escape(expr, i))
            i += 4 if expr[i + 1] == "x" and not raw else 2
            continue
        buf.append(c)
        i += 1
    raise FilterError("unterminated string", expr, start)


def _escape(expr: str, i: int) -> str:
    e = expr[i + 1]
    if e == "x":
        digits = expr[i + 2 : i + 4]
        try:
            return chr(int(digits, 16)) if len(digits) == 2 else _bad_escape(expr, i)
        except ValueError:
            return _bad_escape(expr, i)
    if e in ESCAPES:
        return ESCAPES[e]
    return _bad_escape(expr, i)


def _bad_escape(expr: str, i: int) -> str:
    raise FilterError(f"bad escape {expr[i:i + 2]!r} in a string", expr, i)
