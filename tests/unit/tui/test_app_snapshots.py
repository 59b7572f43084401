"""Screenshots of the main screens of `kdissect tui`, compared with the SVG files committed in
__snapshots__/ (the app's export_screenshot, at fixed sizes: 100×30 and 80×24).

After a deliberate change of the look, rewrite them and review the new pictures:

    KDISSECT_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/unit/tui/test_app_snapshots.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from app_support import drive, make_app, settle
from textual.pilot import Pilot

SNAPSHOTS = Path(__file__).parent / "__snapshots__"
UPDATE = os.environ.get("KDISSECT_UPDATE_SNAPSHOTS") == "1"

# name -> (terminal size, display filter given on the command line, keys pressed)
CASES: dict[str, tuple[tuple[int, int], str | None, tuple[str, ...]]] = {
    "main_100x30": ((100, 30), None, ("j", "tab", "j", "j", "j")),
    "main_80x24": ((80, 24), None, ("j", "j", "j")),
    "filtered_100x30": ((100, 30), "kafka.api_key == 1", ("m",)),
    "bad_filter_80x24": ((80, 24), None, ("slash", *"kafka.api_key == 1 && (")),
    "follow_100x30": ((100, 30), None, ("j", "f")),
    "help_80x24": ((80, 24), None, ("question_mark",)),
    "stats_100x30": ((100, 30), None, ("s",)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_snapshot(name: str) -> None:
    size, display_filter, keys = CASES[name]
    app = make_app(display_filter=display_filter)
    shot: list[str] = []

    async def script(pilot: Pilot[None]) -> None:
        app.bar.input.cursor_blink = False
        await settle(pilot, app)
        app.tick()
        await pilot.press(*keys)
        await settle(pilot, app)
        shot.append(app.export_screenshot(title="kdissect tui"))

    drive(app, script, size=size)
    path = SNAPSHOTS / f"{name}.svg"
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(shot[0], encoding="utf-8")
        return
    assert path.exists(), f"{path.name} is missing: KDISSECT_UPDATE_SNAPSHOTS=1 writes it (then review it)"
    assert shot[0] == path.read_text(encoding="utf-8"), (
        f"{name} looks different from {path.name}; if that is meant, KDISSECT_UPDATE_SNAPSHOTS=1 rewrites it")
