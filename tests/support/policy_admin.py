"""The admin's policy change form as a test posts it."""

from __future__ import annotations

from django.urls import reverse

from runs.models import HostPolicy


def policy_form(**overrides: str) -> dict[str, str]:
    values = {
        "name": "default",
        "approval_rules": "[]",
        "tool_recovery": "declared",
        "max_attempts": "3",
        "lease_seconds": "30",
        "approval_timeout_seconds": "0",
        "redact_patterns": "[]",
        "model_max_retries": "2",
        "budgets": "[]",
        "comment": "",
        # The read-only version history inline still posts its management form.
        "versions-TOTAL_FORMS": "0",
        "versions-INITIAL_FORMS": "0",
        "versions-MIN_NUM_FORMS": "0",
        "versions-MAX_NUM_FORMS": "1000",
    }
    return {**values, **overrides}


def change_url(policy: HostPolicy) -> str:
    return reverse("admin:runs_hostpolicy_change", args=[policy.pk])
