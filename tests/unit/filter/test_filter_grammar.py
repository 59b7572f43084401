"""Display-filter grammar: print -> parse gives back the same tree; precedence; error positions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kdissect.filter import FilterError, parse, to_text
from kdissect.filter.nodes import (
    COMPARE_OPS,
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
from kdissect.filter.parser import KEYWORDS, MAX_NESTING

LOWER = "abcdefghijklmnopqrstuvwxyz_"
WORDCH = LOWER + "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:/@+-"


def _word(first: str, rest: str, n: int) -> st.SearchStrategy[str]:
    return st.builds(lambda a, b: a + b, st.sampled_from(first), st.text(rest, max_size=n))


SEGMENT = _word(LOWER, LOWER + "0123456789", 8).filter(lambda s: s not in KEYWORDS)
FIELDS = st.builds(lambda p, rest: FieldRef(".".join([p, *rest])),
                   st.sampled_from(["kafka", "zookeeper", "pulsar", "rocketmq", "kdissect"]),
                   st.lists(SEGMENT, min_size=0, max_size=3))
WORD_VALUES = st.one_of(
    st.integers(-(2**63), 2**63).map(str),
    _word(LOWER + "ABCXYZ/", WORDCH, 12),
    st.integers(0, 2**32).map(hex),
    st.tuples(*[st.integers(0, 255)] * 4, st.integers(0, 65535)).map(lambda t: f"{t[0]}.{t[1]}.{t[2]}.{t[3]}:{t[4]}"),
).filter(lambda s: s not in KEYWORDS and ".." not in s and not s.startswith("r\""))
STRINGS = st.text(max_size=12)
LITERALS = st.one_of(st.builds(Literal, st.just(WORD_LIT), WORD_VALUES),
                     st.builds(Literal, st.just(STRING_LIT), STRINGS))
NUMBERS = st.integers(-1000, 1000).map(lambda n: Literal(WORD_LIT, str(n)))
ITEMS = st.one_of(LITERALS, st.builds(Range, NUMBERS, NUMBERS))
TESTS = st.one_of(
    st.builds(Exists, FIELDS),
    st.builds(Compare, st.sampled_from(COMPARE_OPS), FIELDS, LITERALS),
    st.builds(lambda f, items: In(f, tuple(items)), FIELDS, st.lists(ITEMS, min_size=1, max_size=4)),
)
TREES: st.SearchStrategy[Node] = st.recursive(
    TESTS,
    lambda kids: st.one_of(st.builds(Not, kids), st.builds(And, kids, kids), st.builds(Or, kids, kids)),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(TREES)
def test_print_parse_round_trip(tree: Node) -> None:
    text = to_text(tree)
    assert parse(text) == tree, text
    assert to_text(parse(text)) == text


def test_precedence_and_binds_tighter_than_or() -> None:
    a, b, c = (Exists(FieldRef(f"kafka.{x}")) for x in "abc")
    assert parse("kafka.a or kafka.b and kafka.c") == Or(a, And(b, c))
    assert parse("kafka.a and kafka.b or kafka.c") == Or(And(a, b), c)
    assert parse("(kafka.a or kafka.b) and kafka.c") == And(Or(a, b), c)
    assert parse("!kafka.a && kafka.b || kafka.c") == Or(And(Not(a), b), c)
    assert parse("not not kafka.a") == Not(Not(a))


def test_spellings() -> None:
    ref = FieldRef("kafka.error_code")
    one = Literal(WORD_LIT, "1")
    assert parse("kafka.error_code eq 1") == Compare("==", ref, one)
    assert parse("kafka.error_code ge 1") == Compare(">=", ref, one)
    assert parse('kafka.error_code ~ "x"') == Compare("matches", ref, Literal(STRING_LIT, "x"))
    assert parse("kafka.error_code!=-1") == Compare("!=", ref, Literal(WORD_LIT, "-1"))
    assert parse("kafka.error_code in {1 2,3..5}") == In(ref, (one, Literal(WORD_LIT, "2"),
                                                              Range(Literal(WORD_LIT, "3"), Literal(WORD_LIT, "5"))))
    assert parse("kafka.error_code not in {1}") == Not(In(ref, (one,)))
    assert parse(r'kafka.x matches r"\d+\""') == Compare("matches", FieldRef("kafka.x"), Literal(STRING_LIT, r'\d+\"'))
    assert parse(r'kafka.x == "a\"b\\\x41\n"') == Compare("==", FieldRef("kafka.x"), Literal(STRING_LIT, 'a"b\\A\n'))
    assert parse("zookeeper.path == /brokers/ids") == Compare("==", FieldRef("zookeeper.path"),
                                                              Literal(WORD_LIT, "/brokers/ids"))


@pytest.mark.parametrize(("expr", "reason", "column"), [
    ("kafka.error_code == ", "expected a value", 21),
    ("kafka.error_code == and", "expected a value", 21),
    ("", "empty filter", 1),
    ("(kafka.a", "expected ')'", 9),
    ("kafka.a )", "unexpected ')'", 9),
    ("kafka.a = 1", "unexpected character '='", 9),
    ('kafka.a == "abc', "unterminated string", 12),
    ("kafka.a in 1", "expected '{'", 12),
    ("kafka.a in {}", "expected a value", 13),
    ("kafka.a in {1", "expected '}'", 14),
    ("and kafka.a", "expected a field name", 1),
    ("12 == 1", "'12' is not a field name", 1),
    ('kafka.a == "\\q"', "bad escape '\\\\q' in a string", 13),
])
def test_syntax_errors_point_at_the_spot(expr: str, reason: str, column: int) -> None:
    with pytest.raises(FilterError) as exc:
        parse(expr)
    assert exc.value.reason == reason
    assert exc.value.pos + 1 == column
    first, caret = str(exc.value).split("\n")
    assert first == f"filter: {reason} at column {column}: {expr}"
    # The caret sits under the column once the CLI has put "kdissect: error: " in front.
    head = first[: len(first) - len(expr)]
    assert caret.index("^") == len("kdissect: error: ") + len(head) + column - 1


def test_a_long_expression_is_shown_around_the_spot_of_its_error() -> None:
    # A 200 KB expression with an error at its end was written whole, with a caret line as wide.
    expr = "kafka.a == 1 and " * 12_000 + "kafka.b == " + "x" * 1000 + " )"
    with pytest.raises(FilterError) as exc:
        parse(expr)
    assert exc.value.pos == len(expr) - 1 and exc.value.expr == expr
    first, caret = str(exc.value).split("\n")
    head = f"filter: unexpected ')' at column {len(expr)}: "
    assert first == head + "…" + expr[-160:]
    assert caret.index("^") == len("kdissect: error: ") + len(head) + 160
    with pytest.raises(FilterError) as exc:
        parse("(" * 300 + "kafka." + "a" * 1000 + " ==")
    first, caret = str(exc.value).split("\n")
    assert exc.value.reason == "nested deeper than 100 levels" and first.endswith(": …" + "(" * 80 + "(" * 80 + "…")
    assert caret.index("^") == first.index("…") + 81 + len("kdissect: error: ")
    with pytest.raises(FilterError) as exc:
        parse("kafka.a == 1 " + "x" * 500)
    assert exc.value.reason == f"unexpected {'x' * 79 + '…'!r}"


@pytest.mark.parametrize("opener", ["(", "not ", "! "])
def test_nesting_stops_at_its_limit_with_an_error(opener: str) -> None:
    closer = ")" if opener == "(" else ""
    deepest = opener * MAX_NESTING + "kafka.a" + closer * MAX_NESTING
    assert parse(deepest) is not None
    with pytest.raises(FilterError) as exc:
        parse(opener * (MAX_NESTING + 1) + "kafka.a" + closer * (MAX_NESTING + 1))
    assert exc.value.reason == f"nested deeper than {MAX_NESTING} levels"
    assert exc.value.pos == len(opener) * MAX_NESTING  # the opener one too many


def test_nesting_is_counted_inside_chains_too() -> None:
    """Nesting is what encloses an operand, not how many operands come before it."""
    ok = " and ".join(["(" * MAX_NESTING + "kafka.a" + ")" * MAX_NESTING] * 3)
    assert isinstance(parse(ok), And)
    with pytest.raises(FilterError):
        parse("kafka.a and " + "(" * (MAX_NESTING + 1) + "kafka.a" + ")" * (MAX_NESTING + 1))

