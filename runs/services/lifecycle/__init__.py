"""An execution's life, above `timeline`: starting, resuming and forking work, Host-managed children, answering
deferred requests (approvals), cancelling, and moving executions between Hosts as run bundles."""

from . import (
    approvals,
    bulk_operations,
    bundle_export,
    bundle_import,
    cancellation,
    executions,
    forks,
    group_decisions,
    holds,
    starts,
)
from .approvals import (
    ANSWER_REFUSED,
    CANCEL_MESSAGE,
    EXPIRY_MESSAGE,
    MAX_MESSAGE_CHARS,
    MAX_VALUE_BYTES,
    Answer,
    SubmissionRejected,
    answer_role,
    answerable_requests,
    args_digest,
    can_decide,
    expire_overdue_requests,
    open_requests,
    pending_requests,
    pending_set,
    submit_decisions,
    tool_parameters_schema,
)
from .cancellation import cancel_execution
from .children import MAX_CHILD_DEPTH
from .executions import create_thread, current_policy_version
from .holds import HoldRefused, set_hold
from .starts import MAX_KEY_LENGTH

__all__ = (
    "ANSWER_REFUSED",
    "CANCEL_MESSAGE",
    "EXPIRY_MESSAGE",
    "MAX_CHILD_DEPTH",
    "MAX_KEY_LENGTH",
    "MAX_MESSAGE_CHARS",
    "MAX_VALUE_BYTES",
    "Answer",
    "HoldRefused",
    "SubmissionRejected",
    "answer_role",
    "answerable_requests",
    "approvals",
    "args_digest",
    "bulk_operations",
    "bundle_export",
    "bundle_import",
    "can_decide",
    "cancel_execution",
    "cancellation",
    "create_thread",
    "current_policy_version",
    "executions",
    "expire_overdue_requests",
    "forks",
    "group_decisions",
    "holds",
    "open_requests",
    "pending_requests",
    "pending_set",
    "set_hold",
    "starts",
    "submit_decisions",
    "tool_parameters_schema",
)
