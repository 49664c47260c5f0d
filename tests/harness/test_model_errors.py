"""A failed model request becomes a failure that says which kind of provider failure it was, and nothing of the
provider's error body."""

from __future__ import annotations

import pytest
from pydantic_ai.exceptions import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelHTTPError,
    ModelRateLimitError,
    ModelTimeoutError,
)

# Each provider failure kind on its own; a run shows only the one failure its model raised.
from runs.harness._model_errors import describe_model_error

SECRET_BODY = {"error": {"message": "echo of your prompt: password=hunter2"}}


@pytest.mark.parametrize(
    ("error", "code", "message", "retry_hint"),
    [
        (
            ModelHTTPError.for_category(
                ModelAuthenticationError,
                status_code=401,
                model_name="m",
                body=SECRET_BODY,
                provider_error_code="invalid_api_key",
            ),
            "model_auth_failed",
            "The model provider refused the API key (HTTP 401, provider code invalid_api_key).",
            "dependency_change",
        ),
        (
            ModelHTTPError.for_category(ModelRateLimitError, status_code=429, model_name="m", body=SECRET_BODY),
            "model_rate_limited",
            "The model provider is rate-limiting requests (HTTP 429).",
            "new_run",
        ),
        (
            ModelConnectionError("m", "Connection refused", phase="connect"),
            "model_unreachable",
            "The model provider could not be reached (while connecting).",
            "new_run",
        ),
        (
            ModelTimeoutError("m", "Read timed out", phase="read"),
            "model_timeout",
            "The model provider did not answer in time (while reading the response).",
            "new_run",
        ),
        (
            ModelHTTPError(status_code=400, model_name="m", body=SECRET_BODY),
            "model_http_error",
            "The model provider answered with an error (HTTP 400).",
            "dependency_change",
        ),
        (
            ModelHTTPError(status_code=502, model_name="m", body=SECRET_BODY),
            "model_http_error",
            "The model provider answered with an error (HTTP 502).",
            "new_run",
        ),
    ],
)
def test_each_kind_of_provider_failure_has_its_code_message_and_retry_hint(error, code, message, retry_hint):
    failure = describe_model_error(error)
    assert (failure.code, failure.message, failure.retry_hint) == (code, message, retry_hint)
    assert failure.details["model_name"] == "m"
    assert "hunter2" not in repr(failure)
