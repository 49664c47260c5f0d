"""The harness engine: portable Thread state, runs and streams on pydantic-ai.

Pure library: no Django, Channels or RQ (enforced by import-linter).
"""

from pydantic_ai import DeferredToolResults

from ._agent import AgentDefinition, ExecutableAgent
from ._capability_state import AgentContextState
from ._context import AgentContext, RunBindings
from ._deferred import DeferredToolCall, DeferredToolRequests, DeferredToolResume
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
from ._interrupted import INTERRUPTED_TOOL_RESULT
from ._local_shell import LocalShellEnvironment
from ._recovery import ToolRecoveryMode, tool_call_approved
from ._result import HarnessRunResult, RunStatus, RunUsageSummary, SafeFailure, SuspendReason
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
from ._tools import RECOVERY_RETRY_SAFE_METADATA_KEY, is_recovery_retryable, recovery_retryable

__all__ = (
    "INTERRUPTED_TOOL_RESULT",
    "RECOVERY_RETRY_SAFE_METADATA_KEY",
    "SHELL_MOUNT",
    "SHELL_TOOL_NAMES",
    "THREAD_ID_PATTERN",
    "AgentContext",
    "AgentContextState",
    "AgentContextStateSnapshot",
    "AgentDefinition",
    "AgentStreamEventProtocol",
    "CapabilityState",
    "DeferredToolCall",
    "DeferredToolRequests",
    "DeferredToolResults",
    "DeferredToolResume",
    "DefinitionError",
    "DynamicEnvironmentCapability",
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
    "RunBindings",
    "RunCleanupError",
    "RunError",
    "RunShell",
    "RunStatus",
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
    "inline_delegation_tool",
    "is_recovery_retryable",
    "new_thread_id",
    "recovery_retryable",
    "scripted_model",
    "tool_call_approved",
)
