"""`{% approval_form execution %}`: the approval form of an execution's open request set, for any page.

It renders a slot even when nothing waits, so approvals.js can load the form into it when the execution
suspends while the page is open."""

from typing import Any

from django import template

from runs.approval_views import approval_form_context
from runs.models import Execution

register = template.Library()


@register.inclusion_tag("runs/_approval_slot.html", takes_context=True)
def approval_form(context: template.Context, execution: Execution) -> dict[str, Any]:
    return {**approval_form_context(context["request"], execution), "csrf_token": context.get("csrf_token")}
