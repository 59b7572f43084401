"""Field names: Wireshark's Kafka names as aliases (in -Y and `export -F fields -e`), the
request/response pairs `kafka.api_key` selects, and the errors for names and enum values that
exist nowhere."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import CAPTURES, capture_args, shared_captures, shared_path

from kdissect.analysis.fieldkeys import observed_keys
from kdissect.cli import cli
from kdissect.filter import compile_filter, names
from kdissect.kafka import fieldkeys
from kdissect.kafka.wireshark_names import UNMAPPED, WIRESHARK_NAMES
from kdissect.pipeline.core import dissect_file
from kdissect.protocols import DissectorRegistry

PRODUCE = ("kafka", "ajbanjara__Wireshark__kafka-testcases-v4__produce.pcapng")  # tshark: 9092
TRANSACTIONS = CAPTURES / "kafka" / "mock_ck_transactions.pcap"
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


def frames(path: Path, expr: str, *extra: str) -> list[int]:
    code, out, err = run("export", str(path), *extra, "-F", "fields", "-e", "kdissect.frame", "-Y", expr)
    assert code == 0, err
    return [int(x) for x in out.split()]


def tshark_frames(path: Path, expr: str, ports: list[int]) -> list[int]:
    cmd = ["tshark", "-r", str(path), "-Y", expr, "-T", "fields", "-e", "frame.number"]
    for p in ports:
        cmd += ["-d", f"tcp.port=={p},kafka"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    return [int(x) for x in out.split()]


def sidecar_ports(path: Path) -> list[int]:
    args = capture_args(path)
    return [int(a.split("=")[0]) for a in args[1::2] if "=" in a]


# -- the alias table ---------------------------------------------------------------------------

def test_every_wireshark_field_is_mapped_or_listed_unmapped() -> None:
    assert not set(WIRESHARK_NAMES) & set(UNMAPPED)
    assert len(WIRESHARK_NAMES) > 140
    table = {k.key[6:] for k in fieldkeys.field_keys() if k.type != "alias"}
    for name, (kind, targets) in fieldkeys.aliases().items():
        assert kind in ("", "request", "response"), name
        assert targets, name
        for t in targets:  # each target is a key of the table, an info fact or a common key
            assert t in table or t.startswith(("info:", "kdissect.")), (name, t)


def test_fields_lists_both_names() -> None:
    code, out, _ = run("fields", "kafka")
    assert code == 0
    rows = {line.split("\t")[0]: line for line in out.splitlines()}
    assert rows["kafka.correlation_id"].split("\t")[1] == "alias"
    assert "kafka.header.correlation_id" in rows["kafka.correlation_id"]
    assert "wireshark: kafka.correlation_id" in rows["kafka.header.correlation_id"]
    assert "wireshark: kafka.partition_id" in rows["kafka.topic_data.partition_data.index"]
    assert "responses only" in rows["kafka.response_key"]


@pytest.mark.parametrize("proto", ["kafka", "zookeeper"])
def test_every_key_a_capture_holds_is_a_known_name(proto: str) -> None:
    """The name check rejects no key a real message carries."""
    voc = names.vocabularies()[proto]
    paths = sorted((CAPTURES / proto).glob("*.pcap*"))
    with contextlib.suppress(pytest.skip.Exception):  # the project's captures alone, without ../shared
        paths += shared_captures(proto)
    unknown = {}
    for path in paths:
        decode_as = {int(a.split("=")[0]): a.split("=")[1] for a in capture_args(path)[1::2] if "=" in a}
        registry = DissectorRegistry(decode_as=decode_as)
        for k in observed_keys(dissect_file(str(path), registry), proto)[0]:
            if not voc.knows(k.key):
                unknown.setdefault(k.key, path.name)
    assert not unknown


# -- aliases in filters and field exports ------------------------------------------------------

def test_api_key_selects_whole_pairs() -> None:
    path = TRANSACTIONS
    args = capture_args(path)
    code, out, err = run("export", str(path), *args, "-F", "jsonl", "-Y", "kafka.api_key == Produce")
    assert code == 0, err
    msgs = [json.loads(line) for line in out.splitlines()]
    requests = [m for m in msgs if m["kind"] == "request"]
    responses = [m for m in msgs if m["kind"] == "response"]
    assert requests and len(requests) == len(responses)
    assert {m["info"]["op"] for m in msgs} == {"Produce"}
    assert {m["match"]["frame"] for m in requests} == {m["frame"] for m in responses}
    assert frames(path, "kafka.api_key == 0", *args) == frames(path, "kafka.op_code == 0", *args)
    versions = {m["info"]["version"] for m in msgs}
    (v,) = versions
    assert frames(path, f"kafka.api_key == 0 && kafka.api_version == {v}", *args) == [m["frame"] for m in msgs]
    assert frames(path, "kafka.request_key == 0", *args) == [m["frame"] for m in requests]
    assert frames(path, "kafka.response_key == 0", *args) == [m["frame"] for m in responses]


# Shared captures tshark 4.0 decodes: (capture, API keys whose frames are exactly tshark's).
TSHARK_EXACT = [
    ("deepflowio__deepflow__00-produce-v2.pcap", (0,)),
    ("gen__mock_kp_api_0_8_2.pcap", (1, 3)),
    ("gen__mock_kp_api_0_10.pcap", (1, 3)),
    ("gen__mock_ck_old_protocol_v0.pcap", (1, 3)),
]


def _shared_kafka(name: str) -> tuple[Path, list[str], list[int]]:
    path = shared_path("captures", "kafka", name)
    ports = sidecar_ports(path) or [9092]
    return path, [a for p in ports for a in ("--decode-as", f"{p}=kafka")], ports


@needs_tshark
@pytest.mark.parametrize(("name", "keys"), TSHARK_EXACT)
def test_api_key_frames_agree_with_tshark(name: str, keys: tuple[int, ...]) -> None:
    """`kafka.api_key == K` gives tshark's frames: requests and their responses."""
    path, args, ports = _shared_kafka(name)
    for key in keys:
        expr = f"kafka.api_key == {key}"
        ours = frames(path, expr, *args)
        assert ours == tshark_frames(path, expr, ports), expr
        assert frames(path, f"{expr} && kdissect.kind == response", *args), expr


