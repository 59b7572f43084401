"""Helpers for the `kdissect tui` app tests: a decoded store of a real capture, the app driven
headless by Textual's pilot, and the screen as text."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from support import CAPTURES
from textual.pilot import Pilot

from kdissect.cliutil import TEXT_MAX_BYTES, build
from kdissect.tui.app import KdissectApp
from kdissect.tui.store import Store

TRANSACTIONS = CAPTURES / "kafka" / "mock_ck_transactions.pcap"  # 86 Kafka messages, 6 conversations
STYLES = {"kafka": "cyan", "zookeeper": "green", "pulsar": "magenta", "rocketmq": "yellow"}


def loaded_store(path: Path = TRANSACTIONS) -> Store:
    """A store of the capture, decoded to the end."""
    registry, opts = build((), TEXT_MAX_BYTES, 64 * 1024 * 1024, False)
    store = Store([str(path)], registry, opts)
    store.start()
    assert store.wait(60), "the capture was not decoded in time"
    return store


def make_app(store: Store | None = None, display_filter: str | None = None, live: bool = False) -> KdissectApp:
    store = store if store is not None else loaded_store()
    return KdissectApp(store, "mock_ck_transactions.pcap", display_filter, live, STYLES)


def drive(app: KdissectApp, script: Callable[[Pilot[None]], Awaitable[None]],
          size: tuple[int, int] = (100, 30)) -> None:
    """Run the app headless at `size` and play `script` on it."""

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await script(pilot)

    asyncio.run(main())


def screen_text(app: KdissectApp) -> str:
    """The screen as plain text, as a terminal shows it."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    screen: Any = app.screen
    console.print(screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


async def settle(pilot: Pilot[None], app: KdissectApp) -> None:
    """Let worker threads (statistics, writing, decoding) finish and the screen catch up."""
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()
