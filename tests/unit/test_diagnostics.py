"""The diagnostic catalogues (kdissect/diagnostics.py and each protocol's diagnostics.py): every
key is declared once, code builds diagnostics only through them, what the golden files and the
tests expect is declared, `kdissect fields --diagnostics` lists them and docs/diagnostics.md is
generated from them."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from support import ROOT

from kdissect.cli import cli
from kdissect.diagnostics import DECODE_ERRORS, TRANSPORT, Catalogue, Entry, decode_errors
from kdissect.errors import BadLength, BadValue, DecodeError, Truncated, UsageError
from kdissect.kafka.ops import ArrayCap
from kdissect.model import Group, Severity
from kdissect.protocols import catalogues, dissectors
from kdissect.wire.codecs import CodecError, CodecUnavailable

KDISSECT = ROOT / "kdissect"
TESTS = ROOT / "tests"
DOC = ROOT / "docs" / "diagnostics.md"
KEY = re.compile(r"^[a-z]+(\.[a-z][a-z0-9_]*)+$")


def _declared() -> dict[str, Entry]:
    return {e.key: e for c in catalogues() for e in c}


def _run(*args: str) -> str:
    r = CliRunner().invoke(cli, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


# -- the catalogues ---------------------------------------------------------------------------

def test_every_protocol_has_a_catalogue_named_after_it() -> None:
    for d in dissectors():
        cat = d.diagnostics
        assert isinstance(cat, Catalogue) and cat.name == cat.prefix == d.name
        for name, _ in DECODE_ERRORS:
            assert name in cat, f"{d.name} does not declare the {name} diagnostic"
            assert cat.entry(name).severity == Severity.ERROR and cat.entry(name).group == Group.MALFORMED
    from kdissect.tls.diagnostics import TLS

    assert catalogues()[-2:] == [TRANSPORT, TLS]


def test_every_entry_is_well_formed_and_builds() -> None:
    seen: set[str] = set()
    for cat in catalogues():
        assert len(cat) > 0
        for e in cat:
            assert KEY.match(e.key), e.key
            assert e.key not in seen, f"{e.key} declared in two catalogues"
            seen.add(e.key)
            if cat.prefix:
                assert e.key.startswith(cat.prefix + ".")
            assert e.description and "\n" not in e.description and e.description == e.description.strip()
            name = e.key[len(cat.prefix) + 1:] if cat.prefix else e.key
            d = cat(name, "text", 7)
            assert (d.severity, d.group, d.key, d.message, d.offset) == (e.severity, e.group, e.key, "text", 7)
            assert cat.key(name) == e.key


def test_an_undeclared_name_is_a_bug() -> None:
    for cat in catalogues():
        with pytest.raises(KeyError):
            cat("no_such_diagnostic", "text")
        with pytest.raises(KeyError):
            cat.key("no_such_diagnostic")
    with pytest.raises(KeyError):
        TRANSPORT("gap", "the transport catalogue's names are whole keys")
    with pytest.raises(ValueError, match="declared twice"):
        Catalogue("x", "X", [*decode_errors(), *decode_errors()])
    with pytest.raises(ValueError, match="no description"):
        Catalogue("x", "X", [("thing", Severity.NOTE, Group.COMMENT, "")])


def test_malformed_is_named_after_the_error_class() -> None:
    cat = dissectors()[0].diagnostics
    p = cat.prefix
    for error, name in ((Truncated("short", 3), "truncated"), (BadLength("long", 4), "badlength"),
                        (BadValue("odd", 5), "badvalue"), (DecodeError("broken", 6), "decodeerror"),
                        (CodecError("bad zstd"), "codecerror"), (CodecUnavailable("no lz4"), "codecunavailable")):
        d = cat.malformed(error)
        assert (d.severity, d.group, d.key, d.message, d.offset) == (
            Severity.ERROR, Group.MALFORMED, f"{p}.{name}", str(error), error.offset)
    # A class with no entry of its own takes its nearest declared base class's.
    assert cat.malformed(ArrayCap("cap", 9)).key == f"{p}.decodeerror"
    with pytest.raises(KeyError):
        Catalogue("bare", "Bare", [("thing", Severity.NOTE, Group.COMMENT, "a thing")]).malformed(Truncated("x"))


def test_a_diagnostic_is_built_by_code_of_its_module() -> None:
    """Every malformed message builds a diagnostic: its __init__ is model.py's (compiled with
    it), not the Python code dataclasses generates (source "<string>"), and behaves as that one."""
    import dataclasses

    from kdissect.model import Diagnostic

    assert Diagnostic.__init__.__code__.co_filename.endswith("model.py")
    d = Diagnostic(Severity.ERROR, Group.MALFORMED, "kafka.truncated", "short")
    assert (d.severity, d.group, d.key, d.message, d.offset) == (
        Severity.ERROR, Group.MALFORMED, "kafka.truncated", "short", -1)
    same = Diagnostic(severity=Severity.ERROR, group=Group.MALFORMED, key="kafka.truncated", message="short", offset=-1)
    assert d == same and hash(d) == hash(same) and repr(d) == repr(same)
    assert dataclasses.replace(d, offset=3).offset == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.offset = 4  # type: ignore[misc]
    assert d.to_json() == {"severity": "error", "group": "malformed", "key": "kafka.truncated", "message": "short"}
    assert type(d.to_json()["severity"]) is str


def test_repeated_diagnostics_are_built_once() -> None:
    """A run of malformed messages repeats the same diagnostics: each (name, text, offset) with a
    short text is built once and given again; a long text is built each time; the catalogue keeps
    a bounded number."""
    from kdissect import diagnostics

    cat = Catalogue("demo", "Demo", [("thing", Severity.NOTE, Group.COMMENT, "a thing"), *decode_errors()])
    first = cat.malformed(Truncated("int32 past the end", 8))
    assert cat.malformed(Truncated("int32 past the end", 8)) is first
    assert cat.malformed(Truncated("int32 past the end", 9)) is not first
    assert cat("thing", "x", 3) is cat("thing", "x", 3)
    long = "y" * (diagnostics.BUILT_TEXT + 1)
    assert cat("thing", long) is not cat("thing", long)
    assert cat("thing", long) == cat("thing", long)
    for i in range(3 * diagnostics.BUILT_KEPT):
        cat("thing", "z", i)
    assert len(cat._built) <= diagnostics.BUILT_KEPT


def _decode_error_classes() -> set[type]:
    dissectors()  # imports every protocol package
    out: set[type] = set()
    todo = [DecodeError]
    while todo:
        cls = todo.pop()
        out.add(cls)
        todo += cls.__subclasses__()
    return {c for c in out if c.__module__.startswith("kdissect.")}


def test_every_decode_error_class_has_its_own_key() -> None:
    names = {n for n, _ in DECODE_ERRORS}
    # ArrayCap never leaves the Kafka body decoder (decode_body catches it; kafka.array_cap says so).
    missing = {c.__name__ for c in _decode_error_classes() if c.__name__.lower() not in names} - {"ArrayCap"}
    assert not missing, f"DecodeError classes without a MALFORMED entry in DECODE_ERRORS: {missing}"


def test_every_declared_diagnostic_is_used() -> None:
    """Each entry's name appears in its package's code, so no entry outlives the code that built it."""
    for d in dissectors():
        pkg = KDISSECT / d.name
        code = "\n".join(p.read_text() for p in pkg.rglob("*.py") if p.name != "diagnostics.py")
        for e in d.diagnostics:
            name = e.key[len(d.name) + 1:]
            if name in dict(DECODE_ERRORS):
                continue
            assert f'"{name}"' in code, f"{e.key} is declared but {pkg} never builds it"
    code = "\n".join(p.read_text() for p in KDISSECT.rglob("*.py") if p.name != "diagnostics.py")
    for e in TRANSPORT:
        assert f'"{e.key}"' in code, f"{e.key} is declared but never built"


# -- only the catalogue builds a Diagnostic -----------------------------------------------------

def test_no_diagnostic_is_constructed_outside_the_catalogue() -> None:
    found = []
    for p in sorted(KDISSECT.rglob("*.py")):
        if p == KDISSECT / "diagnostics.py":
            continue
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if re.search(r"\bDiagnostic\(", line):
                found.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not found, "build diagnostics through a catalogue (kdissect/diagnostics.py):\n" + "\n".join(found)


# -- what the golden files and the tests expect is declared --------------------------------------

def test_golden_diagnostics_are_declared_as_shown() -> None:
    declared = _declared()
    seen = 0
    for p in sorted((TESTS / "golden").rglob("*.export.jsonl")):
        for line in p.read_text().splitlines():
            for d in json.loads(line).get("diagnostics", []):
                e = declared.get(d["key"])
                assert e is not None, f"{p.name}: {d['key']} is not declared"
                assert (d["severity"], d["group"]) == (e.severity.value, e.group.value), f"{p.name}: {d['key']}"
                seen += 1
    shown = re.compile(r"\[([a-z]+)/([a-z]+)\] ([a-z][a-z0-9_.]*[a-z0-9_])")
    for p in sorted((TESTS / "golden").rglob("*.read.txt")):
        for sev, group, key in shown.findall(p.read_text()):
            e = declared.get(key)
            assert e is not None, f"{p.name}: {key} is not declared"
            assert (sev, group) == (e.severity.value, e.group.value), f"{p.name}: {key}"
            seen += 1
    assert seen > 0


# Lines of the tests that speak of diagnostics, and the quoted keys in them.
_ABOUT_DIAGNOSTICS = re.compile(r'(?<![\w"])\w+\.key\b(?!")|diagnostics|\bdiags\b|\bkeys\(|FRAMING_KEYS')
_QUOTED_KEY = re.compile(r'"((?:kafka|zookeeper|pulsar|rocketmq|tcp|framing|pipeline)\.[a-z0-9_.]*[a-z0-9_])"')


def test_keys_the_tests_expect_are_declared() -> None:
    declared = _declared()
    missing = []
    count = 0
    for p in sorted(TESTS.rglob("*.py")):
        if any(p.is_relative_to(TESTS / "unit" / d) for d in ("expert", "tui")):
            continue  # the keys they quote are kinds of finding and field keys, not diagnostics
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if not _ABOUT_DIAGNOSTICS.search(line):
                continue
            for key in _QUOTED_KEY.findall(line):
                count += 1
                if key not in declared:
                    missing.append(f"{p.relative_to(ROOT)}:{i}: {key}")
    assert count > 50
    assert not missing, "\n".join(missing)


# -- kdissect fields --diagnostics, and the document -----------------------------------------------

def test_fields_lists_every_diagnostic() -> None:
    lines = _run("fields", "--diagnostics").splitlines()
    declared = _declared()
    assert len(lines) == len(declared)
    rows = {ln.split("\t")[0]: ln.split("\t") for ln in lines}
    assert rows["kafka.trailing_bytes"] == ["kafka.trailing_bytes", "warning", "protocol",
                                            declared["kafka.trailing_bytes"].description]
    assert rows["tcp.gap"][1:3] == ["warning", "sequence"]
    assert rows["zookeeper.truncated"][1:3] == ["error", "malformed"]


def test_fields_lists_one_catalogue_as_json() -> None:
    rows = json.loads(_run("fields", "--diagnostics", "pulsar", "-F", "json"))
    assert {r["protocol"] for r in rows} == {"pulsar"}
    assert {"protocol": "pulsar", "key": "pulsar.checksum", "severity": "error", "group": "checksum",
            "description": "the payload's CRC32-C does not match its bytes"} in rows
    transport = json.loads(_run("fields", "--diagnostics", "transport", "-F", "json"))
    assert [r["key"] for r in transport] == [e.key for e in TRANSPORT]


@pytest.mark.parametrize(("args", "says"), [
    (["fields", "--diagnostics", "nosuch"], "known: kafka, rocketmq, pulsar, zookeeper, transport"),
    (["fields", "-F", "markdown"], "goes with --diagnostics"),
    (["fields", "--diagnostics", "--from", __file__], "takes no --from"),
])
def test_fields_diagnostics_usage_errors(args: list[str], says: str) -> None:
    r = CliRunner().invoke(cli, args)
    assert isinstance(r.exception, UsageError) and says in str(r.exception)


def test_the_document_is_generated_from_the_catalogues() -> None:
    """docs/diagnostics.md is `kdissect fields --diagnostics -F markdown`; regenerate it with
    that command after changing a catalogue."""
    text = _run("fields", "--diagnostics", "-F", "markdown")
    assert DOC.read_text() == text, ("docs/diagnostics.md is out of date: run "
                                     "`kdissect fields --diagnostics -F markdown > docs/diagnostics.md`")
    for key in _declared():
        assert f"| `{key}` |" in text


def test_readme_and_architecture_link_the_document() -> None:
    assert "docs/diagnostics.md" in (ROOT / "README.md").read_text()
    arch = (ROOT / "docs" / "architecture.md").read_text()
    assert "diagnostics.md" in arch and "<proto>/diagnostics.py" in arch
