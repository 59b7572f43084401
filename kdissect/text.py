"""Small text helpers shared by every protocol's summaries, labels and notes."""

from __future__ import annotations

# Endings whose English plural adds "es": batch -> batches, box -> boxes, address -> addresses.
_ES_ENDINGS = ("ch", "sh", "s", "x", "z")


def plural(n: int, singular: str, plural: str | None = None) -> str:
    """"1 record", "2 records", "3 batches": the count and the noun it needs. `plural` names an
    irregular plural; otherwise "es" follows ch, sh, s, x and z, and "s" anything else."""
    if n == 1:
        return f"{n} {singular}"
    if plural is None:
        plural = singular + ("es" if singular.endswith(_ES_ENDINGS) else "s")
    return f"{n} {plural}"


def value_word(v: object) -> str:
    """A scalar as text output writes it: true, false and null as in JSON and Wireshark's
    filters, never Python's True, False and None; anything else as str()."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    return str(v)


def cut(text: str, limit: int) -> str:
    """text, or its first limit - 1 characters and "…" when it is longer than limit (a name or
    text from a capture, or from the user, of any length)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Control characters (C0, DEL, C1) as a line of text output writes them: escaped as Python
# writes them in a string's repr, so that no name in a capture moves the cursor, colours or
# retitles the terminal, or forges a line of output.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}
_CONTROLS.update({ord("\t"): "\\t", ord("\n"): "\\n", ord("\r"): "\\r"})


def shown(text: str) -> str:
    """Text from a capture as a terminal line shows it: control characters escaped (`\\x1b`,
    `\\n`), everything else as it is."""
    return text if text.isprintable() else text.translate(_CONTROLS)


def short_source(source: str) -> str:
    """Where generated tables came from, `owner/repo@<40 hex>`, with the commit cut to 12 digits."""
    repo, sep, commit = source.partition("@")
    return f"{repo}@{commit[:12]}" if sep else source


def size_text(n: int) -> str:
    """A byte count as text output writes it: "512 B", "3.2 KiB", "1.5 MiB", "2.0 GiB"."""
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"
