"""Agent definitions and the executable that runs them as Harness runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic

from pydantic_ai import Agent, Tool, UsageLimits, UserContent
from pydantic_ai import DeferredToolRequests as NativeDeferredToolRequests
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings
from pydantic_ai.toolsets import AbstractToolset

from ._context import AgentContext, RunBindings
from ._errors import RunError
from ._events import HarnessRunResultEvent
from ._recovery import ToolRecoveryMode
from ._result import OutputT
from ._state import HarnessState
from ._stream import HarnessRunStream

if TYPE_CHECKING:
    from ._deferred import DeferredToolResume
    from ._result import HarnessRunResult
    from ._shell import ShellEnvironment

__all__ = ("AgentDefinition", "ExecutableAgent")


@dataclass(frozen=True, kw_only=True)
class AgentDefinition(Generic[OutputT]):
    """What an agent is: model, prompts, output type, tools and pydantic-ai capabilities.

    `model` may be a `Model` or any pydantic-ai model string (`"openai:gpt-4o"`, ...); it is resolved when a
    run needs it, so a definition can name a provider whose package or key only the worker has.
    """

    name: str = "agent"
    model: Model | str | None = None
    instructions: str | Sequence[str] | None = None
    system_prompt: str | None = None
    output_type: Any = str
    tools: Sequence[Tool[AgentContext] | Any] = ()
    toolsets: Sequence[AbstractToolset[AgentContext]] = ()
    capabilities: Sequence[AbstractCapability[AgentContext]] = ()
    model_settings: ModelSettings | None = None
    retries: int = 1

    def build(self) -> ExecutableAgent[OutputT]:
        return ExecutableAgent(self)


@dataclass(eq=False)
class ExecutableAgent(Generic[OutputT]):
    """An agent definition ready to run; every run or stream is an independent Harness run."""

    definition: AgentDefinition[OutputT]
    agent: Agent[AgentContext, Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        definition = self.definition
        self.agent = Agent(
            definition.model,
            output_type=_with_deferred(definition.output_type),
            instructions=definition.instructions,
            system_prompt=definition.system_prompt or (),
            deps_type=AgentContext,
            name=definition.name,
            model_settings=definition.model_settings,
            retries=definition.retries,
            tools=definition.tools,
            toolsets=definition.toolsets,
            capabilities=definition.capabilities,
            defer_model_check=True,
        )

    @property
    def name(self) -> str:
        return self.definition.name

    def stream(
        self,
        input: str | Sequence[UserContent] | None = None,
        *,
        bindings: RunBindings | None = None,
        previous_state: HarnessState | None = None,
        tool_recovery: ToolRecoveryMode = "declared",
        deferred_resume: DeferredToolResume | None = None,
        usage_limits: UsageLimits | None = None,
        environment: ShellEnvironment | None = None,
    ) -> HarnessRunStream[OutputT]:
        """A lazy run: nothing happens until `async with` enters it.

        `environment` is a fresh shell adapter for this run only (offered to the model through
        `DynamicEnvironmentCapability`); once the stream is entered, the run closes it at teardown.
        """
        return HarnessRunStream(
            self,
            input,
            bindings=bindings,
            previous_state=previous_state,
            tool_recovery=tool_recovery,
            deferred_resume=deferred_resume,
            usage_limits=usage_limits,
            environment=environment,
        )

    async def run(
        self,
        input: str | Sequence[UserContent] | None = None,
        *,
        bindings: RunBindings | None = None,
        previous_state: HarnessState | None = None,
        tool_recovery: ToolRecoveryMode = "declared",
        deferred_resume: DeferredToolResume | None = None,
        usage_limits: UsageLimits | None = None,
        environment: ShellEnvironment | None = None,
    ) -> HarnessRunResult[OutputT]:
        """Run to the end and return the result carried by the terminal stream item."""
        stream = self.stream(
            input,
            bindings=bindings,
            previous_state=previous_state,
            tool_recovery=tool_recovery,
            deferred_resume=deferred_resume,
            usage_limits=usage_limits,
            environment=environment,
        )
        async with stream:
            async for item in stream:
                if isinstance(item, HarnessRunResultEvent):
                    return item.result
        raise RunError("the run ended without a result", code="run_result_missing")


def _with_deferred(output_type: Any) -> list[Any]:
    # Deferred requests are always a possible output; whether a run may suspend on them is decided per run
    # by its bindings, so one built agent serves root runs and inline children alike.
    types = list(output_type) if isinstance(output_type, list | tuple) else [output_type]
    return types if NativeDeferredToolRequests in types else [*types, NativeDeferredToolRequests]
