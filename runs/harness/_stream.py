"""`HarnessRunStream`: one Harness run as an async context manager and async iterator.

A producer task drives pydantic-ai's `Agent.iter` and puts every native event, harness extension event and
forwarded inline-child item into one bounded queue; the consumer stamps root items with the contiguous public
sequence. The terminal `HarnessRunResultEvent` is built only after run-scoped cleanups finished, so a Host
that sees it knows the run is over.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, Literal

from pydantic import JsonValue
from pydantic_ai import (
    Agent,
    AgentRunError,
    CancellationToken,
    EnqueuedMessagesEvent,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    RunCancelled,
    SystemPromptPart,
    UsageLimitExceeded,
    UsageLimits,
    UserContent,
)
from pydantic_ai import DeferredToolRequests as NativeDeferredToolRequests
from pydantic_ai.capabilities import AbstractCapability, HandleDeferredToolCalls
from pydantic_ai.exceptions import ModelAPIError
from pydantic_ai.run import AgentRun

from ._capability_state import AgentContextState
from ._context import AgentContext, RunBindings
from ._deferred import (
    DeferredToolResume,
    PendingDeferredCalls,
    preflight_deferred_resume,
    refuse_deferred_requests,
)
from ._errors import RetryHint, RunCleanupError, RunError, StateError
from ._events import HarnessEvent, HarnessRunResultEvent, lifecycle_event, run_started_event, utc_now
from ._inputs import InputSource, InputTextEvent, prompt_text, steering_inputs
from ._interrupted import InterruptedResponseTracker, normalize_interrupted_history
from ._model_errors import describe_model_error
from ._recovery import TOOL_RECOVERY_MODES, ToolRecoveryCapability, ToolRecoveryMode, prepare_tool_recovery
from ._result import FailureDetails, HarnessRunResult, OutputT, RunUsageSummary, SafeFailure
from ._run_shell import RunShell
from ._shell import ShellEnvironment
from ._state import HarnessState, HistoryEncoder, encode_environment_states

if TYPE_CHECKING:
    from ._agent import ExecutableAgent

__all__ = ("QUEUE_CAPACITY", "HarnessRunStream", "new_run_id")


QUEUE_CAPACITY = 64
# The longest exception message a failure keeps in its details.
ERROR_MESSAGE_CHARS = 500


def new_run_id() -> str:
    return f"run-{uuid.uuid4().hex}"


class _End:
    """Queue marker: the producer finished (its outcome is on the stream)."""


_END = _End()


class HarnessRunStream(Generic[OutputT]):
    """One run of an `ExecutableAgent`, consumed with `async with stream: async for item in stream`.

    Construction validates everything that can be checked without running (recovery mode, bindings,
    deferred resume) and prepares the history; nothing runs until the stream is entered. Single use: one
    entry, one iteration, one consumer at a time.
    """

    def __init__(
        self,
        executable: ExecutableAgent[OutputT],
        input: str | Sequence[UserContent] | None,
        *,
        bindings: RunBindings | None,
        previous_state: HarnessState | None,
        tool_recovery: ToolRecoveryMode,
        deferred_resume: DeferredToolResume | None,
        usage_limits: UsageLimits | None,
        environment: ShellEnvironment | None = None,
    ) -> None:
        if tool_recovery not in TOOL_RECOVERY_MODES:
            raise ValueError(f"tool_recovery must be one of {TOOL_RECOVERY_MODES}, not {tool_recovery!r}")
        if bindings is None:
            bindings = RunBindings.embedded()
        elif not isinstance(bindings, RunBindings):
            raise RunError("bindings must be RunBindings", code="run_bindings_invalid")
        # Items of a sequence are pydantic-ai's to check; a wrong kind of input would only fail mid-run.
        if input is not None and not isinstance(input, str | Sequence):
            raise RunError("input must be a string, a sequence of user content or None", code="run_input_invalid")
        if previous_state is not None and not isinstance(previous_state, HarnessState):
            raise RunError("previous_state must be a HarnessState", code="previous_state_invalid")
        if environment is not None and not isinstance(environment, ShellEnvironment):
            raise RunError("environment must be a ShellEnvironment", code="environment_invalid")
        resume = preflight_deferred_resume(deferred_resume, previous_state)
        if resume is not None and not bindings.deferred_tools_supported:
            raise RunError("these bindings do not support deferred tools", code="deferred_tools_unsupported")

        self._environment = environment
        self._executable = executable
        self._input = input
        self._bindings = bindings
        self._usage_limits = usage_limits
        self._previous = previous_state if previous_state is not None else HarnessState.new()
        self._resume = resume
        self.thread_id = self._previous.thread_id
        self.run_id = new_run_id()

        history = _reconcile_system_prompt(self._previous.message_history, executable.definition.system_prompt)
        self._plan = prepare_tool_recovery(history, tool_recovery, resume)
        self._recovery: ToolRecoveryCapability[Any] = self._plan.capability()
        self._capabilities: list[AbstractCapability[AgentContext]] = [self._recovery]
        if not bindings.deferred_tools_supported:
            # Last in the chain, so the definition's own deferred handlers still answer what they can.
            self._capabilities.append(HandleDeferredToolCalls(refuse_deferred_requests))
        self._latest_messages: list[ModelMessage] = list(self._plan.history)

        self._phase: Literal["new", "active", "closing", "closed"] = "new"
        self._iterating = False
        self._in_next = False
        self._finished = False
        self._sequence = -1
        self._inputs = 0
        self._queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=QUEUE_CAPACITY)
        self._producer: asyncio.Task[None] | None = None
        self._agent_run: AgentRun[AgentContext, Any] | None = None
        self._tracker = InterruptedResponseTracker()
        self._history_encoder = HistoryEncoder()
        self._token = CancellationToken()
        self._children: dict[str, str] = {}
        self._child_sequences: dict[str, int] = {}
        self._candidate: HarnessRunResult[OutputT] | None = None
        self._error: BaseException | None = None
        self._diagnostic_error: BaseException | None = None
        self._torn_down = False
        self._shutdown_state: HarnessState | None = None
        self._shutdown_error: BaseException | None = None
        self._result: HarnessRunResult[OutputT] | None = None
        self._context: AgentContext | None = None

    # -- public surface ---------------------------------------------------------------------------------

    @property
    def context(self) -> AgentContext:
        if self._context is None:
            raise RunError("the run has not been entered", code="run_not_active")
        return self._context

    @property
    def result(self) -> HarnessRunResult[OutputT] | None:
        """The result delivered as the terminal item, if it was delivered."""
        return self._result

    @property
    def outcome(self) -> HarnessRunResult[OutputT] | None:
        """After close: the last validated candidate, delivered or not (see `RunCleanupError`)."""
        return self._candidate if self._phase == "closed" else None

    @property
    def diagnostic_error(self) -> BaseException | None:
        """The exception behind a failed outcome, for Host logs only (never shown to users or stored)."""
        return self._diagnostic_error

    @property
    def usage(self) -> RunUsageSummary:
        if self._agent_run is None:
            return RunUsageSummary()
        return RunUsageSummary.from_usage(self._agent_run.usage)

    @property
    def pending_deferred_input(self) -> DeferredToolResume | None:
        """The accepted deferred batch the latest history has not incorporated yet."""
        if self._resume is None:
            return None
        messages = self._current_messages()
        if not any(isinstance(message, ModelResponse) for message in messages):
            return self._resume
        return self._resume.remaining(messages)

    def cancel(self) -> None:
        """Ask the run to stop; it ends with a `cancelled` result carrying a safe state."""
        self._token.cancel()

    async def export_state(self) -> HarnessState:
        """A candidate state at the latest safe public boundary. Persists nothing."""
        if self._phase == "new":
            raise StateError("the run is not active", code="run_not_active")
        if self._torn_down:
            if self._shutdown_state is None:
                raise StateError(
                    "no state is available for this closed run", code="run_state_unavailable"
                ) from self._shutdown_error
            return self._shutdown_state
        return await self._export(self._current_messages())

    # -- context manager and iterator -------------------------------------------------------------------

    async def __aenter__(self) -> HarnessRunStream[OutputT]:
        if self._phase != "new":
            raise RunError("a run stream can be entered only once", code="run_stream_reused")
        self._phase = "active"
        self._context = AgentContext(
            thread_id=self.thread_id,
            run_id=self.run_id,
            agent_name=self._executable.name,
            bindings=self._bindings,
            state=AgentContextState(self._previous.agent_context_state),
            _stream=self,
            shell=None if self._environment is None else RunShell(self._environment, run_id=self.run_id),
        )
        # Queued before anything else can publish, so it is always item 0 of the run.
        self._queue.put_nowait(run_started_event())
        self._producer = asyncio.create_task(self._produce(), name=f"harness-run {self.run_id}")
        return self

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if self._phase == "closed":
            return
        self._phase = "closing"
        try:
            if self._producer is not None and not self._producer.done():
                self._producer.cancel()
                await asyncio.gather(self._producer, return_exceptions=True)
            if not self._torn_down:
                causes = await self._teardown()
                if causes and exc is None:
                    raise RunCleanupError("the run was not torn down cleanly", outcome=self._candidate, causes=causes)
        finally:
            self._phase = "closed"

    def __aiter__(self) -> HarnessRunStream[OutputT]:
        if self._phase != "active":
            raise RunError("the run is not active", code="run_not_active")
        if self._iterating:
            raise RunError("a run stream can be iterated only once", code="run_stream_reused")
        self._iterating = True
        return self

    async def __anext__(self) -> HarnessEvent | HarnessRunResultEvent[OutputT]:
        if self._finished:
            raise StopAsyncIteration
        if self._phase != "active":
            raise RunError("the run is not active", code="run_not_active")
        if self._in_next:
            raise RunError("a run stream has a single consumer", code="run_stream_concurrent_next")
        self._in_next = True
        try:
            item = await self._queue.get()
            if isinstance(item, _End):
                self._finished = True
                return await self._finish()
            if isinstance(item, HarnessEvent):
                return item
            return HarnessEvent(self.thread_id, self.run_id, self._next_sequence(), utc_now(), item)
        finally:
            self._in_next = False

    # -- producer ---------------------------------------------------------------------------------------

    async def _produce(self) -> None:
        try:
            self._candidate = await self._drive()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Not a run outcome (e.g. a harness error or a bug): the consumer raises it after teardown.
            self._error = self._diagnostic_error = exc
        await self._queue.put(_END)

    async def _drive(self) -> HarnessRunResult[OutputT]:
        if self._token.cancelled:
            return await self._cancelled(self._latest_messages)
        # After what the code that entered the stream emitted first (an inline child's delegation bracket).
        prompt = prompt_text(self._input)
        if prompt is not None:
            await self._publish(self._input_event("user", prompt))
        agent = self._executable.agent
        try:
            async with agent.iter(
                self._input,
                message_history=self._plan.history,
                deferred_tool_results=self._plan.deferred_tool_results,
                conversation_id=self.thread_id,
                run_id=self.run_id,
                model=self._bindings.model,
                deps=self.context,
                usage_limits=self._usage_limits,
                cancellation_token=self._token,
                capabilities=self._capabilities,
            ) as agent_run:
                self._agent_run = agent_run
                await self._drive_nodes(agent_run)
                assert agent_run.result is not None
                output = agent_run.result.output
        except RunCancelled as exc:
            return await self._cancelled(exc.all_messages() or self._current_messages())
        except UsageLimitExceeded as exc:
            return await self._failed("usage_limit_exceeded", "The run exceeded its usage limits.", exc)
        except ModelAPIError as exc:
            failure = describe_model_error(exc)
            return await self._failed(
                failure.code, failure.message, exc, retry_hint=failure.retry_hint, details=failure.details
            )
        except AgentRunError as exc:
            # pydantic-ai's own message ("Exceeded maximum retries (1) for output validation") says why; the
            # response body some subclasses carry beside it is left out, as it can echo the prompt.
            details: FailureDetails = {
                "error_type": type(exc).__name__,
                "error_message": exc.message[:ERROR_MESSAGE_CHARS],
            }
            return await self._failed("agent_run_failed", "The agent run failed.", exc, details=details)

        suspended = isinstance(output, NativeDeferredToolRequests)
        # Only reachable when a call defers again after being answered inline (the refusal handler has
        # already run for that step), so the run cannot suspend and fails with its state.
        if suspended and not self._bindings.deferred_tools_supported:
            return await self._failed(
                "deferred_tools_unsupported",
                "The run asked for approval or external input, which this run does not support.",
                None,
                retry_hint="none",
            )
        state = await self._export(self._current_messages())
        usage = self.usage
        if suspended:
            deferred = PendingDeferredCalls.export(output, definitions=self._recovery.definitions)
            return HarnessRunResult(
                thread_id=self.thread_id,
                run_id=self.run_id,
                status="suspended",
                state=state,
                suspend_reason="deferred",
                deferred=deferred,
                usage=usage,
            )
        return HarnessRunResult(
            thread_id=self.thread_id, run_id=self.run_id, status="completed", output=output, state=state, usage=usage
        )

    async def _drive_nodes(self, agent_run: AgentRun[AgentContext, Any]) -> None:
        request_index = 0
        async for node in agent_run:
            if Agent.is_model_request_node(node):
                request: dict[str, JsonValue] = {
                    "request_id": f"model-request-{request_index}",
                    "request_index": request_index,
                }
                await self._publish(lifecycle_event("model_request_started", **request))
                # The run's graph state, read once: `all_messages()` builds a new typed context for every call.
                state = agent_run.ctx.state
                try:
                    async with node.stream(agent_run.ctx) as events:
                        async for event in events:
                            self._tracker.observe(event, boundary=len(state.message_history))
                            await self._publish_native(event)
                except Exception:
                    await self._publish(lifecycle_event("model_request_failed", **request))
                    raise
                await self._publish(lifecycle_event("model_request_completed", **request))
                request_index += 1
            elif Agent.is_call_tools_node(node):
                async with node.stream(agent_run.ctx) as events:
                    async for event in events:
                        await self._publish_native(event)

    async def _cancelled(self, messages: Sequence[ModelMessage]) -> HarnessRunResult[OutputT]:
        candidate = self._candidate_messages(messages)
        return HarnessRunResult(
            thread_id=self.thread_id,
            run_id=self.run_id,
            status="cancelled",
            state=await self._export(candidate) if candidate else None,
            usage=self.usage,
        )

    async def _failed(
        self,
        code: str,
        message: str,
        error: BaseException | None,
        *,
        retry_hint: RetryHint = "dependency_change",
        details: FailureDetails | None = None,
    ) -> HarnessRunResult[OutputT]:
        if details is None:
            details = {} if error is None else {"error_type": type(error).__name__}
        self._diagnostic_error = error
        return HarnessRunResult(
            thread_id=self.thread_id,
            run_id=self.run_id,
            status="failed",
            state=await self._export(self._candidate_messages(self._current_messages())),
            failure=SafeFailure(code=code, message=message, retry_hint=retry_hint, details=details),
            usage=self.usage,
        )

    # -- state ------------------------------------------------------------------------------------------

    def _current_messages(self) -> list[ModelMessage]:
        if self._agent_run is not None:
            self._latest_messages = list(self._agent_run.all_messages())
        return self._latest_messages

    def _candidate_messages(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """The history of a failure or cancellation candidate: interrupted parts removed, calls closed."""
        sanitized = self._tracker.sanitize(messages)
        # Calls an accepted deferred batch still answers stay open for the Host's retained input.
        pending_input = self._resume is not None and self._resume.remaining(sanitized) is not None
        return normalize_interrupted_history(sanitized, close_pending_tools=not pending_input)

    async def _export(self, messages: Sequence[ModelMessage]) -> HarnessState:
        # An interrupted tail may hold half-streamed parts; only what observers saw completely is exported.
        public = normalize_interrupted_history(self._tracker.sanitize(messages), close_pending_tools=False)
        # Only what this run's own adapter reports: the previous state's environment entries are evidence
        # the Host already had, never applied to this run, so a run without an environment exports none.
        shell = self.context.shell
        return self._previous.with_encoded_history(
            self._history_encoder.encode(public),
            agent_context_state=await self.context.state.snapshot(),
            environment_states_json=encode_environment_states({} if shell is None else shell.environment_states()),
        )

    # -- queue ------------------------------------------------------------------------------------------

    async def _publish_native(self, event: Any) -> None:
        await self._publish(event)
        if isinstance(event, EnqueuedMessagesEvent):
            for text in steering_inputs(event):
                await self._publish(self._input_event("steering", text))

    def _input_event(self, source: InputSource, content: str) -> InputTextEvent:
        self._inputs += 1
        return InputTextEvent(input_id=f"input-{self._inputs - 1}", source=source, content=content)

    async def _publish(self, event: Any) -> None:
        if self._phase == "closing":
            # The consumer has left, so nobody drains the queue: waiting for room would hang the teardown.
            return
        await self._queue.put(event)

    def _register_child(self, *, run_id: str, thread_id: str) -> None:
        if thread_id == self.thread_id or run_id == self.run_id:
            raise RunError("an inline child needs its own thread and run", code="child_run_invalid")
        self._children[run_id] = thread_id

    async def _forward(self, item: HarnessEvent) -> None:
        if not isinstance(item, HarnessEvent):
            raise RunError("only child stream events can be forwarded", code="event_invalid")
        expected_thread = self._children.get(item.run_id)
        # Items of grandchildren arrive through a registered child, which checked them already.
        if not self._children or item.run_id == self.run_id or expected_thread not in (None, item.thread_id):
            raise RunError("the item does not belong to a registered inline child", code="event_run_mismatch")
        if item.sequence <= self._child_sequences.get(item.run_id, -1):
            raise RunError("child items must have increasing sequences", code="event_sequence_invalid")
        self._child_sequences[item.run_id] = item.sequence
        await self._publish(item)

    def _next_sequence(self) -> int:
        self._sequence += 1
        return self._sequence

    # -- teardown ---------------------------------------------------------------------------------------

    async def _teardown(self) -> list[BaseException]:
        causes: list[BaseException] = []
        try:
            if self._context is not None:
                await self._context._cleanups.aclose()
        except Exception as exc:
            causes.append(exc)
        if self._context is not None and self._context.shell is not None:
            # Observations are released and the adapter closed; the commands themselves keep running.
            causes.extend(await self._context.shell.close())
        if self._candidate is not None and self._candidate.state is not None:
            self._shutdown_state = self._candidate.state
        elif self._context is not None:
            try:
                self._shutdown_state = await self._export(self._candidate_messages(self._current_messages()))
            except Exception as exc:
                self._shutdown_error = exc
        self._torn_down = True
        return causes

    async def _finish(self) -> HarnessRunResultEvent[OutputT]:
        assert self._producer is not None
        await self._producer
        causes = await self._teardown()
        if causes:
            # The run's own failure comes first: it is what the Host must reconcile before anything else.
            failure = [self._error] if self._error is not None else []
            raise RunCleanupError(
                "the run was not torn down cleanly", outcome=self._candidate, causes=[*failure, *causes]
            )
        if self._error is not None:
            raise self._error
        assert self._candidate is not None
        event = HarnessRunResultEvent(self.thread_id, self.run_id, self._next_sequence(), utc_now(), self._candidate)
        self._result = self._candidate
        return event


def _reconcile_system_prompt(history: Sequence[ModelMessage], system_prompt: str | None) -> list[ModelMessage]:
    """Replace historical system prompts by the current definition's one, at the start of the first request.

    A continued Thread must run under the definition the Host chose now, not the one that produced the
    history. A provider-suspended response continues natively, so its history is left alone.
    """
    messages = list(history)
    if not messages or (isinstance(messages[-1], ModelResponse) and messages[-1].state == "suspended"):
        return messages
    reconciled: list[ModelMessage] = []
    first_request = True
    for message in messages:
        if isinstance(message, ModelRequest):
            parts: list[ModelRequestPart] = [part for part in message.parts if not isinstance(part, SystemPromptPart)]
            if first_request and system_prompt:
                parts.insert(0, SystemPromptPart(system_prompt))
            first_request = False
            if parts != list(message.parts):
                message = replace(message, parts=parts)
        reconciled.append(message)
    return reconciled
