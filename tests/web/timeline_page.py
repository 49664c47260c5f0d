"""What the timeline browser tests share: where screenshots go, and reading positions off the page."""

from __future__ import annotations

import os
from pathlib import Path

from runs.models import Execution, TimelineEvent

ROOT = Path(__file__).resolve().parents[2]
# The README's pictures are refreshed only on request, so an ordinary test run leaves the work tree clean.
SCREENSHOTS = (
    ROOT / "docs" / "screenshots"
    if os.environ.get("HARNESS_UPDATE_SCREENSHOTS")
    else ROOT / "tests" / "artifacts" / "screenshots"
)


def screenshot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name), full_page=True)


def dom_positions(page) -> list[int]:
    """Every timeline position the page shows (items list the positions folded into them), sorted."""
    return page.evaluate(
        """() => Array.from(document.querySelectorAll('#timeline [data-positions]'))
              .flatMap(el => el.dataset.positions.split(' ').map(Number))
              .sort((a, b) => a - b)"""
    )


def stored_positions(execution: Execution) -> list[int]:
    return list(TimelineEvent.objects.filter(execution=execution).values_list("position", flat=True))


def wait_until_drawn(page, execution: Execution, timeout: float = 15_000) -> list[int]:
    """Wait until the page has drawn the last stored event; returns the stored positions."""
    stored = stored_positions(execution)
    page.wait_for_selector(f'#timeline[data-rendered="{stored[-1]}"]', timeout=timeout)
    return stored
