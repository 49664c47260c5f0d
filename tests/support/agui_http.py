"""Helpers of the AG-UI endpoint tests: bearer headers, RunAgentInput bodies, an SSE reader."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

PROFILE = "demo"
TIMEOUT = httpx.Timeout(60.0, connect=10.0)


@dataclass(frozen=True)
class SseEvent:
    position: int | None
    event: dict[str, Any]


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def run_input(thread_id: str, run_id: str, *texts: str, resume: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A RunAgentInput whose user messages are `texts` (the last one is the one to run, unless resuming)."""
    body: dict[str, Any] = {
        "threadId": thread_id,
        "runId": run_id,
        "messages": [{"id": f"user-{n}", "role": "user", "content": text} for n, text in enumerate(texts)],
        "tools": [],
        "context": [],
        "state": None,
        "forwardedProps": None,
    }
    if resume is not None:
        body["resume"] = resume
    return body


def parse(lines: Iterator[str]) -> Iterator[SseEvent]:
    """SSE records (`id:` and `data:` lines up to a blank line); comments are skipped."""
    position: int | None = None
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield SseEvent(position, json.loads("\n".join(data)))
            position, data = None, []
        elif line.startswith("id:"):
            position = int(line[3:].strip())
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield SseEvent(position, json.loads("\n".join(data)))


def post_run(client: httpx.Client, body: dict[str, Any], **headers: str) -> list[SseEvent]:
    """POST a RunAgentInput and read its whole event stream (it ends when the execution settles)."""
    with client.stream("POST", f"/agui/{PROFILE}/", json=body, headers=headers, timeout=TIMEOUT) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(parse(response.iter_lines()))
