"""Every relative link of README.md and docs/*.md points to a file that exists, and every #anchor to a heading of it.

Anchors follow GitHub's rule: the heading in lower case, punctuation but `-` and `_` dropped, spaces as `-`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)


def prose(page: Path) -> str:
    """The page without code blocks and code spans, whose brackets are not links."""
    return CODE_SPAN.sub("", FENCE.sub("", page.read_text()))


def slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(heading) for heading in HEADING.findall(FENCE.sub("", page.read_text()))}


def relative_links(page: Path) -> list[str]:
    return [target for target in LINK.findall(prose(page)) if not re.match(r"[a-z]+:", target)]


def test_the_slug_follows_githubs_rule():
    assert slug("Live delivery: one design, two encodings") == "live-delivery-one-design-two-encodings"
    assert slug("`runs/services/` — the Host, in layers") == "runsservices--the-host-in-layers"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no such heading")
    assert broken == []
