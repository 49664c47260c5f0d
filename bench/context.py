"""What one suite process knows: mode, sizes, repeats, its database and the shared services."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ("BenchContext",)


@dataclass(frozen=True)
class BenchContext:
    quick: bool
    repeats: int
    sizes: tuple[str, ...]
    database: str
    redis_url: str
    output: Path
    machine: dict[str, Any] = field(default_factory=dict)

    @property
    def largest(self) -> str:
        return self.sizes[-1]
