#!/usr/bin/env python3
"""Generate the kdissect(1) manual page from the click commands.

Usage:
    python3 tools/gen_manpage.py [OUT]      (default: docs/kdissect.1; `-` for standard output)

The page is roff (man macros). NAME, SYNOPSIS and DESCRIPTION come from the group's help, OPTIONS
from its options, COMMANDS from every command the group lists (the lazily loaded ones included,
through KdissectGroup's list_commands/get_command): its usage, help and options as `--help`
shows them. ENVIRONMENT, EXIT STATUS, FILES and SEE ALSO are the tables below. The output depends
only on the commands and this file: no date, so regenerating an unchanged CLI changes nothing.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kdissect import __version__  # noqa: E402
from kdissect.cli import cli  # noqa: E402

OUT = ROOT / "docs" / "kdissect.1"
PROG = "kdissect"

# Variables kdissect reads, and what they do.
ENVIRONMENT: tuple[tuple[str, str], ...] = (
    ("NO_COLOR", "When set to a non-empty value, output is plain text even on a terminal, "
                 "as with --no-color."),
    ("SSLKEYLOGFILE", "The NSS key log used to decrypt TLS when neither --tls-keylog nor "
                      "-o tls.keylog_file:FILE is given. The file may be written while kdissect "
                      "reads it: it is read again where it grew."),
    ("KDISSECT_PURE", "When set to a value other than 0, the compiled core is not used: every "
                      "function runs its pure-Python implementation."),
    ("KDISSECT_DEBUG", "When set, an unexpected internal error shows its Python traceback "
                       "instead of one line."),
    ("COLUMNS", "The width of tables and lines when standard output is not a terminal."),
)

# Exit statuses, as kdissect/cli.py's main() sets them.
EXIT_STATUS: tuple[tuple[str, str], ...] = (
    ("0", "Success. Messages that did not decode are reported as diagnostics, which are data, "
          "not failures."),
    ("1", "An unexpected internal error (one line on standard error; KDISSECT_DEBUG=1 shows the "
          "traceback)."),
    ("2", "Bad use (an unknown option, a bad filter) or input that cannot be read (one line on "
          "standard error)."),
    ("130", "Interrupted (Ctrl-C)."),
)

# Files kdissect reads besides the captures named on its command line.
FILES: tuple[tuple[str, str], ...] = (
    ("key log file", "The NSS key log named by --tls-keylog, -o tls.keylog_file:FILE or "
                     "SSLKEYLOGFILE (one CLIENT_RANDOM or TLS 1.3 secret per line)."),
    ("docs/json.md", "In the source tree: the JSON schema of export and sniff --format jsonl."),
    ("docs/filters.md", "In the source tree: the display filter syntax of -Y."),
    ("docs/diagnostics.md", "In the source tree: every diagnostic a message can carry."),
    ("docs/completion.md", "In the source tree: shell completion for bash, zsh and fish."),
)

SEE_ALSO = ("tshark(1)", "wireshark-filter(4)", "mergecap(1)")


def escape(text: str) -> str:
    """Text as roff prints it: backslashes escaped, the hyphens of a word that starts with one
    (an option) as minus signs, characters outside ASCII as Unicode escapes (`line` keeps a text
    line from starting with a control character)."""
    text = text.replace("\\", "\\e")
    text = re.sub(r"(?<![\w-])-[\w-]*", lambda m: m.group().replace("-", "\\-"), text)
    text = "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in text)
    return text


def line(text: str) -> str:
    """One roff text line (a leading . or ' would make it a request)."""
    return "\\&" + text if text[:1] in (".", "'") else text


def inline(text: str) -> str:
    """Prose: escaped, with `code` in bold."""
    parts = text.split("`")
    return "".join(f"\\fB{escape(p)}\\fR" if i % 2 else escape(p) for i, p in enumerate(parts))


def paragraphs(help_text: str) -> Iterator[tuple[bool, str]]:
    """A click help text's paragraphs: (kept as written (click's \\b marker), text); text after
    \\f is not shown, as in --help."""
    text = inspect.cleandoc(help_text.split("\f", 1)[0])
    for block in re.split(r"\n\s*\n", text):
        if block.startswith("\b\n"):
            yield True, block[2:]
        elif block.strip():
            yield False, " ".join(s.strip() for s in block.splitlines())


def prose(help_text: str | None) -> list[str]:
    out: list[str] = []
    for i, (verbatim, text) in enumerate(paragraphs(help_text or "")):
        if i:
            out.append(".PP")
        if verbatim:
            out += [".nf", *(line(inline(s)) for s in text.splitlines()), ".fi"]
        else:
            out.append(line(inline(text)))
    return out


def option_term(term: str) -> str:
    """click's first help column (`-F, --format [json|jsonl]`): option names in bold, the metavar
    in italics."""
    words = []
    for word in term.split(" "):
        if word.startswith("-"):
            name, comma = (word[:-1], ",") if word.endswith(",") else (word, "")
            words.append(f"\\fB{escape(name)}\\fR{comma}")
        elif word == "/":
            words.append(word)
        else:
            words.append(f"\\fI{escape(word)}\\fR")
    return " ".join(words)


def options(ctx: click.Context, command: click.Command) -> list[str]:
    out: list[str] = []
    for param in command.get_params(ctx):
        record = None if isinstance(param, click.Argument) else param.get_help_record(ctx)
        if record is None:
            continue
        term, help_text = record
        help_text = " ".join(help_text.split())
        out += [".TP", line(option_term(term)), line(inline(help_text)) if help_text else "\\&"]
    return out


def usage(ctx: click.Context, command: click.Command) -> str:
    pieces = " ".join(command.collect_usage_pieces(ctx))
    return f"{ctx.command_path} {pieces}".strip()


def commands(ctx: click.Context, group: click.Group) -> Iterator[tuple[click.Context, click.Command]]:
    """Every command under group, depth first in the order the group lists them."""
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        sub = click.Context(command, info_name=name, parent=ctx, **command.context_settings)
        yield sub, command
        if isinstance(command, click.Group):
            yield from commands(sub, command)


def table(rows: tuple[tuple[str, str], ...], bold: bool = True) -> list[str]:
    out: list[str] = []
    for term, text in rows:
        out += [".TP", f"\\fB{escape(term)}\\fR" if bold else escape(term), line(inline(text))]
    return out


def render(group: click.Group = cli) -> str:
    ctx = click.Context(group, info_name=PROG, **group.context_settings)
    summary, *_ = (text for _, text in paragraphs(group.help or ""))
    out = [
        f'.\\" Generated by tools/gen_manpage.py from the kdissect {__version__} commands. Do not edit:',
        '.\\" regenerate with python3 tools/gen_manpage.py.',
        f'.TH KDISSECT 1 "" "kdissect {__version__}" "User Commands"',
        ".SH NAME",
        f"{PROG} \\- {escape(summary[0].lower() + summary[1:].rstrip('.'))}",
        ".SH SYNOPSIS",
        ".B kdissect",
        "[\\fB\\-\\-version\\fR] [\\fB\\-h\\fR]",
        ".br",
        ".B kdissect",
        "\\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIARGUMENTS\\fR]",
        ".SH DESCRIPTION",
        *prose(group.help),
        ".PP",
        "Each command below has its own options; \\fBkdissect\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR "
        "shows them.",
        ".SH OPTIONS",
        *options(ctx, group),
        ".SH COMMANDS",
    ]
    for sub, command in commands(ctx, group):
        out += [f'.SS "{escape(usage(sub, command))}"', *prose(command.help)]
        if command.epilog:
            out += [".PP", *prose(command.epilog)]
        opts = options(sub, command)
        if opts:
            out += [".PP", "Options:", ".RS", *opts, ".RE"]
    out += [".SH ENVIRONMENT", *table(ENVIRONMENT)]
    out += [".SH EXIT STATUS", *table(EXIT_STATUS)]
    out += [".SH FILES", *table(FILES, bold=False)]
    out += [".SH SEE ALSO", ",\n".join(f"\\fB{escape(name[:name.index('(')])}\\fR{name[name.index('('):]}"
                                       for name in SEE_ALSO)]
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    target = argv[1] if len(argv) > 1 else str(OUT)
    if target == "-":
        sys.stdout.write(text)
    else:
        Path(target).write_text(text, encoding="utf-8")
        print(f"-> {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
