"""What the timeline browser tests share: where screenshots go, reading positions off the page, and the AG-UI
events of a tool call and of a text message."""

from __future__ import annotations

import os
from pathlib import Path

from ag_ui.core import (
    BaseEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from django.conf import settings
from playwright.sync_api import Page

from runs.models import Execution, TimelineEvent
from tests.support import png

ROOT = Path(__file__).resolve().parents[2]


def screenshot(page: Page, name: str) -> None:
    """The README's pictures are refreshed only on request, and stored small (256 colours); an ordinary run
    writes its own into the var directory, so it leaves the checkout clean and runs in parallel (each with its
    HARNESS_VAR_DIR) keep theirs apart. The page is pictured from its top: scrolled, its sticky lane heads would be
    drawn over the middle of the picture."""
    page.evaluate("window.scrollTo({top: 0, behavior: 'instant'})")
    shot = page.screenshot(full_page=True)
    if os.environ.get("HARNESS_UPDATE_SCREENSHOTS"):
        folder, shot = ROOT / "docs" / "screenshots", png.write_palette(png.read(shot))
    else:
        folder = settings.HARNESS_VAR_DIR / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(shot)


def dom_positions(page: Page) -> list[int]:
    """Every timeline position the page shows (items list the positions folded into them), sorted."""
    positions: list[int] = page.evaluate(
        """() => Array.from(document.querySelectorAll('#timeline [data-positions]'))
              .flatMap(el => el.dataset.positions.split(' ').map(Number))
              .sort((a, b) => a - b)"""
    )
    return positions


def stored_positions(execution: Execution) -> list[int]:
    return list(TimelineEvent.objects.filter(execution=execution).values_list("position", flat=True))


def wait_until_drawn(page: Page, execution: Execution, timeout: float = 15_000) -> list[int]:
    """Wait until the page has drawn the last stored event; returns the stored positions."""
    stored = stored_positions(execution)
    page.wait_for_selector(f'#timeline[data-rendered="{stored[-1]}"]', timeout=timeout)
    return stored


def tool_call_events(call_id: str, name: str, args: str, *, subagent: str | None = None) -> list[BaseEvent]:
    """A tool call's start, arguments and end (its result is an event of its own)."""
    extra = {"subagent_run_id": subagent} if subagent else {}
    return [
        ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name, **extra),
        ToolCallArgsEvent(tool_call_id=call_id, delta=args, **extra),
        ToolCallEndEvent(tool_call_id=call_id, **extra),
    ]


def text_message_events(message_id: str, body: str) -> list[BaseEvent]:
    """An assistant's text message in one delta."""
    return [
        TextMessageStartEvent(message_id=message_id, role="assistant"),
        TextMessageContentEvent(message_id=message_id, delta=body),
        TextMessageEndEvent(message_id=message_id),
    ]
