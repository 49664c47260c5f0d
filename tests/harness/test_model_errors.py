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
from pydantic_ai.models.function import FunctionModel

from runs.harness import AgentDefinition

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
async def test_each_kind_of_provider_failure_has_its_code_message_and_retry_hint(error, code, message, retry_hint):
    async def failing(messages, info):
        raise error
        yield ""  # a generator: the engine streams every model request

    result = await AgentDefinition(model=FunctionModel(stream_function=failing)).build().run("go")
    assert result.status == "failed"
    failure = result.failure
    assert (failure.code, failure.message, failure.retry_hint) == (code, message, retry_hint)
    assert failure.details["model_name"] == "m"
    assert "hunter2" not in repr(failure)
    assert "hunter2" not in failure.model_dump_json()
