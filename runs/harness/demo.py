"""The offline demo agent: a deterministic scripted model that exercises every dashboard feature.

The prompt chooses the behaviour (keywords, case-insensitive; several may combine into one plan):

* `look up` / `lookup` / `search` - calls the read-only `lookup_record` and `search_records` tools, for the
  record the prompt names (`REC-7`) or `REC-42`;
* `deploy` / `approve` / `confirm` - calls `deploy_release`, which needs an operator's approval (the run
  suspends), for the version the prompt names (`release 3.0`, `1.5.0`) or `1.4.2`;
* `ask` - calls `ask_operator`, an external tool the operator answers with text (the run suspends); "ask for
  confirmation" asks for an approval instead;
* `delegate` / `research` - hands a task to the inline `researcher` child agent;
* `child` - hands the rest of the prompt (after "child", e.g. "child: deploy release 2.0"; by default a deploy)
  to a Host-managed child: an execution of its own on its own thread, on the same profile, that may ask for
  approval; the run waits for it. Of the text before "child" only a deploy counts, asked in the same response
  ("deploy 3.0 and a child: deploy 4.0" waits on an approval and a child at once);
* `slow` / `long` - calls `slow_step`, which takes a few seconds (a number in the prompt sets the seconds);
* `fail` - the model fails mid-answer like a provider error (a failure candidate);
* `tour` - lookup, delegation, then an approval, one step after the other;
* `drill` - a fault drill: the unmarked, side-effecting `slow_step`, then the retryable lookups, then text;
* anything else - thinks briefly and answers in text.

Every response streams thinking and text in chunks. Side-effecting tools report each dispatch to a
`ToolCallRecorder`, so a Host test can count how often they really ran (e.g. across crash recovery).
A pydantic-ai model string instead of the scripted model gives the same tools to a real model. The Host offers
this agent as a plug-in: `toolset` and `demo_model` are the defaults of its `HARNESS_TOOLSETS` and
`HARNESS_DEMO_MODEL` settings.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import JsonValue
from pydantic_ai import (
    CallDeferred,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    Tool,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from ._agent import AgentDefinition, ExecutableAgent
from ._children import host_child_tool
from ._delegation import inline_delegation_tool
from ._scripted import stream_script
from ._tools import recovery_retryable

__all__ = (
    "DEMO_AGENT_NAME",
    "JsonLinesRecorder",
    "MemoryRecorder",
    "ToolCallRecorder",
    "build_demo_agent",
    "demo_definition",
    "demo_model",
    "demo_tools",
    "researcher_model",
    "toolset",
)

DEMO_AGENT_NAME = "demo"
MAX_SLOW_SECONDS = 60.0
DEFAULT_SLOW_SECONDS = 3.0
DEFAULT_RECORD_ID = "REC-42"
DEFAULT_VERSION = "1.4.2"

INSTRUCTIONS = (
    "You are the operations assistant of the Harness Host demo. Use lookup_record and search_records to read "
    "records, deploy_release to ship a version (an operator approves it), ask_operator when you need a human "
    "answer, delegate_to_researcher for research, delegate_to_child for work a child execution should do on its own "
    "(it may need approvals), and slow_step for long-running work."
)
RESEARCHER_INSTRUCTIONS = "You research a task with search_records and answer with a short summary."


class ToolCallRecorder(Protocol):
    """Receives one call per side-effecting tool dispatch."""

    def record(self, tool_name: str, args: Mapping[str, JsonValue]) -> None: ...


@dataclass
class MemoryRecorder:
    """Keeps dispatches in memory (one process)."""

    calls: list[tuple[str, dict[str, JsonValue]]] = field(default_factory=list)

    def record(self, tool_name: str, args: Mapping[str, JsonValue]) -> None:
        self.calls.append((tool_name, dict(args)))

    def count(self, tool_name: str) -> int:
        return sum(1 for name, _ in self.calls if name == tool_name)


@dataclass(frozen=True)
class JsonLinesRecorder:
    """Appends dispatches to a JSON-lines file, so a test can count them across worker processes."""

    path: Path

    def record(self, tool_name: str, args: Mapping[str, JsonValue]) -> None:
        line = json.dumps({"tool": tool_name, "args": dict(args)}, sort_keys=True)
        with self.path.open("a", encoding="utf-8") as file:
            file.write(line + "\n")

    def calls(self) -> list[tuple[str, dict[str, JsonValue]]]:
        if not self.path.exists():
            return []
        entries = [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line]
        return [(entry["tool"], entry["args"]) for entry in entries]

    def count(self, tool_name: str) -> int:
        return sum(1 for name, _ in self.calls() if name == tool_name)


# -- the script -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Step:
    thinking: str
    say: str
    calls: tuple[tuple[str, dict[str, Any]], ...]


def _prompt_window(messages: list[ModelMessage]) -> tuple[str, list[ModelMessage]]:
    """The latest user prompt and the messages since the request that carried it."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ModelRequest):
            texts = [_text(part.content) for part in message.parts if isinstance(part, UserPromptPart)]
            if texts:
                return " ".join(texts), messages[index + 1 :]
    return "", messages


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(item for item in content if isinstance(item, str))