@needs_tshark
@pytest.mark.parametrize("name", [PRODUCE[1], "gen__mock_kp_api_0_8_2.pcap", "gen__mock_ck_old_protocol_v0.pcap"])
def test_produce_pairs_where_tshark_loses_the_request(name: str) -> None:
    """Where tshark cannot decode a Produce request (message sets it calls malformed, which
    kdissect decodes), it cannot give the response an API key: kdissect's frames are tshark's
    plus exactly those responses, each paired with a request both select."""
    path, args, ports = _shared_kafka(name)
    ours = frames(path, "kafka.api_key == 0", *args)
    theirs = tshark_frames(path, "kafka.api_key == 0", ports)
    assert set(theirs) <= set(ours)
    extra = sorted(set(ours) - set(theirs))
    theirs_set = " ".join(map(str, theirs))
    assert extra == frames(path, f"kafka.response_key == 0 && not kdissect.frame in {{{theirs_set}}}", *args)
    requests = frames(path, "kafka.request_key == 0", *args)
    assert set(requests) <= set(theirs)
    assert len(ours) == 2 * len(requests)


@needs_tshark
def test_alias_field_values_agree_with_tshark() -> None:
    path = shared_path("captures", *PRODUCE)
    wanted = ["kafka.api_key", "kafka.correlation_id", "kafka.topic_name", "kafka.partition_id", "kafka.client_id",
              "kafka.required_acks", "kafka.error"]
    cmd = ["tshark", "-r", str(path), "-d", "tcp.port==9092,kafka", "-Y", "kafka && !_ws.malformed", "-T",
           "fields", "-e", "frame.number", "-E", "aggregator=,"]
    for f in wanted:
        cmd += ["-e", f]
    theirs = {int(line.split("\t")[0]): line.split("\t")[1:]
              for line in subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout.splitlines()}
    es = [x for f in ["kdissect.frame", *wanted] for x in ("-e", f)]
    code, out, err = run("export", str(path), "--decode-as", "9092=kafka", "-F", "fields", *es,
                         "-E", "aggregator=,")
    assert code == 0, err
    ours = {int(line.split("\t")[0]): line.split("\t")[1:] for line in out.splitlines()}
    compared = 0
    for frame, cols in theirs.items():
        if frame in ours and cols[0]:  # a response tshark could pair with its request
            assert ours[frame] == cols, frame
            compared += 1
    assert compared >= 12


def test_aliases_and_own_keys() -> None:
    """A Wireshark name that is an info fact takes Wireshark's meaning (kafka.error: every error
    code field); one that is a key of the tree keeps kdissect's (kafka.producer_id: the root
    field, not the batches' producer ids)."""
    path = TRANSACTIONS
    args = capture_args(path)
    code, out, err = run("export", str(path), *args, "-F", "jsonl")
    assert code == 0, err
    msgs = [json.loads(line) for line in out.splitlines()]

    def has_error_field(node: object) -> bool:
        if isinstance(node, dict):
            return "error_code" in node or any(has_error_field(v) for v in node.values())
        return isinstance(node, list) and any(has_error_field(v) for v in node)

    assert frames(path, "kafka.error", *args) == [m["frame"] for m in msgs if has_error_field(m["fields"])]
    assert frames(path, "kafka.producer_id", *args) == [m["frame"] for m in msgs if "producer_id" in m["fields"]]
    batches = frames(path, "kafka.topic_data.partition_data.records.producer_id", *args)
    assert batches and not set(batches) & set(frames(path, "kafka.producer_id", *args))
    assert frames(path, "kafka.correlation_id == 2", *args) == frames(path, "kafka.header.correlation_id == 2", *args)


