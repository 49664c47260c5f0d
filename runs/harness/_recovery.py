"""Tool recovery: what happens to the calls of a checkpoint that have no recorded result.

After a crash such a call may already have run. `prepare_tool_recovery` turns the checkpoint history (and
any accepted deferred input the Host retained) into a `ToolRecoveryPlan`: external facts and explicit denials
answer their calls under every mode; in `"never"` mode every other unanswered call gets the unknown result;
otherwise the calls stay pending with pydantic-ai's `ToolApproved` as programmatic replay permission. The plan's
capability then decides each pending call against the freshly prepared tool definitions of the resuming run
(absent or, in `"declared"` mode, undeclared tools get the unknown result) and makes replayed tools that now
need approval or external execution suspend again, because replay permission is never an approval.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from copy import deepcopy
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, get_args

from pydantic_ai import (
    ApprovalRequired,
    CallDeferred,
    CallToolsNode,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RunContext,
    ToolApproved,
    ToolCallPart,
    ToolDefinition,
    ToolDenied,
    ToolFailed,
)
from pydantic_ai import DeferredToolResults as NativeDeferredToolResults
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset

from ._deferred import DeferredToolResume, check_resume_surface
from ._errors import RunError
from ._interrupted import (
    INTERRUPTED_TOOL_RESULT,
    latest_response_index,
    normalize_interrupted_history,
    unanswered_calls,
)
from ._tools import is_recovery_retryable

__all__ = (
    "TOOL_RECOVERY_CAPABILITY_ID",
    "TOOL_RECOVERY_MODES",
    "ToolRecoveryCapability",
    "ToolRecoveryMode",
    "ToolRecoveryPlan",
    "is_recovery_replay",
    "prepare_tool_recovery",
    "tool_call_approved",
)

ToolRecoveryMode = Literal["declared", "never", "always"]
TOOL_RECOVERY_MODES: Final[tuple[ToolRecoveryMode, ...]] = get_args(ToolRecoveryMode)
TOOL_RECOVERY_CAPABILITY_ID: Final = "a13n.harness.tool_recovery"


def is_recovery_replay(ctx: RunContext[Any]) -> bool:
    """Whether the tool call of `ctx` is a recovery replay, whose `ToolApproved` is replay permission only."""
    capability = ctx.capabilities.get(TOOL_RECOVERY_CAPABILITY_ID)
    return isinstance(capability, ToolRecoveryCapability) and capability.is_replay(ctx.tool_call_id)


def tool_call_approved(ctx: RunContext[Any]) -> bool:
    """Whether a person (or policy) really approved the tool call of `ctx`; use this in approval gates.

    pydantic-ai reports a recovery replay as approved (`ctx.tool_call_approved`), because replay permission
    travels as `ToolApproved`; a gate that trusted that flag would let a replay bypass approval.
    """
    return ctx.tool_call_approved and not is_recovery_replay(ctx)


@dataclass(frozen=True)
class ToolRecoveryPlan:
    """How one run continues a checkpoint's unanswered tool calls.

    `history` is what the run continues from; `deferred_tool_results` (native, or `None` when nothing is
    pending) goes to the first attempt only; `replay` are the calls still waiting for the fresh tool surface
    to decide whether they run again; `resume` is the deferred batch whose items must fit that surface.
    """

    mode: ToolRecoveryMode
    history: tuple[ModelMessage, ...]
    deferred_tool_results: NativeDeferredToolResults | None = None
    replay: tuple[ToolCallPart, ...] = ()
    resume: DeferredToolResume | None = None

    def capability(self) -> ToolRecoveryCapability[Any]:
        """A fresh capability applying this plan; add it to the run (one instance per Harness run)."""
        return ToolRecoveryCapability(self, id=TOOL_RECOVERY_CAPABILITY_ID)


def prepare_tool_recovery(
    history: Sequence[ModelMessage],
    mode: ToolRecoveryMode,
    accepted: DeferredToolResume | None = None,
) -> ToolRecoveryPlan:
    """Plan the continuation of `history` under `mode`, consuming the accepted deferred input first.

    `accepted` is the batch returned by `preflight_deferred_resume`. A fresh batch (`recovery=False`) is
    applied verbatim and the mode is ignored; a recovery batch contributes only its external facts and
    explicit denials, never its positive approvals.
    """
    if mode not in TOOL_RECOVERY_MODES:
        raise ValueError(f"tool_recovery must be one of {TOOL_RECOVERY_MODES}, not {mode!r}")
    if accepted is not None and not accepted.recovery:
        return ToolRecoveryPlan(mode, tuple(history), accepted.model_results(), resume=accepted)

    supplied = _supplied_facts(accepted)
    messages = normalize_interrupted_history(history, close_pending_tools=mode == "never" and not supplied)
    pending = _pending_calls(messages, with_accepted_input=bool(supplied))
    if unexpected := set(supplied) - {call.tool_call_id for call in pending}:
        raise RunError(
            "accepted deferred input answers calls that are not pending in the checkpoint",
            code="deferred_state_invalid",
            details={"tool_call_ids": sorted(unexpected)},
        )
    if not pending:
        return ToolRecoveryPlan(mode, tuple(messages))

    results = NativeDeferredToolResults()
    replay: list[ToolCallPart] = []
    for call in pending:
        tool_call_id = call.tool_call_id
        if tool_call_id in supplied:
            category, value = supplied[tool_call_id]
            # Denials go under `approvals`: pydantic-ai 2.68 would wrap a `ToolDenied` found in `calls` as a
            # successful return instead of recording a denied one.
            (results.calls if category == "call" else results.approvals)[tool_call_id] = value
        elif mode == "never":
            # The history could not be closed directly (partial results in a completed request), so the
            # unknown result goes in as a native per-call result.
            results.calls[tool_call_id] = ToolFailed(INTERRUPTED_TOOL_RESULT)
        else:
            results.approvals[tool_call_id] = ToolApproved()
            replay.append(call)
    if isinstance(tail := messages[-1], ModelRequest) and tail.state == "interrupted" and not tail.parts:
        # A cancelled tool step leaves an empty interrupted request; the resumed step records the results.
        messages = messages[:-1]
    if accepted is not None:
        answered_here = {*results.calls, *results.approvals}
        results.metadata = {
            key: value for key, value in accepted.model_results().metadata.items() if key in answered_here
        }
    return ToolRecoveryPlan(mode, tuple(messages), results, tuple(replay), accepted)


def _supplied_facts(accepted: DeferredToolResume | None) -> dict[str, tuple[Literal["call", "denial"], Any]]:
    """Model-keyed external results and explicit denials of the accepted batch (positive approvals excluded)."""
    if accepted is None:
        return {}
    results = accepted.model_results()
    supplied: dict[str, tuple[Literal["call", "denial"], Any]] = {
        tool_call_id: ("call", value) for tool_call_id, value in results.calls.items()
    }
    for tool_call_id, approval in results.approvals.items():
        if approval is False:
            supplied[tool_call_id] = ("denial", ToolDenied())
        elif isinstance(approval, ToolDenied):
            supplied[tool_call_id] = ("denial", approval)
    return supplied


def _pending_calls(messages: Sequence[ModelMessage], *, with_accepted_input: bool) -> list[ToolCallPart]:
    """Ordinary calls of the last response without any recorded result after it."""
    index = latest_response_index(messages)
    response = None if index is None else messages[index]
    if isinstance(response, ModelResponse) and response.state == "suspended" and not with_accepted_input:
        # A provider-suspended turn continues on the provider's native path.
        return []
    return unanswered_calls(messages)


@dataclass
class _RecoveryToolset(WrapperToolset[AgentDepsT]):
    """Reports every freshly prepared tool surface, and runs replayed calls as not approved.

    Replay permission travels as pydantic-ai's `ToolApproved`, so a tool that asks for approval itself
    (`ApprovalRequired` unless `ctx.tool_call_approved`) would otherwise take a replay for an approval.
    """

    on_prepared: Callable[[dict[str, ToolDefinition]], None] = field(kw_only=True)
    is_replay: Callable[[str | None], bool] = field(kw_only=True)

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        tools = await super().get_tools(ctx)
        self.on_prepared({name: tool.tool_def for name, tool in tools.items()})
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT], tool: ToolsetTool[AgentDepsT]
    ) -> Any:
        if self.is_replay(ctx.tool_call_id):
            ctx = replace(ctx, tool_call_approved=False)
        return await super().call_tool(name, tool_args, ctx, tool)


@dataclass
class ToolRecoveryCapability(AbstractCapability[AgentDepsT]):
    """Applies a `ToolRecoveryPlan` inside the run.

    It captures pydantic-ai's per-call result map of the resumed tool step and, once the run has prepared
    its tool surface, checks the deferred batch against that surface and turns every pending call whose tool
    is absent (or, in `"declared"` mode, undeclared) into the unknown result, before the step processes it.
    Calls that stay pending are replays: if their tool now needs approval or runs externally they suspend
    again. Before the next model request nothing is pending any more, so calls the model makes afterwards
    are ordinary. `definitions` holds the latest prepared surface, which gives suspended requests their tool
    identities.
    """

    plan: ToolRecoveryPlan
    definitions: dict[str, ToolDefinition] = field(default_factory=dict[str, ToolDefinition])
    _awaiting_surface: bool = field(default=False, init=False, repr=False)
    _surface_seen: bool = field(default=False, init=False, repr=False)
    _results: dict[str, Any] | None = field(default=None, init=False, repr=False)
    _replaying: set[str] = field(default_factory=set[str], init=False, repr=False)

    def __post_init__(self) -> None:
        self._awaiting_surface = bool(self.plan.replay) or self.plan.resume is not None
        self._replaying = {call.tool_call_id for call in self.plan.replay}

    def get_ordering(self) -> CapabilityOrdering:
        # Outermost, so the surface it sees carries every other capability's metadata (e.g. SetToolMetadata).
        return CapabilityOrdering(position="outermost")

    def get_wrapper_toolset(self, toolset: AbstractToolset[AgentDepsT]) -> AbstractToolset[AgentDepsT]:
        return _RecoveryToolset(toolset, on_prepared=self._surface_prepared, is_replay=self.is_replay)

    def is_replay(self, tool_call_id: str | None) -> bool:
        """Whether this call is being replayed under recovery permission (until the next model request)."""
        return tool_call_id in self._replaying

    async def after_node_run(self, ctx: RunContext[AgentDepsT], *, node: Any, result: Any) -> Any:
        # The resumed tool step is the node the first step hands over; it is captured here because a driver
        # that streams nodes itself runs them before their own node hooks fire.
        if self._awaiting_surface and isinstance(result, CallToolsNode) and result.tool_call_results is not None:
            self._results = result.tool_call_results
            if self._surface_seen:
                self._resolve()
        return result

    def _surface_prepared(self, definitions: dict[str, ToolDefinition]) -> None:
        self.definitions = deepcopy(definitions)
        self._surface_seen = True
        if self._results is not None:
            self._resolve()

    def _resolve(self) -> None:
        """Decide the pending calls from the latest prepared surface, in the step's own result map."""
        assert self._results is not None
        results, self._results = self._results, None
        self._awaiting_surface = False
        if self.plan.resume is not None:
            check_resume_surface(self.plan.resume.requests, self.plan.resume.results, self.definitions)
        for call in self.plan.replay:
            tool_def = self.definitions.get(call.tool_name)
            if tool_def is None or (self.plan.mode == "declared" and not is_recovery_retryable(tool_def)):
                results[call.tool_call_id] = ToolFailed(INTERRUPTED_TOOL_RESULT)
                self._replaying.discard(call.tool_call_id)

    async def after_tool_validate(
        self, ctx: RunContext[AgentDepsT], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any
    ) -> Any:
        if call.tool_call_id in self._replaying:
            if self._awaiting_surface:
                # Fail closed: without the surface decision an undeclared side effect could run again.
                raise RunError(
                    "tool recovery could not decide a replay from the prepared tool surface",
                    code="tool_recovery_unresolved",
                    details={"tool_call_id": call.tool_call_id},
                )
            if tool_def.kind == "unapproved":
                raise ApprovalRequired()
            if tool_def.kind == "external":
                raise CallDeferred()
        return args

    async def before_model_request(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        self._replaying.clear()
        return request_context
