"""`kdissect stats CAPTURE`: service response time, errors, throughput, clients, paths and
conversations, as rich tables and a response-time histogram, or JSON (docs/stats.md)."""

from __future__ import annotations

import json

import click

from kdissect.analysis.report import to_json
from kdissect.analysis.stats import Stats
from kdissect.analysis.statstext import StatsView
from kdissect.capture.pcapfile import captures_name
from kdissect.cliutil import (
    build,
    capture_inputs,
    decode_options,
    iter_capture,
    make_console,
    preference_option,
)


@click.command()
@capture_inputs
@click.option("-F", "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Tables for people, or JSON for scripts.")
@click.option("--top", type=click.IntRange(1), default=20, show_default=True,
              help="Rows shown per table in text output, the busiest (JSON has them all).")
@click.option("--no-color", is_flag=True, help="Plain text even on a terminal.")
@decode_options
@preference_option
def stats(captures: tuple[str, ...], fmt: str, top: int, no_color: bool, decode_as: tuple[str, ...], max_bytes: int,
          max_decompressed: int, show_secrets: bool) -> None:
    """Statistics of CAPTURE: per operation and version, requests, responses, errors and response
    times (min/p50/p90/p99/max); records per topic and partition; clients; paths; conversations."""
    registry, opts = build(decode_as, max_bytes, max_decompressed, show_secrets)
    st = Stats().add_all(iter_capture(captures, registry, opts))
    data = to_json(st)
    if fmt == "json":
        click.echo(json.dumps(data, indent=1, ensure_ascii=False))
        return
    StatsView(make_console(no_color), top).show(data, captures_name(captures), st.rtt)
