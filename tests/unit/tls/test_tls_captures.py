"""TLS on the project's captures of real clients behind a TLS terminator (captures/tls, made by
tools/gen_tls_captures.py). Each capture holds both legs of the same messages: client <-> TLS
terminator (encrypted) and terminator <-> broker (in clear). The decrypted messages must equal
the clear ones field by field."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support import CAPTURES, capture_args, sidecar_decode_as

from kdissect.cli import cli

TLS_CAPTURES = sorted((CAPTURES / "tls").glob("*.pcap"))
VERSIONS = {"TLSv1.3": "TLS 1.3", "TLSv1.2": "TLS 1.2"}


def meta(path: Path) -> dict[str, Any]:
    return json.loads(path.with_suffix(".json").read_text())


def run(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(cli, list(args), env=env)


def export(path: Path, *extra: str) -> tuple[list[dict[str, Any]], str]:
    ports = [a for port, name in sidecar_decode_as(path, "").items() for a in ("--decode-as", f"{port}={name}")]
    r = run("export", str(path), "-F", "jsonl", *ports, *extra)
    assert r.exit_code == 0, r.output
    return [json.loads(line) for line in r.stdout.splitlines()], r.stderr


def on_port(msgs: list[dict[str, Any]], port: int) -> list[dict[str, Any]]:
    end = f":{port}"
    return [m for m in msgs if m["src"].endswith(end) or m["dst"].endswith(end)]


def content(m: dict[str, Any]) -> tuple[Any, ...]:
    """What a message says, whichever leg carried it (not where or when)."""
    return (m["kind"], m["protocol"], re.sub(r" \([\d.]+ [mµ]s\)$", "", m["summary"]), m["length"],
            json.dumps(m["info"], sort_keys=True), json.dumps(m["fields"], sort_keys=True),
            json.dumps(m["diagnostics"]))


@pytest.mark.parametrize("path", TLS_CAPTURES, ids=lambda p: p.name)
def test_decrypted_messages_equal_the_clear_leg(path: Path) -> None:
    m = meta(path)
    msgs, _ = export(path, "--tls-keylog", str(path.with_suffix(".keys")))
    tls, clear = on_port(msgs, m["tls_port"]), on_port(msgs, m["clear_port"])
    assert clear and all("tls" not in x for x in clear)
    assert all(x["tls"]["version"] == VERSIONS[m["tls_settings"]["version"]] for x in tls)
    assert {x["tls"]["cipher"] for x in tls} == set(m["tshark_check"]["cipher_suites"])
    if "keylog_removed" in m:
        # One connection's secrets are not in the key log: its messages are missing, the rest equal.
        assert len(clear) - len(tls) == 6  # ApiVersions, ListOffsets and Fetch, requests and responses
        assert not Counter(map(content, tls)) - Counter(map(content, clear))
    else:
        assert sorted(map(content, tls)) == sorted(map(content, clear))
    # Requests and responses decrypted on the same connection are matched to each other.
    assert all(x["match"] is not None for x in tls if x["kind"] in ("request", "response")
               and x["protocol"] == "kafka")


def test_the_partial_key_log_names_the_missing_connection() -> None:
    path = CAPTURES / "tls" / "kafka_tls13_partial_keylog.pcap"
    missing = meta(path)["keylog_removed"]
    removed = missing["client_random"] if isinstance(missing, dict) else missing
    r = run("conversations", str(path), "-F", "json", "--tls-keylog", str(path.with_suffix(".keys")))
    assert r.exit_code == 0, r.output
    rows = [row for row in json.loads(r.stdout) if row["tls"]]
    undone = [row for row in rows if not row["tls"]["decrypted"]]
    assert len(undone) == 1 and len(rows) == 6
    diags = undone[0]["tls"]["diagnostics"]
    assert [d["key"] for d in diags] == ["tls.no_secret"] and removed in diags[0]["message"]
    assert undone[0]["protocol"] is None
    assert "1 TLS conversation not decrypted: the key log holds no secret for them" in r.stderr


def test_without_a_key_log_the_conversations_are_listed_as_tls() -> None:
    path = CAPTURES / "tls" / "kafka_tls12_cbc_mte.pcap"
    m = meta(path)
    msgs, err = export(path)
    assert msgs and not on_port(msgs, m["tls_port"])  # the clear leg still decodes
    assert "6 TLS conversations not decrypted: no key log given" in err
    r = run("conversations", str(path))
    assert r.exit_code == 0
    assert r.stdout.count("TLS 1.2 TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA (not decrypted: tls.no_keylog)") == 6


def test_a_wrong_key_is_reported_once_per_connection(tmp_path: Path) -> None:
    path = CAPTURES / "tls" / "kafka_tls13_chacha20.pcap"
    lines = path.with_suffix(".keys").read_text().splitlines()
    wrong = tmp_path / "wrong.keys"
    wrong.write_text("".join(f"{x[:-2]}{'00' if x[-2:] != '00' else '11'}\n" for x in lines if x and x[0] != "#"))
    msgs, err = export(path, "--tls-keylog", str(wrong))
    assert not on_port(msgs, meta(path)["tls_port"])
    assert "6 TLS conversations stopped decrypting: records that do not authenticate" in err
    r = run("conversations", str(path), "-F", "json", "--tls-keylog", str(wrong))
    rows = [row for row in json.loads(r.stdout) if row["tls"]]
    assert len(rows) == 6
    assert all([d["key"] for d in row["tls"]["diagnostics"]] == ["tls.bad_key"] for row in rows)


def test_the_secrets_never_appear_in_any_output() -> None:
    path = CAPTURES / "tls" / "kafka_tls12_resumption.pcap"
    keys = path.with_suffix(".keys")
    secrets = {line.split()[2].lower() for line in keys.read_text().splitlines() if line and line[0] != "#"}
    args = capture_args(path)
    outputs = [run("read", str(path), "-V", "-x", "--no-color", *args), run("export", str(path), *args),
               run("conversations", str(path), "-F", "json", *args), run("stats", str(path), *args)]
    for r in outputs:
        assert r.exit_code == 0, r.output
        text = (r.stdout + r.stderr).lower().replace(" ", "")
        assert not any(s in text or s[:16] in text for s in secrets)


def test_the_tshark_spelling_and_the_environment_variable(tmp_path: Path) -> None:
    path = CAPTURES / "tls" / "kafka_tls13_aes256gcm.pcap"
    keys = str(path.with_suffix(".keys"))
    want = run("read", str(path), "--tls-keylog", keys).stdout
    assert want.count("🔒") == 36
    assert run("read", str(path), "-o", f"tls.keylog_file:{keys}").stdout == want
    assert run("read", str(path), env={"SSLKEYLOGFILE": keys}).stdout == want
    out = tmp_path / "out.json"
    r = run("export", str(path), "-o", f"tls.keylog_file:{keys}", "-o", str(out), "-F", "jsonl")
    assert r.exit_code == 0 and sum('"tls"' in line for line in out.read_text().splitlines()) == 36


@pytest.mark.parametrize("args", [["--tls-keylog", "/nonexistent/keys.log"], ["-o", "tls.keylog_file:/nonexistent"],
                                  ["-o", "tls.nonsense:1"], ["-o", "novalue"]])
def test_bad_key_log_options_are_one_line_errors(args: list[str]) -> None:
    r = run("read", str(TLS_CAPTURES[0]), *args)
    assert r.exit_code == 2
    assert len([line for line in r.output.splitlines() if line.startswith("Error")]) == 1


def test_verbose_output_names_the_connection() -> None:
    path = CAPTURES / "tls" / "zk_tls13.pcap"
    r = run("read", str(path), "-V", "--no-color", *capture_args(path))
    assert r.exit_code == 0
    assert "decrypted from TLS 1.3, TLS_AES_256_GCM_SHA384" in r.stdout
    assert r.stdout.count("ZOOKEEPER 🔒") == 44
