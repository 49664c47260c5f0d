"""Host policy applied to runs: a version's approval rules (the engine's `ApprovalRulesCapability`), expiry, versions.

A `HostPolicyVersion` row is immutable; everything here reads one version and turns it into values the
execution machinery hands to the agent (`approval_capability`); its redaction patterns are applied by
`runs.services.timeline.redaction`. Editing a policy never changes a version in place: `publish_policy_version`
writes the next one, so a Run keeps the rules it started with.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from runs.harness import ApprovalPolicy, ApprovalRule, ApprovalRulesCapability, parse_approval_rules
from runs.models import POLICY_VERSION_LIMITS, RETENTION_DAYS_LIMITS, HostPolicy, HostPolicyVersion

from .budget_rules import parse_budgets

TOOL_OWN_REASON = "The tool itself asks for approval."


def check_limits(values: Mapping[str, Any]) -> None:
    """Refuse numbers outside `POLICY_VERSION_LIMITS` with a readable `ValueError` (the table refuses them too)."""
    for name, (low, high) in POLICY_VERSION_LIMITS.items():
        if name in values and not (isinstance(values[name], int) and low <= values[name] <= high):
            raise ValueError(f"{name} must be a whole number from {low} to {high}, not {values[name]!r}.")
    days = values.get("retention_days")
    low, high = RETENTION_DAYS_LIMITS
    if days is not None and not (isinstance(days, int) and low <= days <= high):
        raise ValueError(
            f"retention_days must be blank (keep forever) or a whole number from {low} to {high}, not {days!r}."
        )


def parse_redact_patterns(value: Any) -> tuple[re.Pattern[str], ...]:
    """Compile the key regexes of `HostPolicyVersion.redact_patterns` (case-insensitive search)."""
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) and item for item in value):
        raise ValueError("Redaction patterns must be a list of non-empty regular expressions.")
    compiled = []
    for pattern in value:
        try:
            compiled.append(re.compile(pattern, re.IGNORECASE))
        except re.error as exc:
            raise ValueError(f"Invalid redaction pattern {pattern!r}: {exc}") from exc
    return tuple(compiled)


def approval_policy(version: HostPolicyVersion | None) -> ApprovalPolicy:
    return ApprovalPolicy(parse_approval_rules(version.approval_rules) if version is not None else ())


def approval_capability(
    version: HostPolicyVersion | None, *, also: Sequence[ApprovalRule] = ()
) -> ApprovalRulesCapability:
    """The version's rules as the engine applies them; `also`: rules of the run's own (a what-if fork's)."""
    policy = approval_policy(version)
    return ApprovalRulesCapability(policy=ApprovalPolicy((*policy.rules, *also)) if also else policy)


def approval_reason(
    version: HostPolicyVersion | None,
    tool_name: str,
    args: Mapping[str, Any] | None,
    *,
    also: Sequence[ApprovalRule] = (),
) -> str:
    """Why a deferred approval was asked for: the reason of the first rule matching this call (`also`: the run's
    own rules, after the policy's)."""
    rule = ApprovalPolicy((*approval_policy(version).rules, *also)).matching_rule(tool_name, args or {})
    return rule.reason_text if rule is not None else TOOL_OWN_REASON


def expiry_for(version: HostPolicyVersion | None, created_at: datetime) -> datetime | None:
    """When an unanswered request set is answered with denials; `None` when the policy never expires them."""
    seconds = version.approval_timeout_seconds if version is not None else 0
    return created_at + timedelta(seconds=seconds) if seconds and seconds > 0 else None


POLICY_VERSION_FIELDS: Sequence[str] = (
    "approval_rules",
    "tool_recovery",
    "max_attempts",
    "lease_seconds",
    "approval_timeout_seconds",
    "redact_patterns",
    "model_max_retries",
    "retention_days",
    "budgets",
)


def publish_policy_version(
    policy: HostPolicy, *, created_by: Any, comment: str = "", **values: Any
) -> HostPolicyVersion:
    """Write the next immutable version of `policy` and make it current.

    Fields not given are carried over from the current version. The policy row is locked so two admins
    saving at once get consecutive numbers instead of a unique-constraint error.
    """
    unknown = set(values) - set(POLICY_VERSION_FIELDS)
    if unknown:
        raise TypeError(f"Not policy version fields: {sorted(unknown)}")
    parse_approval_rules(values.get("approval_rules"))
    parse_budgets(values.get("budgets"))
    check_limits(values)
    if "redact_patterns" in values:
        parse_redact_patterns(values["redact_patterns"])
    with transaction.atomic():
        locked = HostPolicy.objects.select_for_update().get(pk=policy.pk)
        current = locked.current_version
        carried = {name: getattr(current, name) for name in POLICY_VERSION_FIELDS} if current else {}
        last = HostPolicyVersion.objects.filter(policy=locked).order_by("-number").first()
        version = HostPolicyVersion.objects.create(
            policy=locked,
            number=(last.number if last else 0) + 1,
            created_by=created_by,
            comment=comment,
            **{**carried, **values},
        )
        locked.current_version = version
        locked.save(update_fields=["current_version"])
    policy.current_version = version
    return version
