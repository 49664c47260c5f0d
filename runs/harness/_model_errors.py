"""What a failed model request tells an operator: which kind of provider failure it was, in words and a code.

pydantic-ai already sorts provider errors into categories (`ModelAuthenticationError`, `ModelRateLimitError`,
`ModelConnectionError`, ...); this module names each category for the Host, so a run that could not reach its
model says *why* instead of the generic "agent run failed".
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelContextWindowExceededError,
    ModelHTTPError,
    ModelNotFoundError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
)

from ._errors import RetryHint
from ._result import FailureDetails

__all__ = ("ModelFailure", "describe_model_error")

# Most specific first: the HTTP categories are subclasses of one another and of ModelHTTPError.
_CATEGORIES: tuple[tuple[type[ModelAPIError], str, str, RetryHint], ...] = (
    (ModelAuthenticationError, "model_auth_failed", "The model provider refused the API key", "dependency_change"),
    (ModelRateLimitError, "model_rate_limited", "The model provider is rate-limiting requests", "new_run"),
    (ModelQuotaExceededError, "model_quota_exceeded", "The model provider's quota is used up", "dependency_change"),
    (ModelNotFoundError, "model_not_found", "The model provider does not know this model", "dependency_change"),
    (
        ModelContextWindowExceededError,
        "model_context_exceeded",
        "The conversation no longer fits the model's context window",
        "dependency_change",
    ),
    (ModelTimeoutError, "model_timeout", "The model provider did not answer in time", "new_run"),
    (ModelConnectionError, "model_unreachable", "The model provider could not be reached", "new_run"),
    (ModelUnavailableError, "model_unavailable", "The model provider is unavailable", "new_run"),
    (ModelHTTPError, "model_http_error", "The model provider answered with an error", "new_run"),
)


@dataclass(frozen=True)
class ModelFailure:
    code: str
    message: str
    retry_hint: RetryHint
    details: FailureDetails


def describe_model_error(error: ModelAPIError) -> ModelFailure:
    """The failure of a run whose model request failed: what kind of failure, never the provider's error body.

    Bodies can echo the request (and so prompts, tool arguments or secrets), so like every `SafeFailure` this
    says only the category, the HTTP status, the provider's short error code and where a connection broke.
    """
    code, summary = "model_api_error", "The model request failed"
    retry_hint: RetryHint = "new_run"
    for category, category_code, category_summary, category_hint in _CATEGORIES:
        if isinstance(error, category):
            code, summary, retry_hint = category_code, category_summary, category_hint
            break
    details: FailureDetails = {"error_type": type(error).__name__, "model_name": error.model_name}
    facts = []
    if isinstance(error, ModelHTTPError):
        details["status_code"] = error.status_code
        facts.append(f"HTTP {error.status_code}")
        if code == "model_http_error" and error.status_code < 500:
            # The provider refused this request as sent; sending it again would not help.
            retry_hint = "dependency_change"
    if error.provider_error_code:
        details["provider_error_code"] = error.provider_error_code
        facts.append(f"provider code {error.provider_error_code}")
    if isinstance(error, ModelConnectionError) and error.phase is not None:
        details["phase"] = error.phase
        facts.append(f"while {_PHASES[error.phase]}")
    message = f"{summary} ({', '.join(facts)})." if facts else f"{summary}."
    return ModelFailure(code=code, message=message, retry_hint=retry_hint, details=details)


_PHASES = {
    "pool": "waiting for a connection",
    "connect": "connecting",
    "write": "sending the request",
    "read": "reading the response",
}
