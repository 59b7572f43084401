"""What `kdissect --version` prints: kdissect's own version and the protocol specifications its
tables were generated from, as the generated modules record them (a protocol whose tables
record no version is not listed)."""

from __future__ import annotations

from kdissect import __version__


def _short(source: str) -> str:
    """`owner/repo@<40 hex>` with the commit cut to 12 digits."""
    repo, sep, commit = source.partition("@")
    return f"{repo}@{commit[:12]}" if sep else source


def spec_versions() -> list[tuple[str, str]]:
    """(protocol title, what its tables come from) for every protocol whose generated tables
    record a specification version."""
    from kdissect.kafka.apis import APIS, SPEC_SOURCE, SPEC_VERSION
    from kdissect.pulsar.schema_table import PROTOCOL_VERSION

    keys = f"API keys {min(APIS)}-{max(APIS)}"
    if SPEC_VERSION is not None:
        where = f" ({_short(SPEC_SOURCE)})" if SPEC_SOURCE else ""
        kafka = f"Apache Kafka {SPEC_VERSION} message specifications{where}, {keys}"
    else:
        kafka = f"Apache Kafka message specifications (version not recorded), {keys}"
    return [("Kafka", kafka), ("Pulsar", f"PulsarApi.proto, protocol version v{PROTOCOL_VERSION}")]


def version_text() -> str:
    """The lines `kdissect --version` prints (without the final newline)."""
    lines = [f"kdissect {__version__}", "protocol tables generated from:"]
    lines += [f"  {title}: {what}" for title, what in spec_versions()]
    return "\n".join(lines)
