"""`kdissect expert CAPTURE`: what went wrong, found for the user (findings with severity,
category, evidence and a hint), as text or JSON; `kdissect report CAPTURE -o FILE`: the same
findings and their charts in one self-contained HTML page (docs/expert.md)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import IO, Any

import click

from kdissect.capture.pcapfile import captures_name
from kdissect.cliutil import (
    build,
    capture_inputs,
    decode_options,
    iter_capture,
    make_console,
    output_option,
    writing,
)
from kdissect.errors import UsageError
from kdissect.expert.analyzers import ANALYZERS
from kdissect.expert.engine import Expert, Result
from kdissect.model import Severity
from kdissect.text import shown

SEVERITIES = [s.value for s in Severity]
STYLES = {"error": "bold red", "warning": "yellow", "note": "cyan", "chat": "dim"}


def analyse(captures: tuple[str, ...], decode_as: tuple[str, ...], max_decompressed: int,
            show_secrets: bool) -> Result:
    """The expert's result over every message of the captures that passes -Y."""
    registry, opts = build(decode_as, 0, max_decompressed, show_secrets)
    expert = Expert(ANALYZERS)
    return expert.add_all(iter_capture(captures, registry, opts, observers=[expert]))


def _at_least(result: Result, severity: str) -> list[Any]:
    floor = SEVERITIES.index(severity)
    return [f for f in result.findings if SEVERITIES.index(f.severity.value) >= floor]


@click.command()
@capture_inputs
@click.option("-F", "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Findings for people, or JSON (the findings and the charts' numbers) for scripts.")
@click.option("--severity", type=click.Choice(SEVERITIES), default="note", show_default=True,
              help="Leave out the findings below this severity.")
@click.option("--no-color", is_flag=True, help="Plain text even on a terminal.")
@decode_options
@output_option("Write to this file instead of standard output.")
def expert(captures: tuple[str, ...], fmt: str, severity: str, no_color: bool, decode_as: tuple[str, ...],
           max_bytes: int, max_decompressed: int, show_secrets: bool, outputs: tuple[str, ...]) -> None:
    """What went wrong in CAPTURE, found for you: consumer lag and rebalances, producer
    retries and sequence gaps, open or aborted transactions, slow or missing responses, error
    storms, throttling, TCP trouble, ZooKeeper sessions, Pulsar flow control, RocketMQ send
    failures. Each finding has a severity, a category, a summary, its evidence (frames,
    streams, values) and a hint. -Y limits the messages looked at."""
    result = analyse(captures, decode_as, max_decompressed, show_secrets)
    findings = _at_least(result, severity)
    with _open(outputs) as out:
        if fmt == "json":
            data = result.to_json()
            data["findings"] = [f.to_json() for f in findings]
            out.write(json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n")
        else:
            show_text(make_console(no_color, out if outputs else None), findings, result, captures_name(captures))


@contextlib.contextmanager
def _open(outputs: tuple[str, ...]) -> Iterator[IO[str]]:
    """The output file named by -o, else standard output."""
    if not outputs:
        yield sys.stdout
        return
    with open(outputs[0], "w", encoding="utf-8") as out:
        yield out


def show_text(c: Any, findings: list[Any], result: Result, name: str) -> None:
    counts = {s: sum(1 for f in findings if f.severity.value == s) for s in reversed(SEVERITIES)}
    tally = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no findings"
    c.print(f"{name}: {result.messages} messages; {tally}", highlight=False, markup=False)
    for f in findings:
        c.print()
        c.print(f"[{STYLES[f.severity.value]}]{f.severity.value:<8}[/]{_escape(shown(f.summary))}", highlight=False)
        evidence = [f.kind.category, f.kind.key]
        if f.frames:
            more = "…" if f.count > len(f.frames) and len(f.frames) > 1 else ""
            evidence.append("frames " + ", ".join(map(str, f.frames)) + more)
        if f.streams:
            evidence.append("streams " + ", ".join(map(str, f.streams)))
        c.print(" " * 8 + " · ".join(evidence), style="dim", highlight=False, markup=False)
        c.print(" " * 8 + f"hint: {f.kind.hint}", style="dim", highlight=False, markup=False)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


@click.command()
@capture_inputs
@output_option("The HTML file to write (required).")
@click.option("--overwrite", is_flag=True, help="Replace the output file if it exists.")
@click.option("--title", help="The report's title (default: the capture's name).")
@decode_options
def report(captures: tuple[str, ...], outputs: tuple[str, ...], overwrite: bool, title: str | None,
           decode_as: tuple[str, ...], max_bytes: int, max_decompressed: int, show_secrets: bool) -> None:
    """Write one self-contained HTML page about CAPTURE: the expert's findings, I/O graphs per
    protocol and topic, response times and a latency heatmap per operation, consumer lag per
    partition, a rebalance timeline per group and the top talkers. It needs no network to be
    viewed."""
    if not outputs:
        raise UsageError("report needs -o FILE, the HTML file to write")
    path = outputs[0]
    if os.path.exists(path) and not overwrite:
        raise UsageError(f"{path} exists (--overwrite replaces it)")
    # A new page replaces a file when it is whole; a device or a pipe is written to directly.
    tmp = path + ".part" if os.path.isfile(path) or not os.path.exists(path) else path
    with writing(path):  # before the analysis: a path that cannot be written fails at once
        out = open(tmp, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    try:
        with out:
            result = analyse(captures, decode_as, max_decompressed, show_secrets)
            from kdissect.report.html import render

            page = render(result.to_json(), title or captures_name(captures))
            with writing(path):
                out.write(page)
                out.flush()
        if tmp != path:
            with writing(path):
                os.replace(tmp, path)
    finally:
        if tmp != path:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # (gone once renamed)
    click.echo(f"kdissect: report written to {path} ({len(result.findings)} findings)", err=True)
