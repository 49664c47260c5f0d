"""An execution's life, above `timeline`: starting, resuming and forking work, Host-managed children, answering
deferred requests (approvals), cancelling, recovering failed executions, and moving executions between Hosts as
run bundles."""

from . import (
    approvals,
    bulk_operations,
    bundle_export,
    bundle_import,
    cancellation,
    executions,
    failed_recovery,
    forks,
    group_decisions,
    holds,
    remasking,
    starts,
    what_if,
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
    awaiting_approval,
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
from .failed_recovery import RecoveryRefused, recover_failed, start_recovery_run
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
    "RecoveryRefused",
    "SubmissionRejected",
    "answer_role",
    "answerable_requests",
    "approvals",
    "args_digest",
    "awaiting_approval",
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
    "failed_recovery",
    "forks",
    "group_decisions",
    "holds",
    "open_requests",
    "pending_requests",
    "pending_set",
    "recover_failed",
    "remasking",
    "set_hold",
    "start_recovery_run",
    "starts",
    "submit_decisions",
    "tool_parameters_schema",
    "what_if",
)
