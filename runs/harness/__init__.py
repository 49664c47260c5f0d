"""The harness engine: portable Thread state, runs and streams on pydantic-ai.

Pure library: no Django, Channels or RQ (enforced by import-linter).
"""

from pydantic_ai import DeferredToolResults

from ._environment import SHELL_TOOL_NAMES, DynamicEnvironmentCapability
from ._local_shell import LocalShellEnvironment
from ._run_shell import SHELL_MOUNT, RunShell, ShellInfo, ShellListing, ShellOutput, ShellPage, ShellRefusal
from ._shell import (
    ShellAction,
    ShellChunk,
    ShellCommand,
    ShellEnvironment,
    ShellSignal,
    ShellStatus,
    ShellStream,
)
from .agent import AgentDefinition, ExecutableAgent
from .capability_state import AgentContextState
from .context import AgentContext, RunBindings
from .deferred import DeferredToolCall, DeferredToolRequests, DeferredToolResume
from .delegation import inline_delegation_tool
from .errors import DefinitionError, HarnessError, RunCleanupError, RunError, StateError
from .events import (
    AgentStreamEventProtocol,
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessRunResultEvent,
    HarnessStreamEvent,
    InlineDelegationPayload,
)
from .inputs import InputSource, InputTextEvent
from .interrupted import INTERRUPTED_TOOL_RESULT
from .recovery import ToolRecoveryMode
from .result import HarnessRunResult, RunUsageSummary, SafeFailure
from .state import AgentContextStateSnapshot, CapabilityState, EnvironmentState, HarnessState, StoredRef
from .stream import HarnessRunStream

__all__ = (
    "INTERRUPTED_TOOL_RESULT",
    "SHELL_MOUNT",
    "SHELL_TOOL_NAMES",
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
    "InlineDelegationPayload",
    "InputSource",
    "InputTextEvent",
    "LocalShellEnvironment",
    "RunBindings",
    "RunCleanupError",
    "RunError",
    "RunShell",
    "RunUsageSummary",
    "SafeFailure",
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
    "ToolRecoveryMode",
    "inline_delegation_tool",
)
