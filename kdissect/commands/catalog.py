"""`kdissect protocols` and `kdissect fields [PROTO]`: what kdissect decodes and which field keys
filters, `export --format fields` and Spark can use (like `tshark -G`); `kdissect fields
--diagnostics [PROTO]`: every diagnostic kdissect can attach (like `tshark -G expert`); `kdissect
fields --findings`: every kind of finding `kdissect expert` reports."""

from __future__ import annotations

import json
from typing import Any

import click

from kdissect.analysis.fieldkeys import MAX_KEYS, common_keys, observed_keys
from kdissect.cliutil import CAPTURE_PATH, build, decode_options, iter_capture
from kdissect.diagnostics import Catalogue
from kdissect.dissect.keyinfo import KeyInfo
from kdissect.errors import UsageError
from kdissect.protocols import DissectorRegistry, catalogues
from kdissect.text import plural, value_word


@click.command("protocols")
@click.option("-F", "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def protocols(fmt: str) -> None:
    """List the protocols kdissect decodes: filter name, title, default ports."""
    rows: list[dict[str, Any]] = [{"name": d.name, "title": d.title, "ports": list(d.ports), "max_frame": d.max_frame}
            for d in DissectorRegistry().dissectors]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=1))
        return
    for r in rows:
        ports = ",".join(str(p) for p in r["ports"]) or "-"
        click.echo(f"{r['name']:<12}{r['title']:<14}ports {ports}")
    click.echo(f"{'kdissect':<12}{'(common)':<14}keys of every message: kdissect fields kdissect")


@click.command("fields")
@click.argument("proto", required=False)
@click.option("--from", "capture", type=CAPTURE_PATH,
              help="List the keys seen in this capture (with counts and examples) instead of the tables.")
@click.option("--diagnostics", "diagnostics", is_flag=True,
              help="List the diagnostics (expert info) instead of field keys: key, severity, group, meaning.")
@click.option("--findings", "findings", is_flag=True,
              help="List the kinds of finding of `kdissect expert` instead: key, severity, category, title, hint.")
@click.option("-F", "--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text",
              show_default=True, help="markdown: with --diagnostics or --findings, the document docs/diagnostics.md "
                                      "or docs/findings.md.")
@decode_options
def fields(proto: str | None, capture: str | None, diagnostics: bool, findings: bool, fmt: str,
           decode_as: tuple[str, ...], max_bytes: int, max_decompressed: int, show_secrets: bool) -> None:
    """List field keys: of PROTO (see `kdissect protocols`; `kdissect` for the common keys), or
    of all.

    Keys come from each protocol's tables (Kafka: every API, request and response; ZooKeeper:
    every jute record); for protocols without a key table, use --from CAPTURE to list the keys
    their decoded messages carry. Kafka also lists Wireshark's Kafka field names (type `alias`,
    with the keys they stand for); filters and `export -e` accept them, and each key a Wireshark
    name covers says so (`wireshark: NAME`).

    With --diagnostics: every diagnostic kdissect can attach to a message, of PROTO (or
    `transport`: TCP reassembly, framing, the pipeline) or of all, as each catalogue declares it.

    With --findings: every kind of finding `kdissect expert` reports, as its analyzers declare it."""
    if findings:
        if capture is not None or proto is not None or diagnostics:
            raise UsageError("--findings lists the declared kinds of finding: it takes no PROTO, --from or "
                             "--diagnostics")
        _print_findings(fmt)
        return
    if diagnostics:
        if capture is not None:
            raise UsageError("--diagnostics lists the declared diagnostics: it takes no --from")
        _print_diagnostics(_catalogues(proto), fmt)
        return
    if fmt == "markdown":
        raise UsageError("-F markdown goes with --diagnostics or --findings")
    registry, opts = build(decode_as, max_bytes, max_decompressed, show_secrets)
    if proto is not None and proto != "kdissect":
        registry.get(proto)  # a UsageError names the known protocols
    if capture is not None:
        keys, unlisted = observed_keys(iter_capture(capture, registry, opts), proto if proto != "kdissect" else None)
        notes: list[str] = []
        if unlisted:
            notes.append(f"{plural(unlisted, 'value')} of keys seen after the first {MAX_KEYS:,} are not listed")
    else:
        keys, notes = _static(registry, proto)
    _print(keys, fmt)
    for n in notes:
        click.echo(f"kdissect: note: {n}", err=True)


def _static(registry: DissectorRegistry, proto: str | None) -> tuple[list[KeyInfo], list[str]]:
    keys: list[KeyInfo] = []
    notes: list[str] = []
    if proto in (None, "kdissect"):
        keys += common_keys()
    for d in registry.dissectors:
        if proto not in (None, d.name):
            continue
        found = d.field_keys()
        if found is None:
            notes.append(f"{d.name}: no key table; `kdissect fields {d.name} --from CAPTURE` lists the keys "
                         "seen in a capture")
            continue
        keys += found
    return keys, notes


