"""The help kdissect gives besides --help: the manual page docs/kdissect.1 (generated from the
click commands by tools/gen_manpage.py), shell completion (docs/completion.md) and --version."""

from __future__ import annotations

import csv
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import click
import pytest
from click.testing import CliRunner
from support import ROOT, shared_path

from kdissect import __version__
from kdissect.cli import cli

PAGE = ROOT / "docs" / "kdissect.1"
SECTIONS = ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "ENVIRONMENT", "EXIT STATUS",
            "FILES", "SEE ALSO"]


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _render_warnings(roff: str) -> tuple[str, str]:
    """(the page as text, the formatter's warnings), with groff or else man; skips without
    either."""
    if shutil.which("groff"):
        cmd = ["groff", "-man", "-Tutf8", "-ww"]
    elif shutil.which("man"):
        cmd = ["man", "--warnings=w", "-l", "-Tutf8", "-"]
    else:
        pytest.skip("neither groff nor man is installed")
    r = subprocess.run(cmd, input=roff.encode(), capture_output=True, check=False,
                       env={**os.environ, "MANWIDTH": "100", "LC_ALL": "C.UTF-8"})
    assert r.returncode == 0, r.stderr.decode()
    text = re.sub(r".\x08", "", r.stdout.decode("utf-8"))  # overstrike bold and underline
    return text, r.stderr.decode()


# -- the manual page --------------------------------------------------------------------------

def test_manpage_is_up_to_date() -> None:
    text = _tool("gen_manpage").render()
    assert PAGE.read_text(encoding="utf-8") == text, "docs/kdissect.1: regenerate with tools/gen_manpage.py"


def test_manpage_renders_without_warnings() -> None:
    text, warnings = _render_warnings(PAGE.read_text(encoding="utf-8"))
    assert warnings == ""
    heads = [s for s in SECTIONS if re.search(rf"^{s}$", text, re.M)]
    assert heads == SECTIONS
    assert f"kdissect {__version__}" in text
    assert "tshark(1), wireshark-filter(4)" in text


def test_manpage_has_every_command_and_option() -> None:
    page = PAGE.read_text(encoding="utf-8")
    ctx = click.Context(cli, info_name="kdissect", **cli.context_settings)
    heads = re.findall(r'^\.SS "kdissect (\S+)', page, re.M)
    assert heads == cli.list_commands(ctx)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        section = page.split(f'.SS "kdissect {name} ', 1)[1].split("\n.SS ", 1)[0]
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                for opt in param.opts:
                    assert f"\\fB{opt.replace('-', chr(92) + '-')}\\fR" in section, (name, opt)
    assert "\\fB\\-\\-version\\fR" in page.split(".SH COMMANDS")[0]


def test_environment_lists_only_variables_kdissect_reads() -> None:
    gen = _tool("gen_manpage")
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "kdissect").rglob("*.py"))
    for name, _ in gen.ENVIRONMENT:
        assert re.search(rf"""\.get\(["']{name}["']|\[["']{name}["']\]""", source), f"{name} is not read by kdissect"
    assert {"NO_COLOR", "SSLKEYLOGFILE", "KDISSECT_PURE"} <= {n for n, _ in gen.ENVIRONMENT}
    for name, _ in gen.FILES:
        if name.startswith("docs/"):
            assert (ROOT / name).is_file(), name


def test_exit_statuses_are_the_ones_main_uses() -> None:
    gen = _tool("gen_manpage")
    cli_source = (ROOT / "kdissect" / "cli.py").read_text(encoding="utf-8")
    used = {"0"} | set(re.findall(r"sys\.exit\((\d+)\)", cli_source)) | {"2"}
    documented = {code for code, _ in gen.EXIT_STATUS}
    assert used <= documented and documented <= used | {"1"}


def test_generator_escapes_roff_and_walks_nested_groups() -> None:
    gen = _tool("gen_manpage")

    @click.group(context_settings={"help_option_names": ["-h", "--help"]})
    def toy() -> None:
        """Toy analyzer, for tests."""

    @toy.group()
    def outer() -> None:
        """.starts with a dot\\ and a backslash: C:\\temp, 5 µs → done."""

    @outer.command()
    @click.option("-n", "--num-items", metavar="N", help="`code` and 'quotes'.")
    def inner(num_items: str) -> None:
        """First paragraph
        continued.

        \b
        kept   as
          written

        Shown.\f
        Not shown."""

    @toy.command(hidden=True)
    def invisible() -> None:
        """Hidden."""

    roff = gen.render(toy)
    assert '.SS "kdissect outer [OPTIONS] COMMAND [ARGS]..."' in roff
    assert '.SS "kdissect outer inner [OPTIONS]"' in roff
    assert "invisible" not in roff and "Not shown" not in roff
    assert "\\&.starts with a dot\\e and a backslash: C:\\etemp, 5 \\[u00B5]s \\[u2192] done." in roff
    assert "\\fB\\-n\\fR, \\fB\\-\\-num\\-items\\fR \\fIN\\fR" in roff
    text, warnings = _render_warnings(roff)
    assert warnings == ""
    assert ".starts with a dot\\ and a backslash: C:\\temp, 5 µs → done." in text
    assert "First paragraph continued." in text
    assert re.search(r"^\s+kept   as\n\s+  written$", text, re.M)
    assert "code and 'quotes'." in text