def _has(prompt: str, *words: str) -> bool:
    return any(re.search(rf"\b{re.escape(word)}", prompt) for word in words)


_RECORD_ID = re.compile(r"\bREC-\d+\b", re.IGNORECASE)
_VERSION = re.compile(r"(?:\b(?:release|version|v)\s*(\d+(?:\.\d+)+)\b|\b(\d+\.\d+\.\d+)\b)", re.IGNORECASE)


def _record_id(prompt: str) -> str:
    found = _RECORD_ID.search(prompt)
    return found.group(0).upper() if found else DEFAULT_RECORD_ID


def _version(prompt: str) -> str:
    found = _VERSION.search(prompt)
    return (found.group(1) or found.group(2)) if found else DEFAULT_VERSION


def _slow_seconds(prompt: str) -> float:
    # Record ids and versions are numbers too; the seconds are the first other number.
    number = re.search(r"(\d+(?:\.\d+)?)", _VERSION.sub(" ", _RECORD_ID.sub(" ", prompt)))
    seconds = float(number.group(1)) if number else DEFAULT_SLOW_SECONDS
    return min(seconds, MAX_SLOW_SECONDS)


def _child_step(prompt: str) -> _Step:
    """The child's task is what follows the word "child" (by default a deploy); a deploy asked before it is the
    parent's own, requested in the same response."""
    found = re.search(r"\bchild\b[\s:,-]*(.*)", prompt, re.IGNORECASE | re.DOTALL)
    before, task = (prompt[: found.start()], found.group(1).strip()) if found else (prompt, "")
    calls: list[tuple[str, dict[str, Any]]] = []
    if _has(before.lower(), "deploy", "approve", "confirm"):
        calls.append(("deploy_release", {"version": _version(before)}))
    calls.append(("delegate_to_child", {"task": (task or f"deploy release {_version(prompt)}")[:200]}))
    return _Step(
        "This work belongs in an execution of its own, which can wait for approvals.",
        "I will hand it to a child execution.",
        tuple(calls),
    )


def _fails(prompt: str) -> bool:
    # A "fail" meant for a child fails the child, not its parent.
    lowered = prompt.lower()
    return _has(lowered, "fail") and not _has(lowered, "child")


def _plan(prompt: str) -> list[_Step]:
    lowered = prompt.lower()
    if _has(lowered, "child"):
        return [_child_step(prompt)]
    lookup = _Step(
        "I need the record and anything related to it before answering.",
        "Let me look that up.",
        (("lookup_record", {"record_id": _record_id(prompt)}), ("search_records", {"query": prompt[:80] or "records"})),
    )
    delegate = _Step(
        "This needs research; the researcher agent is better at that.",
        "I will ask the researcher.",
        (("delegate_to_researcher", {"task": f"Research: {prompt[:120]}"}),),
    )
    deploy = _Step(
        "Shipping is a change in production, so an operator has to approve it.",
        "I am requesting approval to deploy.",
        (("deploy_release", {"version": _version(prompt)}),),
    )
    slow = _Step(
        "This is long-running work.",
        "Starting the long step.",
        (("slow_step", {"seconds": _slow_seconds(lowered)}),),
    )
    if _has(lowered, "tour"):
        return [lookup, delegate, deploy]
    if _has(lowered, "drill"):
        return [slow, lookup]
    steps: list[_Step] = []
    if _has(lowered, "look up", "lookup", "search"):
        steps.append(lookup)
    if _has(lowered, "delegate", "research"):
        steps.append(delegate)
    # "Ask for confirmation" is a request for an approval, not a question.
    confirm = _has(lowered, "confirm")
    if _has(lowered, "ask") and not confirm:
        steps.append(
            _Step(
                "Only a human can answer this; I will ask the operator.",
                "I have a question for the operator.",
                (("ask_operator", {"question": "Which environment should I use?"}),),
            )
        )
    if _has(lowered, "slow", "long"):
        steps.append(slow)
    if _has(lowered, "deploy", "approve") or confirm:
        steps.append(deploy)
    return steps


def _summary(results: list[ToolReturnPart]) -> str:
    lines = [f"- {part.tool_name} ({part.outcome}): {_short(part.content)}" for part in results]
    return "Here is what I found:\n" + "\n".join(lines) if lines else ""


def _short(content: Any) -> str:
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    return text if len(text) <= 160 else text[:157] + "..."


