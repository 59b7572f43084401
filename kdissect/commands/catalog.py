"""`kdissect protocols` and `kdissect fields [PROTO]`: what kdissect decodes and which field keys
filters, `export --format fields` and Spark can use (like `tshark -G`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from kdissect.analysis.fieldkeys import (
    KeyInfo,
    common_keys,
    dissector_keys,
    kafka_keys,
    observed_keys,
    zookeeper_keys,
)
from kdissect.cliutil import CAPTURE_PATH, build, decode_options, iter_capture
from kdissect.dissect.registry import DissectorRegistry

# Protocols whose dissector tables can be walked for keys.
TABLE_WALKERS: dict[str, Callable[[], list[KeyInfo] | None]] = {"kafka": kafka_keys, "zookeeper": zookeeper_keys}


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
@click.option("-F", "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@decode_options
def fields(proto: str | None, capture: str | None, fmt: str, decode_as: tuple[str, ...], max_bytes: int,
           max_decompressed: int, show_secrets: bool) -> None:
    """List field keys: of PROTO (kafka, zookeeper, pulsar, rocketmq, kdissect), or of all.

    Kafka keys come from the schema tables (every API, request and response); for protocols
    without a key table, use --from CAPTURE to list the keys their decoded messages carry."""
    registry, opts = build(decode_as, max_bytes, max_decompressed, show_secrets)
    if proto is not None and proto != "kdissect":
        registry.get(proto)  # a UsageError names the known protocols
    if capture is not None:
        keys = observed_keys(iter_capture(capture, registry, opts), proto if proto != "kdissect" else None)
        notes: list[str] = []
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
        found = dissector_keys(d)
        if found is None and d.name in TABLE_WALKERS:
            found = TABLE_WALKERS[d.name]()
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
            extra = f"{k.count}× e.g. {k.example!r}"
        click.echo(f"{k.key}\t{k.type}\t{extra}")
