"""The one way the endpoint refuses a request: an HTTP status and a JSON body saying why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ("Refused",)


@dataclass
class Refused(Exception):
    """The request is refused and nothing was changed; `status` is the HTTP status to answer with."""

    status: int
    code: str
    message: str
    details: list[Any] = field(default_factory=list)

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, "details": self.details}