def demo_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """One deterministic step of the demo agent, chosen by the prompt and the progress since it."""
    prompt, window = _prompt_window(messages)
    if _fails(prompt):
        raise ModelHTTPError(status_code=503, model_name="demo", body={"error": "the demo provider is down"})
    steps = _plan(prompt)
    done = sum(1 for message in window if isinstance(message, ModelResponse) and message.tool_calls)
    if done < len(steps):
        step = steps[done]
        calls = [
            ToolCallPart(name, args, tool_call_id=f"call-{len(messages)}-{number}")
            for number, (name, args) in enumerate(step.calls)
        ]
        return ModelResponse(parts=[ThinkingPart(step.thinking, signature="demo"), TextPart(step.say), *calls])
    results = [part for message in window for part in message.parts if isinstance(part, ToolReturnPart)]
    answer = _summary(results) or f'You said: "{prompt}". Try "look up", "deploy", "ask", "research" or "tour".'
    return ModelResponse(
        parts=[ThinkingPart("I have everything I need to answer.", signature="demo"), TextPart(answer)]
    )


def researcher_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompt, window = _prompt_window(messages)
    results = [part for message in window for part in message.parts if isinstance(part, ToolReturnPart)]
    if not results:
        return ModelResponse(
            parts=[
                ThinkingPart("A search should surface the relevant records.", signature="demo"),
                ToolCallPart("search_records", {"query": prompt[:80]}, tool_call_id=f"call-{len(messages)}-0"),
            ]
        )
    return ModelResponse(parts=[TextPart(f"Research summary: {_short(results[0].content)}")])


def demo_model() -> FunctionModel:
    """The scripted model of the demo agent; `fail` prompts break off after some streamed text."""
    stream = stream_script(demo_script, chunk=8)

    async def stream_or_fail(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        prompt, _ = _prompt_window(messages)
        if _fails(prompt):
            yield "Preparing the report"
            yield " for you"
            raise ModelHTTPError(status_code=503, model_name="demo", body={"error": "the demo provider is down"})
        async for chunk in stream(messages, info):
            yield chunk

    return FunctionModel(demo_script, stream_function=stream_or_fail, model_name="demo-scripted")


def researcher_model() -> FunctionModel:
    return FunctionModel(
        researcher_script, stream_function=stream_script(researcher_script, chunk=8), model_name="demo-researcher"
    )


# -- tools ------------------------------------------------------------------------------------------------


def lookup_record(record_id: str) -> str:
    """Read one record by id."""
    return f"{record_id}: status=active, owner=ops-team, updated=2026-01-01"


def search_records(query: str) -> list[str]:
    """Search the records for a query."""
    return [f'REC-7 mentions "{query[:40]}"', "REC-42 is the primary record"]


def _side_effect_tools(recorder: ToolCallRecorder) -> list[Tool[Any]]:
    def deploy_release(version: str) -> str:
        """Deploy a release to production (needs an operator's approval)."""
        recorder.record("deploy_release", {"version": version})
        return f"deployed {version}"

    def ask_operator(question: str) -> str:
        """Ask the human operator a question; the answer arrives later."""
        raise CallDeferred(metadata={"question": question}, kind="question")

    async def slow_step(seconds: float) -> str:
        """Do long-running work for a number of seconds."""
        recorder.record("slow_step", {"seconds": seconds})
        await asyncio.sleep(min(seconds, MAX_SLOW_SECONDS))
        return f"finished after {seconds:g}s"

    return [Tool(deploy_release, requires_approval=True), Tool(ask_operator), Tool(slow_step)]


def demo_tools(*, model: Model | str | None = None, recorder: ToolCallRecorder | None = None) -> dict[str, Tool[Any]]:
    """The demo agent's tools by name (a Host registry can offer them to its own agent profiles)."""
    return {tool.name: tool for tool in demo_definition(model=model, recorder=recorder).tools}


def toolset() -> FunctionToolset[Any]:
    """The demo agent's tools as one tool set: the default of a Host's `HARNESS_TOOLSETS`."""
    return FunctionToolset(list(demo_tools().values()))


def demo_definition(
    *, model: Model | str | None = None, recorder: ToolCallRecorder | None = None
) -> AgentDefinition[str]:
    """The demo agent (scripted unless `model` names a real model) with its inline researcher child."""
    researcher = AgentDefinition[str](
        name="researcher",
        model=researcher_model() if model is None else model,
        instructions=RESEARCHER_INSTRUCTIONS,
        tools=[recovery_retryable(search_records)],
    ).build()
    return AgentDefinition(
        name=DEMO_AGENT_NAME,
        model=demo_model() if model is None else model,
        instructions=INSTRUCTIONS,
        tools=[
            recovery_retryable(lookup_record),
            recovery_retryable(search_records),
            *_side_effect_tools(recorder or MemoryRecorder()),
            inline_delegation_tool(researcher),
            host_child_tool(
                "delegate_to_child",
                description="Hand a task to a child execution the Host runs on its own thread (it may ask an "
                "operator for approval); the answer is the child's output.",
            ),
        ],
    )


def build_demo_agent(
    *, model: Model | str | None = None, recorder: ToolCallRecorder | None = None
) -> ExecutableAgent[str]:
    return demo_definition(model=model, recorder=recorder).build()
