"""Errors raised by the harness engine.

Every error carries a stable machine-readable `code`, JSON-safe `details` and a `retry_hint` telling the Host
whether retrying can help, so callers can react without parsing messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ._result import HarnessRunResult

__all__ = (
    "DefinitionError",
    "HarnessError",
    "RetryHint",
    "RunCleanupError",
    "RunError",
    "StateError",
)

RetryHint = Literal["none", "new_run", "dependency_change"]


class HarnessError(Exception):
    """Base class of every error the harness raises on purpose."""

    code: str
    details: dict[str, Any]
    retry_hint: RetryHint

    def __init__(
        self,
        message: str,
        *,
        code: str,
        details: Mapping[str, Any] | None = None,
        retry_hint: RetryHint = "none",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.details = dict(details or {})
        self.retry_hint = retry_hint

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"


class StateError(HarnessError):
    """Portable state, capability state or state export could not be used."""


class RunError(HarnessError):
    """A run was used wrongly or its inputs (bindings, deferred resume, ...) are invalid."""


class DefinitionError(HarnessError):
    """The agent definition does not match what a run needs (e.g. the tool surface)."""


class RunCleanupError(HarnessError):
    """Teardown of a run failed, so no terminal result was delivered.

    `outcome` is the last validated candidate result, if any. It is outcome-uncertain: normal terminal
    delivery did not complete, so the Host must treat it like a failure candidate, not a commit.
    """

    outcome: HarnessRunResult[Any] | None
    causes: tuple[BaseException, ...]

    def __init__(
        self,
        message: str,
        *,
        outcome: HarnessRunResult[Any] | None,
        causes: Sequence[BaseException],
    ) -> None:
        super().__init__(
            message,
            code="run_cleanup_failed",
            details={"cause_count": len(causes)},
            retry_hint="new_run",
        )
        self.outcome = outcome
        self.causes = tuple(causes)
        # Only type names: cause messages may carry secrets from providers or tools.
        for cause in self.causes:
            self.add_note(f"cause: {type(cause).__name__}")
