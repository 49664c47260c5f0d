"""Human labels for the CUSTOM events a timeline groups, sent to the page in its config.

The raw name stays on each row (and in the raw JSON); the labels only say what happened.
"""

from __future__ import annotations

from observers.agui import FRAGMENT_EVENT_NAME, HARNESS_PREFIX, PYDANTIC_AI_PREFIX

_PYDANTIC_AI = {
    "part_start": "model part started",
    "part_delta": "model part grew",
    "part_end": "model part finished",
    "final_result": "final result chosen",
    "enqueued_messages": "messages queued",
    "function_tool_call": "tool called",
    "function_tool_result": "tool returned",
    "output_tool_call": "output tool called",
    "output_tool_result": "output tool returned",
    "tool_availability_delta": "tools changed",
    "capability_load_delta": "capabilities changed",
    "model_settings_delta": "model settings changed",
    "deferred_tool_requests": "deferred requests",
    "deferred_tool_results": "deferred results",
    "custom": "capability event",
    "capability": "capability event",
}

_HARNESS = {
    "context": "run context",
    "state": "state checkpoint",
    "recovery": "recovery",
    "invocation": "invocation",
    "delegation": "delegation",
    "usage": "token usage",
    "lifecycle": "run lifecycle",
    "tool": "tool activity",
    "diagnostic": "diagnostic",
}

EVENT_LABELS: dict[str, str] = {
    **{PYDANTIC_AI_PREFIX + kind: label for kind, label in _PYDANTIC_AI.items()},
    **{HARNESS_PREFIX + kind: label for kind, label in _HARNESS.items()},
    FRAGMENT_EVENT_NAME: "large event in fragments",
}
