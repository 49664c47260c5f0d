"""`{{ value|redact:policy_version }}` and `|redacted_json:policy_version`: a record's text or JSON as pages show it.

Outputs, failures and decisions are stored with their real values; pages pass them through the redaction of
the run's frozen policy version (runs.services.timeline.redaction) on the way out. An execution's input is masked
once, when it starts: pages show its stored `shown_input`.
"""

from __future__ import annotations

from typing import Any

from django import template

from runs.models import HostPolicyVersion
from runs.services.timeline import redactor_for

register = template.Library()


@register.filter
def redact(value: Any, version: HostPolicyVersion | None) -> str:
    return redactor_for(version).text("" if value is None else str(value))


@register.filter
def redacted_json(value: Any, version: HostPolicyVersion | None) -> str:
    return redactor_for(version).pretty_json(value)
