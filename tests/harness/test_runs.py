"""Running and continuing Threads (spec B.2, 5.2 T17, 5.3)."""

from __future__ import annotations

import re

from pydantic_ai import (
    ModelRequest,
    ModelResponse,
    RunContext,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)

from runs.harness import AgentContext, AgentDefinition, EnvironmentState, HarnessState, RunBindings, scripted_model
from tests.support.harness_streams import call_then_echo

RUN_ID = re.compile(r"^run-[0-9a-f]{32}$")


class ModelRecorder:
    """A scripted model that answers every prompt with "echo: <prompt>" and records what it saw."""

    def __init__(self, name: str = "scripted") -> None:
        self.requests: list[list] = []
        self.model = scripted_model(self.script, model_name=name)

    def script(self, messages, info):
        self.requests.append(list(messages))
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(f"tool said {returns[0].content}")])
        prompt = messages[-1].parts[-1].content
        if prompt == "use the tool":
            return ModelResponse(parts=[ToolCallPart("lookup", {"q": "plan"}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart(f"echo: {prompt}")])


def lookup(q: str) -> str:
    return f"record {q}"


def fresh_bindings() -> RunBindings:
    return RunBindings()


async def test_seed_sample_continue_a_thread():
    """T19 / the contract's "Continuing a Thread" sample, as written: same thread, new run, history carried over."""
    recorder = ModelRecorder()
    executable = AgentDefinition(model=recorder.model, tools=[lookup]).build()

    initial_state = HarnessState.new(thread_id="thr_productthread1")
    first = await executable.run("Draft the plan", bindings=fresh_bindings(), previous_state=initial_state)
    if first.state is None:
        raise RuntimeError("No continuation state is available")
    second = await executable.run("Review it", bindings=fresh_bindings(), previous_state=first.state)

    assert first.thread_id == second.thread_id == "thr_productthread1"
    assert first.run_id != second.run_id
    assert RUN_ID.match(first.run_id) and RUN_ID.match(second.run_id)
    assert second.output == "echo: Review it"
    seen = recorder.requests[-1]
    assert seen[: len(first.state.message_history)] == list(first.state.message_history)
    assert [m.run_id for m in second.new_messages()] == [second.run_id, second.run_id]
    assert initial_state.message_history == ()


async def test_tool_run_keeps_the_whole_exchange():
    recorder = ModelRecorder()
    executable = AgentDefinition(model=recorder.model, tools=[lookup]).build()
    result = await executable.run("use the tool")

    assert result.status == "completed"
    assert result.output == "tool said record plan"
    kinds = [type(m).__name__ for m in result.state.message_history]
    assert kinds == ["ModelRequest", "ModelResponse", "ModelRequest", "ModelResponse"]
    assert result.usage.requests == 2
    assert result.usage.tool_calls == 1
    assert re.fullmatch(r"thread_[0-9a-f]{32}", result.thread_id)


async def test_each_run_uses_only_its_own_bindings():
    """T20: a model bound for run 1 is not used by run 2."""
    definition_model, bound_model = ModelRecorder("definition"), ModelRecorder("bound")
    executable = AgentDefinition(model=definition_model.model).build()

    first = await executable.run("one", bindings=RunBindings(model=bound_model.model))
    await executable.run("two", bindings=RunBindings(), previous_state=first.state)

    assert len(bound_model.requests) == 1
    assert len(definition_model.requests) == 1
    assert definition_model.requests[0][-1].parts[-1].content == "two"


async def test_continued_thread_runs_under_the_current_system_prompt():
    """T21: old system prompts are replaced by the current definition's one."""
    recorder = ModelRecorder()
    old = HarnessState.new(
        thread_id="thr_prompts1",
        message_history=[
            ModelRequest(parts=[SystemPromptPart("old rules"), *ModelRequest.user_text_prompt("hi").parts]),
            ModelResponse(parts=[TextPart("hello")]),
        ],
    )
    executable = AgentDefinition(model=recorder.model, system_prompt="new rules").build()
    result = await executable.run("next", previous_state=old)

    prompts = [
        part.content
        for message in recorder.requests[-1]
        for part in message.parts
        if isinstance(part, SystemPromptPart)
    ]
    assert prompts == ["new rules"]
    first_part = recorder.requests[-1][0].parts[0]
    assert isinstance(first_part, SystemPromptPart) and first_part.content == "new rules"
    exported = [
        part.content
        for message in result.state.message_history
        for part in message.parts
        if isinstance(part, SystemPromptPart)
    ]
    assert exported == ["new rules"]


async def test_a_provider_suspended_response_keeps_its_system_prompt():
    """T51 / S63: a history ending in a provider-suspended response is handed on as it is, old prompt included."""
    recorder = ModelRecorder()
    history = [
        ModelRequest(parts=[SystemPromptPart("old rules"), *ModelRequest.user_text_prompt("hi").parts]),
        ModelResponse(parts=[TextPart("still working")], state="suspended"),
    ]
    suspended = HarnessState.new(thread_id="thr_suspended1", message_history=history)
    executable = AgentDefinition(model=recorder.model, system_prompt="new rules").build()

    for mode in ("declared", "never", "always"):
        await executable.run(previous_state=suspended, tool_recovery=mode)
        assert recorder.requests[-1] == history


async def test_the_thread_id_is_the_conversation_id_of_every_message():
    """S40: pydantic-ai correlates the history (and model-session affinity) by the thread id."""
    recorder = ModelRecorder()
    executable = AgentDefinition(model=recorder.model).build()
    first = await executable.run("one", previous_state=HarnessState.new(thread_id="thr_affinity1"))
    branch = await executable.run("two", previous_state=first.state.fork(thread_id="thr_affinity2"))

    assert {m.conversation_id for m in recorder.requests[0]} == {"thr_affinity1"}
    assert {m.conversation_id for m in first.state.message_history} == {"thr_affinity1"}
    assert recorder.requests[1][-1].conversation_id == "thr_affinity2"
    assert {m.conversation_id for m in branch.new_messages()} == {"thr_affinity2"}


async def test_forked_state_continues_as_the_branch():
    """T17: a run on a fork reports the branch id; the source thread is unaffected."""
    executable = AgentDefinition(model=ModelRecorder().model).build()
    first = await executable.run("start", previous_state=HarnessState.new(thread_id="thr_main1"))
    source_json = first.state.model_dump_json()

    branch = first.state.fork(thread_id="thr_branch1")
    continued = await executable.run("branch off", previous_state=branch)

    assert continued.thread_id == "thr_branch1"
    assert continued.state.thread_id == "thr_branch1"
    assert first.state.model_dump_json() == source_json
    assert len(continued.state.message_history) == len(first.state.message_history) + 2


async def test_a_state_restores_data_but_not_the_authority_of_the_run_that_made_it():
    """S30/S31: the credential a run was bound with is neither in its state nor granted to the next run."""

    def whoami(ctx: RunContext[AgentContext]) -> str:
        return "signed in" if ctx.deps.deps else "anonymous"

    executable = AgentDefinition(model=scripted_model(call_then_echo("whoami", "c1")), tools=[whoami]).build()
    credential = "sk-live-authority-1"
    first = await executable.run(
        "who am I", bindings=RunBindings(deps=credential), previous_state=HarnessState.new(thread_id="thr_authority1")
    )
    second = await executable.run("and now", bindings=RunBindings(), previous_state=first.state)

    assert (first.output, second.output) == ("signed in", "anonymous")
    assert credential not in first.state.model_dump_json()
    assert credential not in second.state.model_dump_json()


async def test_environment_states_are_not_copied_into_the_next_run():
    """T12: no mount is bound in the next run, so its export has no environment entry."""
    previous = HarnessState.new(
        thread_id="thr_env1",
        environment_states={"m": EnvironmentState(provider_key="local", state_version="1", state={"cwd": "/"})},
    )
    result = await AgentDefinition(model=ModelRecorder().model).build().run("go", previous_state=previous)
    assert result.state.environment_states == {}


async def test_unknown_top_level_fields_travel_through_a_run():
    previous = HarnessState.model_validate(
        {**HarnessState.new(thread_id="thr_extra1").model_dump(mode="json"), "future": {"keep": True}}
    )
    result = await AgentDefinition(model=ModelRecorder().model).build().run("go", previous_state=previous)
    assert result.state.model_extra == {"future": {"keep": True}}


def test_model_strings_are_accepted_in_definitions():
    """Real pydantic-ai model strings still work: resolution waits until a run needs the model."""
    executable = AgentDefinition(model="openai:gpt-4o", instructions="be brief").build()
    assert executable.name == "agent"
