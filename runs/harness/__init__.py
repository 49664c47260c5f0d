"""The harness engine: portable Thread state, runs and streams on pydantic-ai.

Pure library: no Django, Channels or RQ (enforced by import-linter).
"""

from pydantic_ai import DeferredToolResults

from ._agent import AgentDefinition, ExecutableAgent
from ._approval_rules import (
    APPROVAL_CAPABILITY_ID,
    ApprovalPolicy,
    ApprovalRule,
    ApprovalRulesCapability,
    ArgumentCondition,
    parse_approval_rules,
)
from ._boundaries import BOUNDARY_TYPE, CheckpointBoundaries, PendingDispatch, boundary_of
from ._budget import BUDGET_CAPABILITY_ID, BUDGET_EXCEEDED, OVER_BUDGET_TOOL, BudgetCapability, BudgetCheck, OverBudget
from ._capability_state import AgentContextState
from ._children import CHILD_METADATA_KEY, ChildRequest, child_request_of, host_child_tool
from ._codec import (
    CODEC_VERSION,
    CodecError,
    EncodedItem,
    decode_item,
    decode_resume,
    encode_item,
    encode_resume,
    item_kind,
)
from ._context import AgentContext, RunBindings
from ._deferred import (
    DEFERRED_UNAVAILABLE_MESSAGE,
    MAX_DEFERRED_REQUESTS,
    DeferredItemKind,
    DeferredToolCall,
    DeferredToolResume,
    PendingDeferredCalls,
    preflight_deferred_resume,
)
from ._delegation import inline_delegation_tool
from ._environment import SHELL_TOOL_NAMES, DynamicEnvironmentCapability
from ._errors import DefinitionError, HarnessError, RunCleanupError, RunError, StateError
from ._events import (
    AgentStreamEventProtocol,
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessRunResultEvent,
    HarnessStreamEvent,
    InlineDelegationPayload,
)
from ._inputs import InputSource, InputTextEvent
from ._interrupted import INTERRUPTED_TOOL_RESULT, is_unknown_result
from ._local_shell import LocalShellEnvironment
from ._recovery import ToolRecoveryMode, ToolRecoveryPlan, prepare_tool_recovery, tool_call_approved
from ._replay import Divergence, DivergenceKind, Replay, ReplayDiverged
from ._result import HarnessRunResult, RunOutcome, RunUsageSummary, SafeFailure, SuspendReason
from ._run_shell import SHELL_MOUNT, RunShell, ShellInfo, ShellListing, ShellOutput, ShellPage, ShellRefusal
from ._scripted import Script, scripted_model
from ._shell import (
    ShellAction,
    ShellChunk,
    ShellCommand,
    ShellEnvironment,
    ShellSignal,
    ShellStatus,
    ShellStream,
)
from ._state import (
    THREAD_ID_PATTERN,
    AgentContextStateSnapshot,
    CapabilityState,
    EnvironmentState,
    HarnessState,
    HistoryEncoder,
    StoredRef,
    new_thread_id,
)
from ._stream import HarnessRunStream
from ._subagents import SUBAGENTS_NAMESPACE, RetainedChild, RetainedChildren
from ._tools import RECOVERY_RETRY_SAFE_METADATA_KEY, is_recovery_retryable, recovery_retryable

__all__ = (
    "APPROVAL_CAPABILITY_ID",
    "BOUNDARY_TYPE",
    "BUDGET_CAPABILITY_ID",
    "BUDGET_EXCEEDED",
    "CHILD_METADATA_KEY",
    "CODEC_VERSION",
    "DEFERRED_UNAVAILABLE_MESSAGE",
    "INTERRUPTED_TOOL_RESULT",
    "MAX_DEFERRED_REQUESTS",
    "OVER_BUDGET_TOOL",
    "RECOVERY_RETRY_SAFE_METADATA_KEY",
    "SHELL_MOUNT",
    "SHELL_TOOL_NAMES",
    "SUBAGENTS_NAMESPACE",
    "THREAD_ID_PATTERN",
    "AgentContext",
    "AgentContextState",
    "AgentContextStateSnapshot",
    "AgentDefinition",
    "AgentStreamEventProtocol",
    "ApprovalPolicy",
    "ApprovalRule",
    "ApprovalRulesCapability",
    "ArgumentCondition",
    "BudgetCapability",
    "BudgetCheck",
    "CapabilityState",
    "CheckpointBoundaries",
    "ChildRequest",
    "CodecError",
    "DeferredItemKind",
    "DeferredToolCall",
    "DeferredToolResults",
    "DeferredToolResume",
    "DefinitionError",
    "Divergence",
    "DivergenceKind",
    "DynamicEnvironmentCapability",
    "EncodedItem",
    "EnvironmentState",
    "ExecutableAgent",
    "HarnessError",
    "HarnessEvent",
    "HarnessExtensionEvent",
    "HarnessRunResult",
    "HarnessRunResultEvent",
    "HarnessRunStream",
    "HarnessState",
    "HarnessStreamEvent",
    "HistoryEncoder",
    "InlineDelegationPayload",
    "InputSource",
    "InputTextEvent",
    "LocalShellEnvironment",
    "OverBudget",
    "PendingDeferredCalls",
    "PendingDispatch",
    "Replay",
    "ReplayDiverged",
    "RetainedChild",
    "RetainedChildren",
    "RunBindings",
    "RunCleanupError",
    "RunError",
    "RunOutcome",
    "RunShell",
    "RunUsageSummary",
    "SafeFailure",
    "Script",
    "ShellAction",
    "ShellChunk",
    "ShellCommand",
    "ShellEnvironment",
    "ShellInfo",
    "ShellListing",
    "ShellOutput",
    "ShellPage",
    "ShellRefusal",
    "ShellSignal",
    "ShellStatus",
    "ShellStream",
    "StateError",
    "StoredRef",
    "SuspendReason",
    "ToolRecoveryMode",
    "ToolRecoveryPlan",
    "boundary_of",
    "child_request_of",
    "decode_item",
    "decode_resume",
    "encode_item",
    "encode_resume",
    "host_child_tool",
    "inline_delegation_tool",
    "is_recovery_retryable",
    "is_unknown_result",
    "item_kind",
    "new_thread_id",
    "parse_approval_rules",
    "preflight_deferred_resume",
    "prepare_tool_recovery",
    "recovery_retryable",
    "scripted_model",
    "tool_call_approved",
)