def test_generator_writes_the_page(tmp_path: Path) -> None:
    out = tmp_path / "k.1"
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_manpage.py"), str(out)],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert out.read_text(encoding="utf-8") == PAGE.read_text(encoding="utf-8")


# -- shell completion -------------------------------------------------------------------------

def _complete(shell: str, words: str, cword: str) -> list[str]:
    """What the kdissect entry point prints for click's completion protocol."""
    env = {**os.environ, "_KDISSECT_COMPLETE": f"{shell}_complete", "COMP_WORDS": words, "COMP_CWORD": cword}
    r = subprocess.run([sys.executable, "-c", "from kdissect.cli import main; main()"],
                       capture_output=True, text=True, env=env, check=False, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script_is_produced(shell: str) -> None:
    env = {**os.environ, "_KDISSECT_COMPLETE": f"{shell}_source"}
    r = subprocess.run([sys.executable, "-c", "from kdissect.cli import main; main()"],
                       capture_output=True, text=True, env=env, check=False)
    assert r.returncode == 0, r.stderr
    assert f"_KDISSECT_COMPLETE={shell}_complete" in r.stdout
    assert "_kdissect_completion" in r.stdout
    assert f"_KDISSECT_COMPLETE={shell}_source kdissect" in (ROOT / "docs" / "completion.md").read_text()


def test_bash_completes_commands() -> None:
    assert _complete("bash", "kdissect re", "1") == ["plain,read", "plain,report"]
    ctx = click.Context(cli, info_name="kdissect")
    assert _complete("bash", "kdissect ", "1") == [f"plain,{n}" for n in cli.list_commands(ctx)]


def test_lazily_loaded_commands_complete() -> None:
    # stats, sniff and spark live in modules imported only when they run.
    assert _complete("bash", "kdissect s", "1") == ["plain,sniff", "plain,spark", "plain,stats"]
    assert "plain,--top" in _complete("bash", "kdissect stats --t", "2")
    assert _complete("bash", "kdissect stats --format ", "3") == ["plain,text", "plain,json"]
    zsh = _complete("zsh", "kdissect sta", "1")
    assert zsh[:2] == ["plain", "stats"]
    fish = _complete("fish", "kdissect stats", "--to")
    assert fish and fish[0].startswith("plain,--top\t")


def test_option_values_and_files_complete() -> None:
    assert _complete("bash", "kdissect export --format j", "3") == ["plain,json", "plain,jsonl"]
    assert _complete("bash", "kdissect read capt", "2") == ["file,capt"]


# -- --version ---------------------------------------------------------------------------------

def test_version_names_the_specifications() -> None:
    from kdissect.kafka.apis import APIS, SPEC_SOURCE, SPEC_VERSION
    from kdissect.pulsar.schema_table import ENUMS, PROTOCOL_VERSION

    r = CliRunner().invoke(cli, ["--version"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0] == f"kdissect {__version__}"
    assert SPEC_VERSION and SPEC_SOURCE
    kafka = next(s for s in lines if s.strip().startswith("Kafka:"))
    assert f"Apache Kafka {SPEC_VERSION} " in kafka and SPEC_SOURCE.split("@")[1][:12] in kafka
    assert f"API keys {min(APIS)}-{max(APIS)}" in kafka
    pulsar = next(s for s in lines if s.strip().startswith("Pulsar:"))
    assert pulsar.endswith(f"protocol version v{PROTOCOL_VERSION}")
    assert f"v{PROTOCOL_VERSION}" == ENUMS["ProtocolVersion"][max(ENUMS["ProtocolVersion"])]


def test_version_is_eager_and_exits() -> None:
    r = CliRunner().invoke(cli, ["--version", "read", "/no/such/file"])
    assert r.exit_code == 0 and r.output.startswith(f"kdissect {__version__}\n")


def test_version_without_a_recorded_kafka_release(monkeypatch: pytest.MonkeyPatch) -> None:
    import kdissect.kafka.apis as apis
    from kdissect.versions import version_text

    monkeypatch.setattr(apis, "SPEC_VERSION", None)
    assert "Apache Kafka message specifications (version not recorded)" in version_text()


def test_kafka_spec_source_is_where_most_spec_files_come_from() -> None:
    from kdissect.kafka.apis import SPEC_SOURCE

    manifest = shared_path("kafka-spec", "MANIFEST.tsv")
    with manifest.open(encoding="utf-8", newline="") as fh:
        sources = [row["source"] for row in csv.DictReader(fh, delimiter="\t")]
    assert max(set(sources), key=sources.count) == SPEC_SOURCE


def test_kafka_generator_needs_the_release_of_its_source() -> None:
    gen = _tool("gen_kafka_schema")
    assert gen.spec_release(None) == (None, None)
    source = next(iter(gen.KAFKA_VERSIONS))
    assert gen.spec_release({source: 3, "x/y@1": 1}) == (source, gen.KAFKA_VERSIONS[source])
    with pytest.raises(SystemExit, match="KAFKA_VERSIONS"):
        gen.spec_release({"apache/kafka@0000000000000000000000000000000000000000": 5})
