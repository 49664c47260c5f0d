"""Input events: what a run was given to work on, as items of its own stream.

A run's own prompt and any input delivered into it while it runs (steering) are part of the history, but a
stream consumer sees them only as they travel: these events make them visible to observers, so a timeline or an
AG-UI client can show what each run was asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai import CapabilityEvent, EnqueuedMessagesEvent, ModelRequest, UserPromptPart

__all__ = ("InputSource", "InputTextEvent", "prompt_text", "steering_inputs")

InputSource = Literal["user", "steering", "context", "recovery", "async_subagent", "background_process"]
# Sources whose text a person wrote; the rest is material the harness or a tool supplied.
AUTHORED_SOURCES: frozenset[InputSource] = frozenset({"user", "steering"})


@dataclass(kw_only=True, repr=False)
class InputTextEvent(CapabilityEvent, namespace="a13n.input"):
    """Text input that entered the run: `input_id` is unique within the run."""

    input_id: str
    source: InputSource
    content: str

    @property
    def role(self) -> Literal["user", "system"]:
        return "user" if self.source in AUTHORED_SOURCES else "system"


def prompt_text(prompt: str | Sequence[Any] | None) -> str | None:
    """The text of a run's prompt (its string items, for multi-part content), or `None` when it has none."""
    if prompt is None:
        return None
    if isinstance(prompt, str):
        return prompt or None
    text = " ".join(item for item in prompt if isinstance(item, str))
    return text or None


def steering_inputs(event: EnqueuedMessagesEvent) -> list[str]:
    """The text of each user prompt an enqueue delivered into the run's history."""
    parts = list(event.parts) or [
        part for message in event.messages if isinstance(message, ModelRequest) for part in message.parts
    ]
    texts = [prompt_text(part.content) for part in parts if isinstance(part, UserPromptPart)]
    return [text for text in texts if text]
