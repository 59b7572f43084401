"""What a command imports: `read` and `export` load the dissector of the protocols a capture's
conversations are decoded as (by --decode-as or the port table), the TLS layer only for a TLS
conversation (or a key log), and neither Spark, the display filters, the expert nor the other
protocols' modules. Each run is a process of its own, on the compiled path and on the pure one
(where every module loads from its source)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest
from support import CAPTURES, ROOT, capture_args

from kdissect import protocols
from kdissect.errors import UsageError
from kdissect.protocols import PROTOCOLS, DissectorRegistry

KAFKA = CAPTURES / "kafka" / "mock_ck_transactions.pcap"
TLS = CAPTURES / "tls" / "kafka_tls13_aes128gcm.pcap"
# Run the CLI as `kdissect ARGS` does, then list the modules the process holds.
RUN = """
import json, sys
from kdissect.cli import main
sys.argv = ["kdissect", *json.loads(sys.argv[1])]
try:
    main()
finally:
    mods = {n: getattr(m, "__file__", None) or "" for n, m in sys.modules.items() if n.startswith("kdissect")}
    sys.stderr.write("\\nMODULES " + json.dumps(mods) + "\\n")
"""
OTHER_PROTOCOLS = ("kdissect.pulsar", "kdissect.rocketmq", "kdissect.zookeeper")
NEVER = ("kdissect.spark", "kdissect.filter", "kdissect.expert", "kdissect.analysis.stats", "kdissect.tui",
         "kdissect.commands.spark", "kdissect.report")


def _modules(pure: bool, *args: str | Path) -> tuple[str, dict[str, str]]:
    """The standard output of `kdissect ARGS`, and the kdissect modules loaded by its end (name ->
    file)."""
    env = {**os.environ, "KDISSECT_PURE": "1" if pure else "0"}
    r = subprocess.run([sys.executable, "-c", RUN, json.dumps([str(a) for a in args])], env=env,
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r.stdout, json.loads(r.stderr.rpartition("\nMODULES ")[2])


def _compiled(path: str) -> bool:
    return path.endswith(tuple(EXTENSION_SUFFIXES))


def _unexpected(mods: dict[str, str], prefixes: tuple[str, ...]) -> list[str]:
    """The loaded modules under `prefixes`, but for the packages themselves and their about.py."""
    return sorted(n for n in mods if n.startswith(prefixes) and not n.endswith((".about", *prefixes)))


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
@pytest.mark.parametrize("command", [["read"], ["read", "-V"], ["export", "-F", "jsonl"]])
def test_decoding_kafka_loads_kafka_alone(command: list[str], pure: bool) -> None:
    out, mods = _modules(pure, *command, *capture_args(KAFKA), KAFKA)
    assert out.count("\n") > 20  # messages were decoded...
    assert "kdissect.kafka.dissector" in mods and "kdissect.pipeline.decoder" in mods
    # ... by the path asked for: compiled modules (when built), or every one from its source
    if pure:
        assert not any(_compiled(f) for f in mods.values())
    elif any(_compiled(f) for f in mods.values()):
        assert _compiled(mods["kdissect.pipeline.decoder"]) and _compiled(mods["kdissect.kafka.dissector"])
    assert _unexpected(mods, OTHER_PROTOCOLS) == []
    assert _unexpected(mods, ("kdissect.tls",)) == ["kdissect.tls.records"]  # the first bytes checked
    assert [n for n in mods if n.startswith(NEVER)] == []
    assert "kdissect.kafka.fieldkeys" not in mods  # the key tables: `fields` and filters


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
def test_an_empty_capture_loads_no_protocol(tmp_path: Path, pure: bool) -> None:
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000"))
    for command in (["read"], ["export"]):
        _, mods = _modules(pure, *command, empty)
        assert _unexpected(mods, ("kdissect.kafka", *OTHER_PROTOCOLS, "kdissect.tls")) == ["kdissect.tls.records"]
        assert "kdissect.render.positions" not in mods


def test_a_tls_conversation_loads_the_tls_layer() -> None:
    out, mods = _modules(False, "read", *capture_args(TLS), TLS)
    assert "kdissect.tls.connection" in mods and "kdissect.tls.crypto" in mods
    assert out.count("\n") >= 10


def test_probing_loads_every_protocol() -> None:
    # No port of the capture is in the table and no --decode-as: the probes decide, and import
    # every dissector.
    out, mods = _modules(False, "read", KAFKA)
    assert all(f"kdissect.{a.name}.dissector" in mods for a in PROTOCOLS)
    assert "KAFKA" in out


def test_the_registry_imports_a_dissector_when_first_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded: list[str] = []
    real = type(PROTOCOLS[0]).dissector

    def counted(about):  # type: ignore[no-untyped-def]
        loaded.append(about.name)
        return real(about)

    monkeypatch.setattr(type(PROTOCOLS[0]), "dissector", counted)
    registry = DissectorRegistry(decode_as={9093: "Kafka"})
    assert loaded == []
    assert registry.by_port(40000, 2181) is not None and registry.by_port(40000, 9093) is not None
    assert loaded == ["zookeeper", "kafka"]
    registry.by_port(40001, 9093)
    assert loaded == ["zookeeper", "kafka"]  # once
    with pytest.raises(UsageError, match="unknown protocol 'kafak'"):
        DissectorRegistry(decode_as={9093: "kafak"})


def test_each_dissector_is_what_its_about_says() -> None:
    for about, d in zip(PROTOCOLS, protocols.dissectors(), strict=True):
        assert (d.name, d.title, d.ports, d.style) == (about.name, about.title, about.ports, about.style)
    assert protocols.names() == [a.name for a in PROTOCOLS]
