"""Checks shared by the cut-short tests: a message cut part-way keeps what it decoded before the
cut (same names, values and offsets), claims no byte past the cut, and reports the rest."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from support import CAPTURES

from kdissect.model import Field, Group, Message, Severity

Path_ = tuple[str, ...]


def capture_messages(proto: str) -> list[Message]:
    """Every message of the protocol in the project's own captures."""
    from kdissect.pipeline import dissect_file

    out: list[Message] = []
    for path in sorted(Path(CAPTURES, proto).glob("*.pcap")):
        out += [m for m in dissect_file(str(path)) if m.protocol == proto]
    return out


def leaves(fields: list[Field], path: Path_ = (), skip: frozenset[str] = frozenset()) -> Iterator[tuple[Path_, Field]]:
    """(path of names from the root, field) of every leaf, leaving out subtrees named in skip."""
    for f in fields:
        if f.name in skip:
            continue
        p = (*path, f.name)
        if f.children:
            yield from leaves(f.children, p, skip)
        else:
            yield p, f


def lost_before_cut(whole: Message, cut_msg: Message, cut: int, margin: int = 0,
                    skip: frozenset[str] = frozenset()) -> list[tuple[Path_, int, object]]:
    """Leaves of `whole` that end at or before `cut - margin` but are not in `cut_msg` with the
    same path, offset and value. margin: bytes a value needs after it to be known complete (a
    closing quote or separator)."""
    got = {(p, f.offset, repr(f.value)) for p, f in leaves(cut_msg.fields)}
    return [(p, f.offset, f.value) for p, f in leaves(whole.fields, (), skip)
            if f.offset >= 0 and f.offset + f.length <= cut - margin and (p, f.offset, repr(f.value)) not in got]


def past_the_cut(msg: Message, cut: int) -> list[tuple[str, int, int]]:
    """Fields (any depth) that claim bytes beyond the cut."""
    out: list[tuple[str, int, int]] = []
    stack = list(msg.fields)
    while stack:
        f = stack.pop()
        if f.offset >= 0 and f.offset + f.length > cut:
            out.append((f.name, f.offset, f.length))
        stack.extend(f.children or ())
    return out


def check_reported(msg: Message) -> None:
    """A top-level `undecoded` field comes with a MALFORMED error at its offset, and the summary
    says the message is malformed."""
    undecoded = [f for f in msg.fields if f.name == "undecoded"]
    if not undecoded:
        return
    assert undecoded == [msg.fields[-1]], [f.name for f in msg.fields]
    at = undecoded[0].offset
    assert any(d.group == Group.MALFORMED and d.severity == Severity.ERROR and d.offset == at
               for d in msg.diagnostics), (at, msg.diagnostics)
    assert "malformed" in msg.summary, msg.summary


Decode = Callable[[bytes, bool, Any], Message]


def check_cut(m: Message, cut: int, decode: Decode, state: Callable[[Message], Any], margin: int = 0,
              skip: frozenset[str] = frozenset(), compare: bool = True) -> None:
    """m decoded whole and cut at `cut` (each with the conversation state `state(m)` gives): the
    cut one has a summary, reports its undecoded rest, claims no byte past the cut and (unless
    `compare` is False) keeps every leaf the whole one decoded before the cut."""
    whole = decode(m.data, m.to_server, state(m))
    part = decode(m.data[:cut], m.to_server, state(m))
    assert part.summary
    check_reported(part)
    assert past_the_cut(part, cut) == []
    if compare:
        assert lost_before_cut(whole, part, cut, margin, skip) == []


def state_after_peer(new_state: Callable[[], Any], decode: Decode) -> Callable[[Message], Any]:
    """A conversation state as m met it: new, with m's request (if any) decoded into it."""
    def state(m: Message) -> Any:
        st = new_state()
        if m.peer is not None:
            decode(m.peer.data, m.peer.to_server, st)
        return st
    return state
