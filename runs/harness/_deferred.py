"""Structured suspension on deferred tools, and the checked resume of a suspended run.

A suspended run hands the Host a `PendingDeferredCalls`: every pending approval and external call, each with
the call as it stands in history (`model_call`), the call actually dispatched (`target_call`, the same call
unless a forwarding tool dispatched it) and the permission identity of the tool it targets. Answers are native
pydantic-ai `DeferredToolResults`, keyed by target call id. `DeferredToolResume` pairs the two for the next
run, and `preflight_deferred_resume` checks the pair against the previous state before any model or tool
work, so a bad resume fails with a stable code and changes nothing.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, get_args
from urllib.parse import quote

import pydantic_core
from pydantic_ai import DeferredToolRequests as NativeDeferredToolRequests
from pydantic_ai import DeferredToolResults as NativeDeferredToolResults
from pydantic_ai import (
    ModelMessage,
    ModelResponse,
    ModelRetry,
    RetryPromptPart,
    ToolApproved,
    ToolCallPart,
    ToolDefinition,
    ToolDenied,
    ToolFailed,
    ToolReturn,
)
from pydantic_ai.tools import RunContext, ToolDefinitionKind

from ._children import child_request_of
from ._errors import DefinitionError, RunError
from ._interrupted import answered_call_ids, latest_response_index

if TYPE_CHECKING:
    from ._state import HarnessState

__all__ = (
    "DEFERRED_UNAVAILABLE_MESSAGE",
    "MAX_DEFERRED_METADATA_BYTES",
    "MAX_DEFERRED_REQUESTS",
    "DeferredItemKind",
    "DeferredToolCall",
    "DeferredToolResume",
    "PendingDeferredCalls",
    "check_resume_surface",
    "last_response_index",
    "preflight_deferred_resume",
    "refuse_deferred_requests",
    "tool_identity",
    "validate_deferred_requests",
)

MAX_DEFERRED_REQUESTS: Final = 128
MAX_DEFERRED_METADATA_BYTES: Final = 64 * 1024
# pydantic-ai's three kinds, and the Host-managed child: an external call the Host answers with a child's outcome.
DeferredItemKind = Literal["approval", "question", "external", "child"]
DEFERRED_UNAVAILABLE_MESSAGE: Final = "Deferred interaction unavailable: this run cannot wait for approval or input."


def tool_identity(tool_def: ToolDefinition) -> str:
    """The permission identity of a prepared tool: its source toolset and its name, URL-quoted."""
    source = tool_def.toolset_id or "native"
    return f"tool/{quote(source, safe='')}/{quote(tool_def.name, safe='')}"


@dataclass(frozen=True)
class DeferredToolCall:
    """One pending deferred item: the call in history and the call actually dispatched.

    `target_identity` and `target_kind` are what the suspended run knew of the target tool; the resuming run
    refuses an item whose tool changed either. A Host that builds requests itself may leave both out: no
    attestation of the tool is required, and the item is then checked only against the current tool surface.
    """

    model_call: ToolCallPart
    target_call: ToolCallPart
    target_identity: str | None = None
    target_kind: ToolDefinitionKind | None = None

    @property
    def forwarded(self) -> bool:
        """Whether a forwarding tool dispatched the target under a call id of its own."""
        return self.model_call.tool_call_id != self.target_call.tool_call_id


@dataclass(kw_only=True)
class PendingDeferredCalls:
    """The exact pending requests of a suspended run; `metadata` is keyed by target call id.

    Three categories wait for three kinds of answer: `approvals` for a verdict, and among `calls` the
    structured `questions` (target call ids of tools that deferred with `CallDeferred(kind="question")`) for
    the user's answer, the `children` (calls of a `host_child_tool`) for a Host-managed child's outcome, the
    rest for an external result.
    """

    calls: list[DeferredToolCall] = field(default_factory=list[DeferredToolCall])
    approvals: list[DeferredToolCall] = field(default_factory=list[DeferredToolCall])
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    questions: list[str] = field(default_factory=list[str])
    children: list[str] = field(default_factory=list[str])

    @classmethod
    def export(
        cls,
        native_requests: NativeDeferredToolRequests,
        *,
        definitions: Mapping[str, ToolDefinition] | None = None,
    ) -> PendingDeferredCalls:
        """Build the structured requests from pydantic-ai's output of a suspended run.

        `definitions` is the tool surface the run prepared last (by tool name); it gives each target its
        permission identity. A call whose tool is not on it gets the identity of a native tool of that name.
        """
        definitions = definitions or {}

        def entry(call: ToolCallPart) -> DeferredToolCall:
            tool_def = definitions.get(call.tool_name)
            identity = tool_identity(tool_def or ToolDefinition(name=call.tool_name))
            kind = tool_def.kind if tool_def is not None else None
            return DeferredToolCall(deepcopy(call), deepcopy(call), identity, kind)

        return cls(
            calls=[entry(call) for call in native_requests.calls],
            approvals=[entry(call) for call in native_requests.approvals],
            metadata=deepcopy(native_requests.metadata),
            questions=[
                call.tool_call_id
                for call in native_requests.calls
                if native_requests.kind(call.tool_call_id) == "question"
            ],
            children=[
                call.tool_call_id
                for call in native_requests.calls
                if child_request_of(native_requests.metadata.get(call.tool_call_id)) is not None
            ],
        )

    def kind(self, tool_call_id: str) -> DeferredItemKind:
        """What the pending item with this target call id waits for: approval, question, child or external
        result."""
        if any(entry.target_call.tool_call_id == tool_call_id for entry in self.approvals):
            return "approval"
        if not any(entry.target_call.tool_call_id == tool_call_id for entry in self.calls):
            raise ValueError(f"no pending deferred item has the target call id {tool_call_id!r}")
        if tool_call_id in self.children:
            return "child"
        return "question" if tool_call_id in self.questions else "external"

    def target_requests(self) -> NativeDeferredToolRequests:
        """The native requests over the target calls, whose ids key the results."""
        return NativeDeferredToolRequests(
            calls=[deepcopy(entry.target_call) for entry in self.calls],
            approvals=[deepcopy(entry.target_call) for entry in self.approvals],
            metadata=deepcopy(self.metadata),
            _kinds=dict.fromkeys(self.questions, "question"),
        )

    def build_results(
        self,
        *,
        approvals: Mapping[str, bool | ToolApproved | ToolDenied] | None = None,
        calls: dict[str, Any] | None = None,
        metadata: dict[str, dict[str, Any]] | None = None,
        approve_all: bool = False,
    ) -> NativeDeferredToolResults:
        """Answer the requests with pydantic-ai's category-checked `build_results` (keys: target call ids).

        `approve_all` fills only missing approvals; external calls still need `calls`.
        """
        return self.target_requests().build_results(
            approvals=approvals, calls=calls, metadata=metadata, approve_all=approve_all
        )

    def entries(self) -> list[DeferredToolCall]:
        return [*self.calls, *self.approvals]


@dataclass(frozen=True)
class DeferredToolResume:
    """A suspended run's requests with the Host's answers, for the next run's `deferred_resume`.

    `recovery=True` marks a retained batch that was accepted before an interruption: it is reconciled with
    the checkpoint's history and merged into tool recovery instead of being replayed verbatim.
    """

    requests: PendingDeferredCalls
    results: NativeDeferredToolResults
    recovery: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.requests, PendingDeferredCalls):
            raise TypeError("requests must be a runs.harness PendingDeferredCalls")
        if not isinstance(self.results, NativeDeferredToolResults):
            raise TypeError("results must be a pydantic-ai DeferredToolResults")
        if not isinstance(self.recovery, bool):
            raise TypeError("recovery must be a bool")
        # Detached from the caller's objects, so later edits to them cannot change an accepted batch.
        object.__setattr__(self, "requests", deepcopy(self.requests))
        object.__setattr__(self, "results", deepcopy(self.results))

    def remaining(self, messages: Sequence[ModelMessage]) -> DeferredToolResume | None:
        """The part of this batch that `messages` has not incorporated yet, or `None`.

        Only calls of the last response that have no result after it remain; a newer response supersedes
        the whole batch.
        """
        index = last_response_index(messages)
        response = messages[index]
        assert isinstance(response, ModelResponse)
        open_ids = {call.tool_call_id for call in response.tool_calls} - answered_call_ids(messages[index + 1 :])
        calls = [entry for entry in self.requests.calls if entry.model_call.tool_call_id in open_ids]
        approvals = [entry for entry in self.requests.approvals if entry.model_call.tool_call_id in open_ids]
        if not calls and not approvals:
            return None
        kept = {entry.target_call.tool_call_id for entry in (*calls, *approvals)}
        requests = PendingDeferredCalls(
            calls=calls,
            approvals=approvals,
            metadata=_only(self.requests.metadata, kept),
            questions=[tool_call_id for tool_call_id in self.requests.questions if tool_call_id in kept],
            children=[tool_call_id for tool_call_id in self.requests.children if tool_call_id in kept],
        )
        results = NativeDeferredToolResults(
            calls=_only(self.results.calls, kept),
            approvals=_only(self.results.approvals, kept),
            metadata=_only(self.results.metadata, kept),
            answered_by=_only(self.results.answered_by, kept),
        )
        return DeferredToolResume(requests, results, recovery=self.recovery)

    def model_results(self) -> NativeDeferredToolResults:
        """The results re-keyed from target call ids to the model call ids of the history.

        A forwarded approval becomes a plain `ToolApproved()` on the forwarding call: the override belongs
        to the target, which the forwarder re-dispatches.
        """
        model_ids = {entry.target_call.tool_call_id: entry.model_call.tool_call_id for entry in self.requests.entries()}
        forwarded = {entry.target_call.tool_call_id for entry in self.requests.entries() if entry.forwarded}

        def rekey(values: Mapping[str, Any]) -> dict[str, Any]:
            return {model_ids.get(key, key): deepcopy(value) for key, value in values.items()}

        approvals = rekey(self.results.approvals)
        for target_id in forwarded:
            model_id = model_ids[target_id]
            if isinstance(approvals.get(model_id), ToolApproved):
                approvals[model_id] = ToolApproved()
        return NativeDeferredToolResults(
            calls=rekey(self.results.calls),
            approvals=approvals,
            metadata=rekey(self.results.metadata),
            answered_by=rekey(self.results.answered_by),
        )


def refuse_deferred_requests(ctx: RunContext[Any], requests: NativeDeferredToolRequests) -> NativeDeferredToolResults:
    """Answer every deferred item at once, for runs whose bindings cannot suspend (e.g. inline children).

    The model sees the refusal as the call's result and carries on. pydantic-ai records a denial only for
    approvals (a `ToolDenied` among external results would become the call's return value), so external
    calls and questions fail with the same message instead.
    """
    return requests.build_results(
        approvals={call.tool_call_id: ToolDenied(DEFERRED_UNAVAILABLE_MESSAGE) for call in requests.approvals},
        calls={call.tool_call_id: ToolFailed(DEFERRED_UNAVAILABLE_MESSAGE) for call in requests.calls},
    )


def preflight_deferred_resume(
    deferred_resume: object, previous_state: HarnessState | None
) -> DeferredToolResume | None:
    """Check a deferred resume before any model or tool work; return the batch the run must apply.

    Raises `RunError` with a stable code on the first failed check and changes nothing. For a recovery batch
    the result is what history has not incorporated yet; `None` means nothing is left and the run proceeds
    as plain tool recovery.
    """
    if deferred_resume is None:
        return None
    if not isinstance(deferred_resume, DeferredToolResume):
        raise RunError("deferred_resume must be a DeferredToolResume", code="deferred_resume_invalid")
    if previous_state is None:
        raise RunError("a deferred resume needs the previous state", code="deferred_state_required")
    validate_deferred_requests(deferred_resume.requests)
    _validate_results(deferred_resume.requests, deferred_resume.results)
    history = previous_state.message_history
    resume = deferred_resume.remaining(history) if deferred_resume.recovery else deferred_resume
    if resume is None:
        return None
    _validate_against_history(resume.requests, history, every_open_call=not deferred_resume.recovery)
    return resume


def validate_deferred_requests(requests: PendingDeferredCalls) -> None:
    """Check the shape of a request batch (ids, categories, size, identities, arguments, metadata)."""
    entries = requests.entries()
    if not entries:
        raise RunError("the deferred requests are empty", code="deferred_requests_empty")
    if len(entries) > MAX_DEFERRED_REQUESTS:
        raise RunError(
            f"more than {MAX_DEFERRED_REQUESTS} deferred requests",
            code="deferred_requests_too_large",
            details={"count": len(entries)},
        )
    for entry in entries:
        _validate_entry(entry)
    call_targets = [entry.target_call.tool_call_id for entry in requests.calls]
    approval_targets = [entry.target_call.tool_call_id for entry in requests.approvals]
    if overlap := set(call_targets) & set(approval_targets):
        raise RunError(
            "a deferred request is both an external call and an approval",
            code="deferred_request_category_overlap",
            details={"tool_call_ids": sorted(overlap)},
        )
    model_ids = [entry.model_call.tool_call_id for entry in entries]
    forwarded_targets = {entry.target_call.tool_call_id for entry in entries if entry.forwarded}
    for ids in (call_targets, approval_targets, model_ids):
        if duplicates := _duplicates(ids):
            raise RunError(
                "deferred request ids must be unique",
                code="deferred_request_duplicate",
                details={"tool_call_ids": duplicates},
            )
    if collisions := forwarded_targets & set(model_ids):
        raise RunError(
            "a forwarded target call id collides with a model call id",
            code="deferred_request_duplicate",
            details={"tool_call_ids": sorted(collisions)},
        )
    if not isinstance(requests.questions, list) or not set(requests.questions) <= set(call_targets):
        raise RunError(
            "a deferred question must be one of the external calls",
            code="deferred_request_invalid",
            details={"tool_call_ids": sorted(set(requests.questions) - set(call_targets))},
        )
    external = set(call_targets) - set(requests.questions)
    if not isinstance(requests.children, list) or not set(requests.children) <= external:
        raise RunError(
            "a Host-managed child must be one of the external calls, and not a question",
            code="deferred_request_invalid",
            details={"tool_call_ids": sorted(set(requests.children) - external)},
        )
    _validate_metadata(requests.metadata, {*call_targets, *approval_targets}, "request")


def check_resume_surface(
    requests: PendingDeferredCalls,
    results: NativeDeferredToolResults,
    definitions: Mapping[str, ToolDefinition],
) -> None:
    """Check pending items against the freshly prepared tool surface of the resuming run.

    Each target tool must still exist with the same identity, and an approval must still target a tool the
    run executes itself (not an external one). An absent external target answered with `ToolFailed` is
    allowed. This surface has no forwarding tools, so a forwarded item cannot be re-dispatched.
    """
    for category, entries in (("call", requests.calls), ("approval", requests.approvals)):
        for entry in entries:
            target = entry.target_call
            tool_def = definitions.get(target.tool_name)
            if entry.forwarded:
                problem = "its forwarding tool is not on the current surface"
            elif tool_def is None:
                if category == "call" and isinstance(results.calls.get(target.tool_call_id), ToolFailed):
                    continue
                problem = "its tool is no longer available"
            elif entry.target_identity is not None and tool_identity(tool_def) != entry.target_identity:
                problem = "its tool identity changed"
            elif entry.target_kind is not None and tool_def.kind != entry.target_kind:
                problem = f"its tool changed from kind {entry.target_kind!r} to {tool_def.kind!r}"
            elif category == "approval" and tool_def.kind not in ("function", "unapproved"):
                problem = f"an approval now targets a tool of kind {tool_def.kind!r}"
            elif category == "call" and tool_def.kind not in ("external", "function"):
                problem = f"an external call now targets a tool of kind {tool_def.kind!r}"
            else:
                continue
            raise DefinitionError(
                f"deferred request {target.tool_call_id!r} does not fit the current tools: {problem}",
                code="deferred_surface_mismatch",
                details={"tool_call_id": target.tool_call_id, "tool_name": target.tool_name},
            )


def last_response_index(messages: Sequence[ModelMessage]) -> int:
    """Index of the last `ModelResponse`; `RunError(deferred_request_missing)` when there is none."""
    index = latest_response_index(messages)
    if index is None:
        raise RunError("the history has no model response to resume", code="deferred_request_missing")
    return index


def _validate_entry(entry: object) -> None:
    if not (
        isinstance(entry, DeferredToolCall)
        and isinstance(entry.model_call, ToolCallPart)
        and isinstance(entry.target_call, ToolCallPart)
    ):
        raise RunError("a deferred request entry is malformed", code="deferred_request_invalid")
    model_call, target_call = entry.model_call, entry.target_call
    details = {"tool_call_id": model_call.tool_call_id}
    if entry.target_identity is not None and (
        not isinstance(entry.target_identity, str) or not entry.target_identity.strip()
    ):
        raise RunError("a deferred target identity is blank", code="deferred_request_invalid", details=details)
    if entry.target_kind is not None and entry.target_kind not in get_args(ToolDefinitionKind):
        raise RunError("a deferred request's target kind is unknown", code="deferred_request_invalid", details=details)
    for call in (model_call, target_call):
        if not call.tool_call_id.strip() or not call.tool_name.strip():
            raise RunError("deferred request ids must not be blank", code="deferred_request_invalid", details=details)
    model_args = _call_args(model_call)
    target_args = _call_args(target_call)
    if not entry.forwarded and (model_call.tool_name != target_call.tool_name or model_args != target_args):
        raise RunError(
            "a direct deferred request has differing model and target calls",
            code="deferred_request_invalid",
            details=details,
        )


def _call_args(call: ToolCallPart) -> dict[str, Any]:
    try:
        args = call.args_as_dict(raise_if_invalid=True)
    except (ValueError, AssertionError) as exc:
        raise RunError(
            "deferred request arguments are not valid JSON",
            code="deferred_request_invalid",
            details={"tool_call_id": call.tool_call_id},
        ) from exc
    if _json_size(args) is None:
        raise RunError(
            "deferred request arguments must be finite JSON",
            code="deferred_request_invalid",
            details={"tool_call_id": call.tool_call_id},
        )
    return args


def _validate_results(requests: PendingDeferredCalls, results: NativeDeferredToolResults) -> None:
    call_ids = {entry.target_call.tool_call_id for entry in requests.calls}
    approval_ids = {entry.target_call.tool_call_id for entry in requests.approvals}
    if set(results.calls) != call_ids or set(results.approvals) != approval_ids:
        answered = {*results.calls, *results.approvals}
        pending = call_ids | approval_ids
        raise RunError(
            "every pending deferred item must be answered exactly once, in its own category",
            code="deferred_results_incomplete",
            details={
                "missing": sorted((call_ids - set(results.calls)) | (approval_ids - set(results.approvals))),
                "unexpected": sorted(answered - pending),
                "wrong_category": sorted((set(results.calls) & approval_ids) | (set(results.approvals) & call_ids)),
            },
        )
    for tool_call_id, approval in results.approvals.items():
        details = {"tool_call_id": tool_call_id}
        if type(approval) is bool:
            continue
        if isinstance(approval, ToolDenied) and isinstance(approval.message, str):
            continue
        if isinstance(approval, ToolApproved):
            if approval.override_args is not None and (
                not isinstance(approval.override_args, dict) or _json_size(approval.override_args) is None
            ):
                raise RunError("override_args must be a JSON object", code="deferred_results_invalid", details=details)
            continue
        raise RunError(
            "an approval must be a bool, ToolApproved or ToolDenied",
            code="deferred_approval_invalid",
            details=details,
        )
    for tool_call_id, value in results.calls.items():
        if not _valid_call_result(value):
            raise RunError(
                "an external call result must be finite JSON, ToolReturn, ToolFailed or ModelRetry",
                code="deferred_results_invalid",
                details={"tool_call_id": tool_call_id},
            )
    _validate_metadata(results.metadata, call_ids | approval_ids, "results")


def _valid_call_result(value: Any) -> bool:
    if isinstance(value, ToolFailed | ModelRetry):
        return isinstance(value.message, str)
    if isinstance(value, RetryPromptPart):
        return True
    if isinstance(value, ToolApproved | ToolDenied):
        return False
    if isinstance(value, ToolReturn):
        return _json_size(value.return_value) is not None and _json_size(value.metadata) is not None
    return _json_size(value) is not None


def _validate_metadata(metadata: object, pending_ids: set[str], source: str) -> None:
    if not isinstance(metadata, dict):
        raise RunError(f"{source} metadata must be a mapping", code="deferred_metadata_invalid")
    if unknown := set(metadata) - pending_ids:
        raise RunError(
            f"{source} metadata is keyed by ids that are not pending",
            code="deferred_metadata_invalid",
            details={"tool_call_ids": sorted(map(str, unknown))},
        )
    if not all(isinstance(value, dict) for value in metadata.values()):
        raise RunError(f"{source} metadata values must be JSON objects", code="deferred_metadata_invalid")
    size = _json_size(metadata)
    if size is None or size > MAX_DEFERRED_METADATA_BYTES:
        raise RunError(
            f"{source} metadata must be finite JSON of at most {MAX_DEFERRED_METADATA_BYTES} bytes",
            code="deferred_metadata_invalid",
        )


def _validate_against_history(
    requests: PendingDeferredCalls, history: Sequence[ModelMessage], *, every_open_call: bool
) -> None:
    """Each request is an open call of the last response, as recorded; with `every_open_call`, each open call
    of that response is requested too (pydantic-ai cannot continue a response with an unanswered call)."""
    index = last_response_index(history)
    response = history[index]
    assert isinstance(response, ModelResponse)
    response_calls = response.tool_calls
    if duplicates := _duplicates([call.tool_call_id for call in response_calls]):
        raise RunError(
            "the last response repeats tool call ids",
            code="deferred_request_duplicate",
            details={"tool_call_ids": duplicates},
        )
    by_id = {call.tool_call_id: call for call in response_calls}
    answered = answered_call_ids(history[index + 1 :])
    for entry in requests.entries():
        model_call = entry.model_call
        details = {"tool_call_id": model_call.tool_call_id}
        recorded = by_id.get(model_call.tool_call_id)
        if recorded is None:
            raise RunError(
                "a deferred request is not a call of the last response",
                code="deferred_request_missing",
                details=details,
            )
        if model_call.tool_call_id in answered:
            raise RunError(
                "a deferred request was already answered", code="deferred_request_completed", details=details
            )
        if recorded.tool_name != model_call.tool_name or _call_args(recorded) != _call_args(model_call):
            raise RunError(
                "a deferred request differs from the call in history",
                code="deferred_request_mismatch",
                details=details,
            )
    requested = {entry.model_call.tool_call_id for entry in requests.entries()}
    if every_open_call and (unanswered := sorted(set(by_id) - answered - requested)):
        raise RunError(
            f"every open call of the last response needs an answer; not answered: {', '.join(unanswered)}",
            code="deferred_results_incomplete",
            details={"missing": unanswered},
        )


def _json_size(value: Any) -> int | None:
    """Size of `value` as strict, finite JSON, or `None` when it is not representable."""
    try:
        return len(json.dumps(pydantic_core.to_jsonable_python(value), allow_nan=False))
    except (ValueError, TypeError, pydantic_core.PydanticSerializationError):
        return None


def _duplicates(ids: Iterable[str]) -> list[str]:
    return sorted(tool_call_id for tool_call_id, count in Counter(ids).items() if count > 1)


def _only(values: Mapping[str, Any], keys: set[str]) -> dict[str, Any]:
    return {key: deepcopy(value) for key, value in values.items() if key in keys}