def _print(keys: list[KeyInfo], fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps([k.to_json() for k in keys], indent=1, ensure_ascii=False, default=str))
        return
    for k in keys:
        extra = k.description
        if k.used_by:
            used = ", ".join(k.used_by[:4]) + (f" (+{len(k.used_by) - 4})" if len(k.used_by) > 4 else "")
            extra = f"{used}; {extra}" if extra else used
        if k.count:
            example = value_word(k.example) if k.example is None or isinstance(k.example, bool) else repr(k.example)
            extra = f"{k.count}× e.g. {example}"
        click.echo(f"{k.key}\t{k.type}\t{extra}")


def _catalogues(proto: str | None) -> list[Catalogue]:
    found = catalogues()
    if proto is None:
        return found
    chosen = [c for c in found if c.name == proto.lower()]
    if not chosen:
        known = ", ".join(c.name for c in found)
        raise UsageError(f"no diagnostics for {proto!r} (known: {known})")
    return chosen


def _print_diagnostics(cats: list[Catalogue], fmt: str) -> None:
    if fmt == "json":
        rows = [{"protocol": c.name, **e.to_json()} for c in cats for e in c]
        click.echo(json.dumps(rows, indent=1, ensure_ascii=False))
    elif fmt == "markdown":
        click.echo(diagnostics_markdown(cats), nl=False)
    else:
        for c in cats:
            for e in c:
                click.echo(f"{e.key}\t{e.severity.value}\t{e.group.value}\t{e.description}")


def _print_findings(fmt: str) -> None:
    from kdissect.expert.analyzers import all_kinds

    kinds = all_kinds()
    if fmt == "json":
        rows = [{"key": k.key, "severity": k.severity.value, "category": k.category, "title": k.title,
                 "hint": k.hint} for k in kinds]
        click.echo(json.dumps(rows, indent=1, ensure_ascii=False))
    elif fmt == "markdown":
        click.echo(findings_markdown(kinds), nl=False)
    else:
        for k in kinds:
            click.echo(f"{k.key}\t{k.severity.value}\t{k.category}\t{k.title}")


def findings_markdown(kinds: list[Any]) -> str:
    """docs/findings.md: the table of every kind of finding, by category."""
    out = [
        "# Findings",
        "",
        "Every kind of finding `kdissect expert` (and `kdissect report`) can report: its key, its usual "
        "severity (an analyzer raises or lowers it with the evidence), its title and the hint printed "
        "with it. [expert.md](expert.md) describes the commands and what each analyzer looks at.",
        "",
        "Each kind is declared once, by the analyzer that reports it (`kdissect/expert/analyzers/`). This "
        "file is generated from them; after changing one, regenerate it with",
        "",
        "```",
        "kdissect fields --findings -F markdown > docs/findings.md",
        "```",
        "",
        "(`tests/unit/expert/test_engine.py` checks that it is up to date.)",
    ]
    category = None
    for k in kinds:
        if k.category != category:
            category = k.category
            out += ["", f"## {category}", "", "| key | severity | title | hint |", "|---|---|---|---|"]
        cells = [c.replace("|", "\\|") for c in (k.title, k.hint)]
        out.append(f"| `{k.key}` | {k.severity.value} | {cells[0]} | {cells[1]} |")
    return "\n".join(out) + "\n"


def diagnostics_markdown(cats: list[Catalogue]) -> str:
    """docs/diagnostics.md: the table of every declared diagnostic, by catalogue."""
    out = [
        "# Diagnostics",
        "",
        "Every diagnostic (expert-info item) kdissect can attach to a message: its key, severity, group "
        "and what it means. `read -V` shows a message's diagnostics as `[severity/group] key: text`, the "
        "JSON export in `diagnostics`; display filters test them with `kdissect.diag` (the key) and "
        "`kdissect.severity`.",
        "",
        "Each key is declared once, like Wireshark's expert items: a protocol's in "
        "`kdissect/<proto>/diagnostics.py`, the transport layer's in `kdissect/diagnostics.py`. The keys "
        "`<proto>.truncated`, `.badlength`, `.badvalue`, `.codecerror`, `.codecunavailable` and "
        "`.decodeerror` are the MALFORMED diagnostic of a message that breaks, named after the error "
        "that broke it. The TLS layer's (`kdissect/tls/diagnostics.py`) describe a conversation rather "
        "than a message: `kdissect conversations` lists them with the connection's TLS facts, and the "
        "commands sum them up on standard error. `kdissect fields --diagnostics [PROTO]` lists the same "
        "(`-F json` as JSON).",
        "",
        "This file is generated from the catalogues; after changing one, regenerate it with",
        "",
        "```",
        "kdissect fields --diagnostics -F markdown > docs/diagnostics.md",
        "```",
        "",
        "(`tests/unit/test_diagnostics.py` checks that it is up to date.)",
    ]
    for c in cats:
        out += ["", f"## {c.title} (`{c.name}`)", "", "| key | severity | group | meaning |", "|---|---|---|---|"]
        for e in c:
            text = e.description.replace("|", "\\|")
            out.append(f"| `{e.key}` | {e.severity.value} | {e.group.value} | {text} |")
    return "\n".join(out) + "\n"
