"""Why a run failed, as its failure card and run page show it: the code and message the run stored, and the
details of its RUN_ERROR event (exception type and message, a provider's HTTP status and error code).

Provider response bodies are never stored (runs/harness/model_errors.py): they can echo prompts and secrets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from runs.models import Execution, ExecutionStatus, Run, RunReason

__all__ = ("FailureFacts", "failure_of", "recovered_by")


class FailureFacts(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: str
    message: str
    error_type: str = ""
    error_message: str = ""
    status_code: int | None = None
    provider_error_code: str = ""
    model_name: str = ""
    attempt: int
    tool_recovery: str

    @property
    def from_provider(self) -> bool:
        return self.code.startswith("model_")


def failure_of(run: Run) -> FailureFacts | None:
    """The failure of a failed or abandoned run; None for any other run."""
    if not run.failure_code:
        return None
    details = _details(run)
    return FailureFacts(
        code=run.failure_code,
        message=run.failure_message,
        error_type=str(details.get("error_type") or ""),
        error_message=str(details.get("error_message") or ""),
        status_code=details.get("status_code") if isinstance(details.get("status_code"), int) else None,
        provider_error_code=str(details.get("provider_error_code") or ""),
        model_name=str(details.get("model_name") or ""),
        attempt=run.attempt,
        tool_recovery=run.tool_recovery,
    )


def _details(run: Run) -> dict[str, Any]:
    """The details of the run's own RUN_ERROR (its root lane's, not an inline child's)."""
    event = (
        run.timeline.filter(event_type="RUN_ERROR", subagent_run_id="")
        .order_by("-position")
        .values_list("event", flat=True)
        .first()
    )
    failure = ((event or {}).get("rawEvent") or {}).get("failure") or {}
    details = failure.get("details") if isinstance(failure, dict) else None
    return details if isinstance(details, dict) else {}


def recovered_by(execution: Execution, runs: Sequence[Run]) -> tuple[Run, Run] | None:
    """(the failed run, the recovery run after it) of an execution that did not fail in the end: its page says
    "recovered by run N" instead of showing the failure as the execution's."""
    if execution.status == ExecutionStatus.FAILED:
        return None
    for index, run in enumerate(runs):
        later = [after for after in runs[index + 1 :] if after.reason == RunReason.RECOVERY]
        if run.failure_code and later:
            return run, later[-1]
    return None
