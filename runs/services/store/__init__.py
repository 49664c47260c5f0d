"""The bottom layer: what a run is built from and written to, importing no other services.

Leases, row inserts, the journal and checkpoints; the RQ queue; login sessions read outside their request; users'
saved views; policy versions, the tool registry, model providers and the agent a run builds from them; what a
what-if fork changes.
"""

from . import (
    access,
    budget_rules,
    bundle_format,
    checkpoints,
    journal,
    leases,
    policy,
    queueing,
    saved_views,
    start_limits,
    toolbox,
    what_if,
)
from .login_sessions import session_store, session_user_pk
from .policy import (
    POLICY_VERSION_FIELDS,
    approval_capability,
    approval_reason,
    expiry_for,
    parse_redact_patterns,
    publish_policy_version,
)
from .providers import DEMO_MODEL, PROVIDERS, ModelChoice, base_url_problem, model_problems, profile_key_variable
from .queueing import queue_reachable
from .start_limits import StartLimited
from .what_if import WhatIfChange, WhatIfRefused, parse_change

__all__ = (
    "DEMO_MODEL",
    "POLICY_VERSION_FIELDS",
    "PROVIDERS",
    "ModelChoice",
    "StartLimited",
    "WhatIfChange",
    "WhatIfRefused",
    "access",
    "approval_capability",
    "approval_reason",
    "base_url_problem",
    "budget_rules",
    "bundle_format",
    "checkpoints",
    "expiry_for",
    "journal",
    "leases",
    "model_problems",
    "parse_change",
    "parse_redact_patterns",
    "policy",
    "profile_key_variable",
    "publish_policy_version",
    "queue_reachable",
    "queueing",
    "saved_views",
    "session_store",
    "session_user_pk",
    "start_limits",
    "toolbox",
    "what_if",
)
