"""harness_run prints model text without the escape sequences and control characters it may contain."""

from __future__ import annotations

import io

import pytest
from ag_ui.core import TextMessageContentEvent, TextMessageEndEvent, TextMessageStartEvent
from django.core.management.base import OutputWrapper

from runs.management.commands.harness_run import Command
from runs.terminal_text import printable
from tests.support import factories

HOSTILE = {
    "window title (OSC, BEL)": ("\x1b]0;owned\x07hello", "hello"),
    "hyperlink (OSC 8, ST)": ("\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\", "click"),
    "colour and cursor (CSI)": ("\x1b[31mred\x1b[0m \x1b[2J\x1b[1;1H", "red "),
    "8-bit CSI": ("a\x9b2Jb", "ab"),
    "device control string": ("\x1bP+q544e\x1b\\x", "x"),
    "carriage return and backspace": ("safe\rrm -rf\x08\x08", "saferm -rf"),
    "unterminated OSC": ("ok\x1b]0;rest of the line", "ok"),
    "NUL and bell": ("a\x00b\x07c", "abc"),
    "lone escape": ("a\x1b", "a"),
}


@pytest.mark.parametrize(("text", "shown"), HOSTILE.values(), ids=HOSTILE.keys())
def test_escape_sequences_and_controls_are_removed(text, shown):
    assert printable(text) == shown


def test_line_breaks_tabs_and_unicode_stay():
    assert printable("Déploiement ✓\n\tnext line") == "Déploiement ✓\n\tnext line"


@pytest.mark.django_db
def test_harness_run_prints_model_text_without_escape_sequences():
    execution = factories.make_execution(status="completed")
    run = factories.make_run(execution, status="completed")
    factories.append_events(
        run,
        [
            TextMessageStartEvent(message_id="m1", role="assistant"),
            *(TextMessageContentEvent(message_id="m1", delta=text) for text, _ in HOSTILE.values()),
            TextMessageEndEvent(message_id="m1"),
        ],
    )
    out = io.StringIO()
    command = Command(stdout=OutputWrapper(out))

    command.follow(execution, timeout=30)

    printed = out.getvalue()
    for _, shown in HOSTILE.values():
        assert shown in printed
    assert not any(char in printed for char in "\x1b\x9b\x07\x00\r\x08")