# -- names and values that exist nowhere -------------------------------------------------------

def _error(expr: str) -> tuple[list[str], int]:
    """The command line's standard error for a filter that must fail (exit 2, nothing printed)."""
    r = subprocess.run([sys.executable, "-m", "kdissect", "read", str(TRANSACTIONS), "-Y", expr],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    return r.stderr.rstrip("\n").split("\n"), r.returncode


def test_unknown_field_name() -> None:
    expr = "kafka.api_key == 0 && kafka.corelation_id == 1"
    lines, _ = _error(expr)
    assert lines == [
        'kdissect: error: -Y: "kafka.corelation_id" is neither a field nor a protocol name.',
        expr,
        " " * expr.index("kafka.corelation_id") + "^",
        "did you mean kafka.correlation_id?",
    ]


def test_an_unknown_name_of_any_length_is_cut_in_the_error() -> None:
    # A 100 KB name was written whole twice (in the message and the expression).
    name = "kafka." + ".".join(["a"] * 50_000)
    expr = f"kafka.api_key == 0 and {name} == 1"
    lines, _ = _error(expr)
    assert lines[0] == f'kdissect: error: -Y: "{name[:79]}…" is neither a field nor a protocol name.'
    assert lines[1] == expr[:160] + "…"
    assert lines[2] == " " * expr.index(name) + "^"
    assert max(map(len, lines)) < 300


def test_unknown_field_name_in_another_protocol() -> None:
    lines, _ = _error("zookeeper.pth == /a")
    assert lines[0] == 'kdissect: error: -Y: "zookeeper.pth" is neither a field nor a protocol name.'
    assert lines[2] == "^"
    assert lines[3] == "did you mean zookeeper.path?"


def test_unknown_enum_name() -> None:
    expr = "kafka.error_code == NOT_LEADER_OR_FOLOWER"
    lines, _ = _error(expr)
    assert lines == [
        'kdissect: error: -Y: "NOT_LEADER_OR_FOLOWER" is not a value of kafka.error_code.',
        expr,
        " " * expr.index("NOT_") + "^",
        "did you mean NOT_LEADER_OR_FOLLOWER?",
    ]
    lines, _ = _error("kafka.api_key in {Produce Fecth}")
    assert lines[2] == " " * len("kafka.api_key in {Produce ") + "^"
    assert lines[3] == "did you mean Fetch?"
    lines, _ = _error("kafka.error_code == NOT_A_REAL_ERROR")
    assert lines[0].endswith('"NOT_A_REAL_ERROR" is not a value of kafka.error_code.')


def test_names_that_exist_are_accepted() -> None:
    for expr in ("kafka.error_code == not_leader_or_follower", "kafka.api_key == produce",
                 "kafka.topic_data.partition_data.records.records.headers.key == a",
                 "kafka.assignment.user_data", "kafka.responses.partitions.records.records.control.type_name",
                 "kafka.topics.partitions.unknown_fields", "kafka.undecoded", "zookeeper.ops.path == /a",
                 "pulsar.anything.at_all", "kafka.topics.name_name", "kafka.error == 6"):
        compile_filter(expr)
    code, _, err = run("export", str(TRANSACTIONS), "-F", "fields", "-e", "kafka.correlation_id", "-e",
                       "kafka.topics.name_name", "-e", "frame.number", "-e", "kafka")
    assert code == 0, err


def test_export_field_names_are_checked_as_filter_names() -> None:
    """-e names are those -Y takes: an unknown or malformed one is a one-line error, exit 2."""
    for key, said in (("kafka.nosuch", '"kafka.nosuch" is neither a field nor a protocol name; did you mean kafka.nodes?'),
                      ("kafka.corelation_id", '"kafka.corelation_id" is neither a field nor a protocol name; '
                                              "did you mean kafka.correlation_id?"),
                      ("kafka..x", "'kafka..x' is not a field name"),
                      ("12", "'12' is not a field name"),
                      ("foo.bar", "unknown protocol or field 'foo.bar'")):
        r = subprocess.run([sys.executable, "-m", "kdissect", "export", str(TRANSACTIONS), "-F", "fields",
                            "-e", "kafka.api_key", "-e", key], capture_output=True, text=True, timeout=120)
        assert (r.returncode, r.stdout, r.stderr) == (2, "", f"kdissect: error: -e {key}: {said}\n")
