"""The settings' reader of environment variables.

A value that does not parse is never guessed at (a boolean `DEBUG=maybe` is not False): it is recorded as a problem
and the default stands in, so settings always import, and the `harness` system check (runs/checks.py) lists every
problem at once and refuses to start. Ranges are the check's business: it checks the settings' values, wherever
they came from.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")

TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off", ""})


class Environment:
    """Typed reads of `environ`; `problems` holds one message per bad value, `names` every variable read."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.environ = os.environ if environ is None else environ
        self.problems: list[str] = []
        self.names: list[str] = []

    def text(self, name: str, default: str) -> str:
        self.names.append(name)
        return self.environ.get(name, default)

    def items(self, name: str, default: str) -> list[str]:
        """A comma-separated list, each item stripped of spaces and empty ones dropped (`a.com, b.com,` is two)."""
        return [item.strip() for item in self.text(name, default).split(",") if item.strip()]

    def flag(self, name: str, default: bool = False) -> bool:
        return self._read(name, default, _flag, "1 or 0 (or true/false, yes/no, on/off)")

    def integer(self, name: str, default: int) -> int:
        return self._read(name, default, int, "a whole number")

    def number(self, name: str, default: float) -> float:
        return self._read(name, default, float, "a number")

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        return self._read(name, default, lambda raw: _one_of(raw, choices), " or ".join(map(repr, choices)))

    def _read(self, name: str, default: T, parse: Callable[[str], T], expected: str) -> T:
        self.names.append(name)
        raw = self.environ.get(name)
        if raw is None:
            return default
        try:
            return parse(raw.strip())
        except ValueError:
            self.problems.append(f"{name}={raw!r} in the environment: it must be {expected}.")
            return default


def _flag(raw: str) -> bool:
    if raw.lower() in TRUE:
        return True
    if raw.lower() in FALSE:
        return False
    raise ValueError(raw)


def _one_of(raw: str, choices: tuple[str, ...]) -> str:
    if raw not in choices:
        raise ValueError(raw)
    return raw
