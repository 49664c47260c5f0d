"""The harness engine: portable Thread state, runs and streams on pydantic-ai.

Pure library: no Django, Channels or RQ (enforced by import-linter).
"""

from .errors import DefinitionError, HarnessError, RunCleanupError, RunError, StateError
from .events import (
    AgentStreamEventProtocol,
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessRunResultEvent,
    HarnessStreamEvent,
    InlineDelegationPayload,
)
from .result import HarnessRunResult, RunUsageSummary, SafeFailure
from .state import AgentContextStateSnapshot, CapabilityState, EnvironmentState, HarnessState, StoredRef

__all__ = (
    "AgentContextStateSnapshot",
    "AgentStreamEventProtocol",
    "CapabilityState",
    "DefinitionError",
    "EnvironmentState",
    "HarnessError",
    "HarnessEvent",
    "HarnessExtensionEvent",
    "HarnessRunResult",
    "HarnessRunResultEvent",
    "HarnessState",
    "HarnessStreamEvent",
    "InlineDelegationPayload",
    "RunCleanupError",
    "RunError",
    "RunUsageSummary",
    "SafeFailure",
    "StateError",
    "StoredRef",
)
