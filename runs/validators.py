"""Checks on text and JSON that people send to the Host, beyond Django's own field limits.

PostgreSQL refuses NUL in text and JSON (SQLite stores it), neither database can store a lone surrogate, and
control characters in a title or search would reach other people's pages and terminals; so they are refused at
the form with a message naming the character, never left to fail as a database error.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import ValidationError

LINE_BREAKS = frozenset("\n\r\t")
MAX_INPUT_CHARS = 20_000
"""The text an execution starts with (forms and the AG-UI endpoint); longer work belongs in a file the agent
reads, not in every page."""
MAX_DB_INTEGER = 2**63 - 1
"""Primary keys and positions are 64-bit signed integers in both SQLite and PostgreSQL."""
MAX_JSON_DEPTH = 64
"""Deeper JSON is refused: encoders, schema checks and the database all recurse over it."""


def _control_character(text: str, allowed: frozenset[str]) -> tuple[int, str] | None:
    for index, char in enumerate(text):
        if unicodedata.category(char) == "Cc" and char not in allowed:
            return index, char
    return None


def _refuse(text: str, allowed: frozenset[str]) -> None:
    found = _control_character(text, allowed)
    if found is not None:
        index, char = found
        raise ValidationError(
            "Contains the control character U+%(code)04X at position %(position)d; remove it.",
            code="control_character",
            params={"code": ord(char), "position": index + 1},
        )


def single_line_text(text: str) -> None:
    """Titles, searches, identifiers: no control characters at all."""
    _refuse(text, frozenset())


def multi_line_text(text: str) -> None:
    """Inputs and messages: line breaks and tabs, but no other control characters."""
    _refuse(text, LINE_BREAKS)


def _strings_and_depth(value: Any) -> Iterator[tuple[str | None, int]]:
    # A stack, not recursion: parsed JSON may be nested about as deep as Python's recursion limit.
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            yield item, depth
        elif isinstance(item, dict):
            yield None, depth
            yield from ((str(key), depth) for key in item)
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            yield None, depth
            stack.extend((child, depth + 1) for child in item)


def unstorable_json(value: Any) -> str | None:
    """Why a parsed JSON value cannot be stored in both databases (a NUL or a lone surrogate) or is nested
    deeper than MAX_JSON_DEPTH; None when it is fine."""
    for text, depth in _strings_and_depth(value):
        if depth > MAX_JSON_DEPTH:
            return f"is nested deeper than {MAX_JSON_DEPTH} levels"
        if text is None:
            continue
        if "\x00" in text:
            return "contains a NUL character (\\u0000)"
        try:
            text.encode()
        except UnicodeEncodeError:
            return "contains a lone surrogate (an unpaired \\ud800–\\udfff escape)"
    return None
