"""What a decoder keeps when its bytes break part-way (cut short at the end of a capture, a length
that overruns): the structure decoded before the break travels on the DecodeError as
`DecodeError.partial`, so the message still shows it.

Each struct or array decoder on the way out wraps the fields it decoded around the partial child
it received (`keep_partial`); at the top, the partial Field's children are the message's fields
decoded up to the break. A dissector that places them itself takes them (`take_partial`); what
it leaves, the per-PDU boundary (`dissect.base.run_dissector`) appends before the undecoded rest.
"""

from __future__ import annotations

from kdissect.errors import DecodeError
from kdissect.model import STRUCT, Field


def keep_partial(e: DecodeError, name: str, start: int, kids: list[Field], hint: str) -> DecodeError:
    """Wrap what a struct or array decoded before `e` (`kids`, starting at `start`) around the
    partial child `e` carries; returns `e` to re-raise. The wrapper spans up to the break."""
    if isinstance(e.partial, Field):
        kids.append(e.partial)
    end = e.offset if e.offset >= start else start
    e.partial = Field(name, None, start, end - start, kids, hint)
    return e


def partial_fields(e: DecodeError) -> list[Field]:
    """The fields `e.partial` holds: a container's children, or the partial Field itself."""
    p = e.partial
    if not isinstance(p, Field):
        return []
    return list(p.children) if p.children is not None else [p]


def take_partial(e: DecodeError) -> list[Field]:
    """partial_fields(e), which the caller keeps: `e` no longer carries them."""
    out = partial_fields(e)
    e.partial = None
    return out


def inline_partial(e: DecodeError, before: list[Field], name: str = "", start: int = -1,
                   hint: str = STRUCT) -> DecodeError:
    """Like keep_partial, but the partial's own fields go beside `before` rather than nested
    under it: for a caller whose struct lays a record's fields out inline (a header and its
    body side by side). Returns `e`."""
    end = e.offset if e.offset >= start >= 0 else start
    e.partial = Field(name, None, start, end - start if start >= 0 else 0, before + partial_fields(e), hint)
    return e
