"""Screenshot tests: a page's picture against the reference stored in tests/web/screenshots/, within a tolerance.

A reference is Chromium's own file, so an unchanged page is the same bytes and compares without decoding. Otherwise
both are decoded and a pixel counts as changed when a colour channel moved by more than `threshold`; the test
fails when more than `ratio` of the pixels changed (or the size did), and leaves the actual picture and a diff
(changes in red over the faded reference) in the var directory. `HARNESS_UPDATE_SCREENSHOTS=1` rewrites the
references instead."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.conf import settings
from playwright.sync_api import Browser, BrowserContext, Page

from tests.support import png

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = ROOT / "tests" / "web" / "screenshots"
UPDATE = "HARNESS_UPDATE_SCREENSHOTS"

# The clock every pictured page reads: the seeded data's times are fixed, so "3 min ago" is too.
FROZEN_AT = datetime.fromisoformat("2026-01-02T04:00:00+00:00")

# Fonts every machine with the project's setup has (Debian's Chromium brings DejaVu), whatever else it has
# installed; no caret, no scrollbars. The workers badge is left out: it says whether the live stack's RQ worker had
# registered when the page was made. Timeline items off screen skip rendering (content-visibility), and a
# full-page picture taken before Chromium caught up showed them as empty cards: here every item renders.
STYLE = """
* { font-family: "DejaVu Sans", sans-serif !important; }
code, pre, kbd, samp, textarea, .mono, .mono *, .item-extra { font-family: "DejaVu Sans Mono", monospace !important; }
* { caret-color: transparent !important; scrollbar-width: none !important; }
.topbar .workers { display: none !important; }
.item { content-visibility: visible !important; }
"""


@dataclass(frozen=True)
class Tolerance:
    threshold: int = 32
    ratio: float = 0.001


@dataclass(frozen=True)
class PixelChanges:
    changed: int
    total: int
    diff: png.Image

    @property
    def ratio(self) -> float:
        return self.changed / self.total


def _rgb(image: png.Image, y: int) -> bytes:
    row = image.rows[y]
    return row if image.channels == 3 else bytes(b for i, b in enumerate(row) if i % 4 != 3)


def _moved(before: bytes, after: bytes, threshold: int) -> bool:
    return max(abs(p - q) for p, q in zip(before, after, strict=True)) > threshold


def compare(expected: png.Image, actual: png.Image, threshold: int) -> PixelChanges:
    """Pixels of either picture outside the other (a size change) count as changed."""
    width, height = max(expected.width, actual.width), max(expected.height, actual.height)
    common = min(expected.width, actual.width)
    changed = 0
    rows: list[bytes] = []
    for y in range(height):
        both = y < expected.height and y < actual.height
        before = _rgb(expected, y).ljust(width * 3, b"\0") if y < expected.height else bytes(width * 3)
        after = _rgb(actual, y) if y < actual.height else b""
        faded = bytes(192 + (b >> 2) for b in before)
        if both and expected.width == actual.width and before == after:
            rows.append(faded)
            continue
        row = bytearray(faded)
        for x in range(width):
            i = 3 * x
            if not (both and x < common) or _moved(before[i : i + 3], after[i : i + 3], threshold):
                changed += 1
                row[i : i + 3] = b"\xff\x00\x00"
        rows.append(bytes(row))
    return PixelChanges(changed, width * height, png.Image(width, height, 3, tuple(rows)))


def open_page(browser: Browser, width: int, height: int) -> BrowserContext:
    """A browser context of the given size whose clock stands still at FROZEN_AT (timers still run). It bypasses the
    pages' Content Security Policy, which would refuse the stylesheet the pictures are taken with (test_csp_browser
    checks the policy)."""
    context = browser.new_context(
        viewport={"width": width, "height": height}, locale="en-US", timezone_id="UTC", bypass_csp=True
    )
    context.set_default_timeout(15_000)
    context.clock.set_fixed_time(FROZEN_AT)
    return context


def check(page: Page, name: str, *, tolerance: Tolerance = Tolerance()) -> None:
    """The whole page's picture against tests/web/screenshots/<name>.png. Call it once the page has settled (the
    caller waits for what it shows with expect())."""
    page.mouse.move(0, 0)
    shot = page.screenshot(full_page=True, animations="disabled", caret="hide", style=STYLE)
    reference = REFERENCES / f"{name}.png"
    if os.environ.get(UPDATE):
        REFERENCES.mkdir(parents=True, exist_ok=True)
        reference.write_bytes(shot)
        return
    failed = settings.HARNESS_VAR_DIR / "screenshots" / "failed"
    failed.mkdir(parents=True, exist_ok=True)
    actual = failed / f"{name}.actual.png"
    if not reference.exists():
        actual.write_bytes(shot)
        raise AssertionError(f"no reference {reference}; the page is in {actual} ({UPDATE}=1 stores it)")
    expected_bytes = reference.read_bytes()
    if shot == expected_bytes:
        return
    result = compare(png.read(expected_bytes), png.read(shot), tolerance.threshold)
    if result.ratio <= tolerance.ratio:
        return
    actual.write_bytes(shot)
    diff = failed / f"{name}.diff.png"
    diff.write_bytes(png.write(result.diff))
    raise AssertionError(
        f"{name}: {result.changed} of {result.total} pixels changed ({result.ratio:.3%}, allowed"
        f" {tolerance.ratio:.3%}); see {actual} and {diff} (changes in red), or {UPDATE}=1 if the change is meant"
    )
