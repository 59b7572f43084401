"""The `kdissect tui` app driven headless (Textual's pilot) over a real capture: every pane,
view and key."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest
from app_support import TRANSACTIONS, drive, loaded_store, make_app, screen_text, settle
from click.testing import CliRunner
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Input

from kdissect.cli import cli
from kdissect.tui.app import progress_text
from kdissect.tui.keys import KEYS
from kdissect.tui.screens.follow import FollowScreen
from kdissect.tui.screens.help import HelpScreen, help_table
from kdissect.tui.screens.prompt import PromptScreen
from kdissect.tui.screens.stats import StatsScreen
from kdissect.tui.store import Progress
from kdissect.tui.widgets.message_list import MessageList

FETCHES = "kafka.api_key == 1"  # 4 Fetch requests and their 4 responses


def read_lines(*args: str) -> list[str]:
    res = CliRunner().invoke(cli, ["read", "--no-color", *args, str(TRANSACTIONS)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output.splitlines()


def frame_of(app: object) -> int:
    lst = app.msg_list  # type: ignore[attr-defined]
    return int(app.store.row(lst.selected).frame)  # type: ignore[attr-defined]


def test_list_shows_reads_columns_and_rows() -> None:
    app = make_app()
    lines = read_lines()

    async def script(pilot: Pilot[None]) -> None:
        text = screen_text(app)
        assert "No." in text and "Time" in text and "Source" in text and "Destination" in text
        assert "Protocol" in text and "Info" in text
        # read's first line: frame 4, 0.000160 s after the first packet, the addresses, the summary.
        first = lines[0].split()
        assert first[:4] == ["4", "0.000160", "127.0.0.1:36594", "→"]
        row = next(line for line in text.splitlines() if " 4 " in line and "0.000160" in line)
        assert "127.0.0.1:36594" in row and "127.0.0.1:43973" in row and "KAFKA" in row
        assert "ApiVersions v3 request corr=1" in row
        assert app.msg_list.count == len(lines) == 86
        assert "86 messages" in text and "done" in text

    drive(app, script, size=(120, 40))


def test_cursor_keys_move_and_the_tree_follows() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        assert frame_of(app) == 4
        await pilot.press("j", "j")
        assert frame_of(app) == 8
        await pilot.press("k")
        assert frame_of(app) == 6
        await pilot.press("G")
        assert app.msg_list.cursor == 85
        await pilot.press("g")
        assert frame_of(app) == 4
        await pilot.press("pagedown")
        assert app.msg_list.cursor == app.msg_list.page_size
        await pilot.press("down")
        await pilot.pause()
        tree, selected = app.field_tree, app.msg_list.selected
        assert selected is not None and tree.message is app.store.message(selected)
        assert tree.rows[0].label.startswith(f"frames: {frame_of(app)} ")

    drive(app, script)


def test_matched_request_is_flagged_and_m_goes_to_it() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        # the request in frame 4 is answered in frame 6: the response carries the sign
        assert app.msg_list.peer == 1
        assert any(line.lstrip().startswith("⇄      6") for line in screen_text(app).splitlines())
        await pilot.press("m")
        assert frame_of(app) == 6
        await pilot.press("m")
        assert frame_of(app) == 4

    drive(app, script)


def test_hex_highlight_follows_the_tree_selection() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("tab")
        assert app.focused is app.field_tree
        labels = [r.label for r in app.field_tree.rows]
        await pilot.press(*["j"] * labels.index("api_key: ApiVersions (18)"))
        row = app.field_tree.current
        assert row is not None and row.span == (4, 2)
        assert app.hex_view.span == (4, 2)
        lit = [(line.offset, line.highlighted) for line in app.hex_view.lines if line.highlighted]
        assert lit == [(0, (4, 5))]
        await pilot.press("j", "j")  # correlation_id: 4 bytes at 8
        assert app.hex_view.span == (8, 4)
        assert [line.highlighted for line in app.hex_view.lines if line.highlighted] == [(8, 9, 10, 11)]

    drive(app, script)


def test_tree_expands_and_collapses() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("tab")
        ids = [r.id for r in app.field_tree.rows]
        assert "1.0" in ids  # the header is open by default
        await pilot.press(*["j"] * ids.index("1"), "enter")
        assert "1.0" not in [r.id for r in app.field_tree.rows]
        await pilot.press("l")
        assert "1.0" in [r.id for r in app.field_tree.rows]
        await pilot.press("j", "h")  # on a leaf, left goes to the parent
        assert app.field_tree.current is not None and app.field_tree.current.id == "1"
        await pilot.press("E")
        assert all(r.depth == 0 for r in app.field_tree.rows)
        await pilot.press("e")
        assert any(r.depth == 1 for r in app.field_tree.rows)

    drive(app, script)


def test_filter_applies_like_read_minus_y() -> None:
    app = make_app()
    expected = [int(line.split()[0]) for line in read_lines("-Y", FETCHES)]

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("slash")
        assert app.focused is app.bar.input
        await pilot.press(*FETCHES, "enter")
        await settle(pilot, app)
        assert app.view is not None and app.view.expr == FETCHES
        app.tick()
        frames = [app.store.row(app.view.index(p)).frame for p in range(len(app.view))]
        assert frames == expected and len(frames) == 8
        assert app.focused is app.msg_list
        assert "filter: 8 shown" in screen_text(app)
        await pilot.press("slash", "ctrl+a", "ctrl+k", "enter")  # an empty filter shows everything
        assert app.view is None and app.msg_list.count == 86

    drive(app, script)


def test_bad_filter_is_red_with_its_position() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("slash", *"kafka.api_key == 1 &&", "space")
        await pilot.pause()
        inp = app.bar.input
        assert inp.has_class("-bad") and app.bar.has_class("-bad")
        assert inp.problem is not None
        reason, pos = inp.problem
        problem = app.store.check_filter(inp.value)
        assert problem is not None and (reason, pos) == (problem.message, problem.pos)
        error = str(app.query_one("#filter-error").render())
        assert f"(column {pos + 1})" in error
        assert error.index("^") == len("Filter: ") + pos
        await pilot.press("enter")
        assert app.view is None and app.msg_list.count == 86  # not applied
        await pilot.press("backspace", "backspace", "backspace", "backspace")
        await pilot.pause()
        assert not inp.has_class("-bad") and not app.bar.has_class("-bad")

    drive(app, script)


def test_unknown_field_is_reported_at_its_column() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("slash", *"kafka.nosuchfield == 1")
        await pilot.pause()
        assert app.bar.input.problem is not None
        assert app.bar.input.problem[1] == 0
        assert "nosuchfield" in app.bar.input.problem[0]

    drive(app, script)


def test_filter_history_walks_with_up_and_down() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        for expr in ("kafka.api_key == 1", "kafka.api_key == 18"):
            await pilot.press("slash", "ctrl+a", "ctrl+k", *expr, "enter")
        await pilot.press("slash", "ctrl+a", "ctrl+k", *"kafka")
        inp = app.bar.input
        await pilot.press("up")
        assert inp.value == "kafka.api_key == 18"
        await pilot.press("up")
        assert inp.value == "kafka.api_key == 1"
        await pilot.press("up")
        assert inp.value == "kafka.api_key == 1"
        await pilot.press("down", "down")
        assert inp.value == "kafka"  # back to what was being typed
        await pilot.press("escape")
        assert app.focused is app.msg_list

    drive(app, script)


def test_apply_and_prepare_as_filter_from_the_tree() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("tab")
        ids = [r.id for r in app.field_tree.rows]
        await pilot.press(*["j"] * ids.index("1.1"))  # api_version: 3
        await pilot.press("p")
        assert app.bar.input.value == "kafka.header.api_version == 3"
        assert app.focused is app.bar.input and app.view is None
        await pilot.press("escape", "tab")
        await pilot.press("a")
        await settle(pilot, app)
        assert app.view is not None and app.view.expr == "kafka.header.api_version == 3"
        expected = [int(line.split()[0]) for line in read_lines("-Y", "kafka.header.api_version == 3")]
        assert [app.store.row(app.view.index(p)).frame for p in range(len(app.view))] == expected
        assert app.store.row(app.msg_list.selected).frame == 4  # the message it came from stays selected

    drive(app, script)


def test_jump_to_a_frame() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("ctrl+g")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press(*"25", "enter")
        assert frame_of(app) == 25
        await pilot.press("colon", *"122", "enter")
        assert frame_of(app) == 122
        await pilot.press("colon", *"26", "escape")
        assert frame_of(app) == 122

    drive(app, script)


def test_follow_lists_the_conversation_and_enter_jumps_back() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(app.screen, FollowScreen)
        text = screen_text(app)
        assert "Stream 0: 127.0.0.1:36594 ⇄ 127.0.0.1:43973 — 6 messages" in text
        arrows = [line for line in text.splitlines() if "KAFKA" in line]
        assert len(arrows) == 6
        assert ["→" in a for a in arrows] == [True, False, True, False, True, False]
        assert ["←" in a for a in arrows] == [False, True, False, True, False, True]
        await pilot.press("j", "j", "j", "enter")
        await pilot.pause()
        assert not isinstance(app.screen, FollowScreen)
        assert frame_of(app) == 9

    drive(app, script)


def test_stats_and_histogram_screens() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("s")
        await settle(pilot, app)
        assert isinstance(app.screen, StatsScreen)
        text = screen_text(app)
        assert "mock_ck_transactions.pcap: 86 messages" in text
        assert "Service response time" in text and "ApiVersions" in text
        await pilot.press("escape", "r")
        await settle(pilot, app)
        text = screen_text(app)
        responses = app.store.response_times()["kafka"].count
        assert f"kafka response time (ms, {responses} responses)" in text
        assert "█" in text

    drive(app, script, size=(120, 40))


def test_stats_of_a_filter() -> None:
    app = make_app(display_filter=FETCHES)

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot, app)
        await pilot.press("s")
        await settle(pilot, app)
        text = screen_text(app)
        assert f"(filter: {FETCHES}): 8 messages" in text
        assert "Fetch" in text and "ApiVersions" not in text

    drive(app, script, size=(120, 40))


def test_search_in_the_tree_with_n_and_shift_n() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("ctrl+f", *"client", "enter")
        tree = app.field_tree
        assert len(tree.hits) == 3  # client_id, client_software_name, client_software_version
        assert tree.current is not None and tree.current.id == "1.3"
        await pilot.press("n")
        assert tree.current.id == "2"
        await pilot.press("n", "n")
        assert tree.current.id == "1.3"  # wraps
        await pilot.press("N")
        assert tree.current.id == "3"

    drive(app, script)


def test_search_opens_collapsed_parents() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("tab", "E", "ctrl+f", *"correlation", "enter")
        assert app.field_tree.current is not None and app.field_tree.current.id == "1.2"

    drive(app, script)


def test_copy_a_value_and_a_filter() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("tab")
        ids = [r.id for r in app.field_tree.rows]
        await pilot.press(*["j"] * ids.index("1.3"))  # client_id: 'kd-gen'
        await pilot.press("c")
        assert app.clipboard == "kd-gen"
        await pilot.press("C")
        assert app.clipboard == 'kafka.header.client_id == "kd-gen"'

    drive(app, script)


def test_mark_and_write_equals_read_w(tmp_path: Path) -> None:
    app = make_app(display_filter=FETCHES)
    ours = tmp_path / "marked.pcapng"
    theirs = tmp_path / "read.pcapng"
    CliRunner().invoke(cli, ["read", "-Y", FETCHES, "-w", str(theirs), str(TRANSACTIONS)], catch_exceptions=False)

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot, app)
        app.tick()
        for _ in range(8):
            await pilot.press("space", "j")
        view = app.view
        assert view is not None and app.store.marked() == [view.index(p) for p in range(8)]
        assert "8 marked" in screen_text(app)
        await pilot.press("w")
        assert isinstance(app.screen, PromptScreen)
        inp = app.screen.query_one(Input)
        inp.value = str(ours)
        await pilot.press("enter")
        await settle(pilot, app)

    drive(app, script)
    assert ours.read_bytes() == theirs.read_bytes()


def test_unmark_and_write_with_peer(tmp_path: Path) -> None:
    app = make_app()
    ours = tmp_path / "pair.pcapng"
    theirs = tmp_path / "read.pcapng"
    CliRunner().invoke(cli, ["read", "-Y", "frame.number == 4 || frame.number == 6", "-w", str(theirs),
                             str(TRANSACTIONS)], catch_exceptions=False)

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("M", "j", "M", "M")  # marks frame 4, and 6 twice: unmarked
        assert app.store.marked() == [0]
        await pilot.press("W")
        app.screen.query_one(Input).value = str(ours)
        await pilot.press("enter")
        await settle(pilot, app)

    drive(app, script)
    assert ours.read_bytes() == theirs.read_bytes()


def test_write_without_marks_says_so() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("w")
        await pilot.pause()
        assert not isinstance(app.screen, PromptScreen)
        assert any("No message is marked" in str(n.message) for n in app._notifications)

    drive(app, script)


def test_help_lists_every_key() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "Everywhere" in screen_text(app) and "This help" in screen_text(app)
        console = Console(width=120, record=True, file=io.StringIO())
        console.print(help_table())
        text = console.export_text()
        for k in KEYS:
            assert k.help in text and k.label in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)

    drive(app, script)


def test_the_documentation_lists_every_key() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "tui.md").read_text(encoding="utf-8")
    for k in KEYS:
        assert f"| `{k.label}` | {k.help} |" in doc, k


def test_q_quits() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running

    drive(app, script)


def test_tab_cycles_the_panes_and_enter_opens_the_tree() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        assert app.focused is app.msg_list
        await pilot.press("tab")
        assert app.focused is app.field_tree
        await pilot.press("tab")
        assert app.focused is app.hex_view
        await pilot.press("shift+tab", "shift+tab")
        assert app.focused is app.msg_list
        await pilot.press("enter")
        assert app.focused is app.field_tree

    drive(app, script)


def test_mouse_selects_a_row() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        await pilot.click(MessageList, offset=(20, 3))  # line 0 is the header: the third row
        await pilot.pause()
        assert frame_of(app) == 8

    drive(app, script)


def test_narrow_terminal_drops_the_address_columns() -> None:
    app = make_app()

    async def script(pilot: Pilot[None]) -> None:
        header = screen_text(app).splitlines()[1]
        assert "No." in header and "Time" in header and "Info" in header
        assert "Source" not in header and "Destination" not in header
        row = screen_text(app).splitlines()[2]
        assert "ApiVersions v3 request corr=1 client=kd-gen" in row

    drive(app, script, size=(80, 24))


def test_progress_line() -> None:
    assert progress_text(Progress(2048, 4096, 3, False, None)) == "3 messages · 2.0 KiB of 4.0 KiB · decoding…"
    assert progress_text(Progress(0, None, 1, False, None)) == "1 message · decoding…"  # live: no bytes
    assert (progress_text(Progress(0, 36, 0, True, "x.pcap: not a pcap or pcapng capture"))
            == "0 messages · 0 B of 36 B · stopped: x.pcap: not a pcap or pcapng capture")


def test_a_decoding_error_shows_in_the_status_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a capture at all")
    app = make_app(loaded_store(bad))

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot, app)
        assert "stopped: " in screen_text(app)
        assert app.status_shown.endswith(f"stopped: {bad}: not a pcap or pcapng capture")
        assert app.status_line.has_class("-error")
        assert any(f"Decoding stopped: {bad}: not a pcap" in str(n.message) for n in app._notifications)

    drive(app, script, size=(120, 24))


def test_no_color_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app()
    assert app.no_color  # Textual draws in monochrome


def test_every_key_is_safe_on_a_capture_without_messages(tmp_path: Path) -> None:
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))  # a header, no packet
    app = make_app(loaded_store(empty))

    async def script(pilot: Pilot[None]) -> None:
        for key in ("j", "k", "G", "g", "m", "f", "M", "space", "w", "W", "tab", "enter", "c", "C", "a", "p",
                    "n", "N", "e", "E", "h", "l", "escape"):
            await pilot.press(key)
            await settle(pilot, app)
        await pilot.press("ctrl+f", "x", "enter", "colon", "5", "enter", "s")
        await settle(pilot, app)
        assert app.msg_list.count == 0 and app.field_tree.rows == []
        await pilot.press("escape", "r")
        await settle(pilot, app)
        assert "No response times" in screen_text(app)

    drive(app, script, size=(80, 24))


class Growing:
    """A decoded store that shows its messages a few at a time, as a live capture adds them."""

    def __init__(self, n: int) -> None:
        self.inner = loaded_store()
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_live_follows_the_tail_until_the_user_moves_away() -> None:
    store = Growing(10)
    app = make_app(store, live=True)  # type: ignore[arg-type]

    async def script(pilot: Pilot[None]) -> None:
        assert app.msg_list.following and app.msg_list.cursor == 9
        store.n = 20
        app.tick()
        assert app.msg_list.cursor == 19
        assert "following" in screen_text(app)
        await pilot.press("k")
        assert not app.msg_list.following
        store.n = 25
        app.tick()
        await pilot.pause()
        assert app.msg_list.cursor == 18
        assert "↓ 5 new messages (G follows)" in screen_text(app)
        await pilot.press("G")
        assert app.msg_list.following and app.msg_list.cursor == 24
        store.n = 30
        app.tick()
        assert app.msg_list.cursor == 29

    drive(app, script)


def test_scrolling_a_million_rows_reads_only_the_visible_ones() -> None:
    """The list asks the store for the rows on screen, whatever the length."""
    inner = loaded_store()

    class Million:
        def __init__(self) -> None:
            self.asked: set[int] = set()

        def __len__(self) -> int:
            return 1_000_000

        def row(self, i: int) -> object:
            self.asked.add(i)
            return inner.row(i % len(inner))

        def cached(self, i: int) -> object:
            return inner.cached(i % len(inner))

        def __getattr__(self, name: str) -> object:
            return getattr(inner, name)

    store = Million()
    app = make_app(store)  # type: ignore[arg-type]

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("G")
        await pilot.pause()
        assert app.msg_list.cursor == 999_999
        assert max(store.asked) == 999_999
        visible = app.msg_list.page_size
        store.asked.clear()
        await pilot.press("pageup")
        await pilot.pause()
        assert store.asked and len(store.asked) <= 3 * visible
        assert min(store.asked) >= 999_999 - 2 * visible

    drive(app, script)
