"""The error hierarchy. Readers raise DecodeError subclasses; one boundary per PDU turns them
into diagnostics. KdissectError subclasses that are not DecodeErrors are user-facing CLI errors."""

from __future__ import annotations

from typing import Any


class KdissectError(Exception):
    """Any error kdissect raises on purpose."""


class UsageError(KdissectError):
    """Bad use: a missing file, not a capture, an unknown protocol. The CLI prints one line."""


class DecodeError(KdissectError):
    """Bytes that cannot be decoded as the protocol says. `partial`, when a decoder keeps it, is
    the part of the structure decoded before the error (a Field whose last child is the
    innermost partial structure), so that what was read up to the cut is still shown."""

    def __init__(self, message: str, offset: int = -1) -> None:
        super().__init__(message)
        self.offset = offset
        self.partial: Any = None


class Truncated(DecodeError):
    """Fewer bytes remain than the structure needs."""


class BadLength(DecodeError):
    """A length or count that is negative or larger than what remains."""


class BadValue(DecodeError):
    """A value outside what the protocol allows (an unknown magic, a bad enum)."""
