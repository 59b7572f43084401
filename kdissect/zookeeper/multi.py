"""multi (14) and multiRead (22): a run of MultiHeader{type, done, err} each followed by the
sub-record for its type, ended by a header with done=true. Results use the same pattern; a
failed sub-operation comes back as type -1 with an ErrorResponse."""

from __future__ import annotations

from dataclasses import dataclass, field

from kdissect.dissect.partial import keep_partial, partial_fields
from kdissect.errors import BadValue, DecodeError
from kdissect.model import ARRAY, Field, array, struct
from kdissect.wire.reader import WireReader
from kdissect.zookeeper.annotate import error_name, opcode_name
from kdissect.zookeeper.codes_table import OPCODES
from kdissect.zookeeper.jute import Ctx, read_fields

MULTI_OPCODES = frozenset({14, 22})
ERROR_TYPE = -1
RUNTIME_INCONSISTENCY = -2  # the code of the operations after a failed one in an atomic multi
# Result types whose sub-result differs from the standalone opcode's response.
RESULT_OVERRIDES: dict[int, str] = {13: ""}  # check: nothing follows the header


@dataclass(slots=True)
class MultiBody:
    tree: Field
    ops: list[tuple[str, str | None]] = field(default_factory=list)  # (type name, path)
    errors: list[tuple[int, int]] = field(default_factory=list)  # (index, err) of failed results


def _record(kind: int, results: bool) -> str:
    entry = OPCODES.get(kind)
    if results and kind in RESULT_OVERRIDES:
        return RESULT_OVERRIDES[kind]
    record = None if entry is None else (entry[2] if results else entry[1])
    if record is None or kind in MULTI_OPCODES:
        raise BadValue(f"no sub-{'result' if results else 'request'} record for type {kind}")
    return record


def new_body(results: bool, start: int) -> MultiBody:
    return MultiBody(array("results" if results else "ops", [], start))


def read(r: WireReader, ctx: Ctx, results: bool, body: MultiBody | None = None) -> MultiBody:
    """The sub-operations (results=False) or the per-operation results (results=True), into
    `body` when given. A break raises with the operations read so far, the one it cut short
    last, as the partial array; `body` then holds the complete ones."""
    start = r.pos
    if body is None:
        body = new_body(results, start)
    items = body.tree.children
    assert items is not None
    item = "result" if results else "op"
    while True:
        off = r.pos
        header: list[Field] = []
        sub: list[Field] = []
        try:
            header = read_fields(r, "MultiHeader", ctx)
            kind, done, err = (f.value for f in header)
            if done:
                break
            try:
                record = _record(int(kind), results)
            except BadValue as e:
                e.offset = off
                raise
            sub = read_fields(r, record, ctx) if record else []
        except DecodeError as e:
            got = partial_fields(e) if not header else header + partial_fields(e)
            e.partial = None
            if e.offset > off and got:
                if header:
                    _tidy(header, got[len(header):], results)
                e.partial = struct(item, got, off, e.offset - off)
            raise keep_partial(e, body.tree.name, start, list(items), ARRAY) from None
        if not ctx.budget.elements(1):  # past the message's budget: read, not kept
            ctx.limited(body.tree.name, None, len(items), off)
            continue
        _tidy(header, sub, results)
        items.append(struct(item, header + sub, off, r.pos - off))
        path = next((f.value for f in sub if f.name == "path"), None)
        body.ops.append((opcode_name(int(kind)), path))
        if kind == ERROR_TYPE:
            body.errors.append((len(items), int(err)))
    body.tree.length = r.pos - start
    return body


def _tidy(header: list[Field], sub: list[Field], results: bool) -> None:
    """Request headers carry a placeholder err (-1): show it as a plain number. A failed
    result's ErrorResponse repeats the header's err: name it apart so keys stay unique."""
    if not results:
        header[2].hint = header[2].display = None
    for f in sub:
        if f.name == "err":
            f.name = "result_err"


def result_summary(op: str, body: MultiBody) -> str:
    n = len(body.tree.children or ())
    if not body.errors:
        return f"{op} → {n} results ok"
    real = [(i, e) for i, e in body.errors if e not in (0, RUNTIME_INCONSISTENCY)]
    if not real:
        return f"{op} → {n} results, {len(body.errors)} failed"
    i, e = real[0]
    more = f" +{len(real) - 1} more" if len(real) > 1 else ""
    return f"{op} → {error_name(e)} (op {i} of {n}){more}"
