"""What `kdissect --version` prints: kdissect's own version and the protocol specifications its
tables were generated from, as the generated modules record them (a protocol whose tables
record no version is not listed)."""

from __future__ import annotations

from kdissect import __version__


def spec_versions() -> list[tuple[str, str]]:
    """(protocol title, what its tables come from) for every protocol whose generated tables
    record a specification version (Dissector.specification)."""
    from kdissect import protocols

    return [(d.title, spec) for d in protocols.dissectors() if (spec := d.specification()) is not None]


def version_text() -> str:
    """The lines `kdissect --version` prints (without the final newline)."""
    lines = [f"kdissect {__version__}", "protocol tables generated from:"]
    lines += [f"  {title}: {what}" for title, what in spec_versions()]
    return "\n".join(lines)
