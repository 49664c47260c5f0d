"""Django admin (staff only): agent profiles, host policies with their version history, and read-only records.

A policy is edited through the fields of its current version; saving publishes a new immutable
`HostPolicyVersion` (runs keep the version they started with), so the history shows who changed what.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe

from runs.models import AgentProfile, Decision, HostPolicy, HostPolicyVersion, ToolRecovery
from runs.services import toolbox
from runs.services.policy import (
    POLICY_VERSION_FIELDS,
    parse_approval_rules,
    parse_redact_patterns,
    publish_policy_version,
)


class AgentProfileForm(forms.ModelForm):
    enabled_tools = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Tools of the host tool registry this profile's agent may call.",
    )

    class Meta:
        model = AgentProfile
        fields = ["name", "model", "instructions", "enabled_tools"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Read per form: the registry is code, but a profile saved earlier may name a tool since removed.
        names = set(toolbox.tool_names()) | set(self.instance.enabled_tools or [])
        self.fields["enabled_tools"].choices = [(name, name) for name in sorted(names)]

    def clean_enabled_tools(self) -> list[str]:
        chosen = self.cleaned_data["enabled_tools"]
        unknown = sorted(set(chosen) - set(toolbox.tool_names()))
        if unknown:
            raise forms.ValidationError(f"Not in the host tool registry: {', '.join(unknown)}")
        return list(chosen)


@admin.register(AgentProfile)
class AgentProfileAdmin(admin.ModelAdmin):
    form = AgentProfileForm
    list_display = ["name", "model", "tools", "updated_at"]
    search_fields = ["name", "model"]

    @admin.display(description="enabled tools")
    def tools(self, profile: AgentProfile) -> str:
        return ", ".join(profile.enabled_tools or []) or "—"


def _default(name: str) -> Any:
    default = HostPolicyVersion._meta.get_field(name).default
    return default() if callable(default) else default


class HostPolicyForm(forms.ModelForm):
    """The policy's name plus the fields of the version that saving will publish."""

    approval_rules = forms.JSONField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "cols": 90, "class": "mono"}),
        help_text=(
            'JSON list of rules: {"tool": "name or glob like delete_*", "reason": "shown to the approver"} and '
            'optionally "when": {"arg": "amount", "op": "eq|ne|gt|lt|contains", "value": 1000}. '
            "A call matching a rule suspends the run until someone approves it."
        ),
    )
    tool_recovery = forms.ChoiceField(
        choices=ToolRecovery.choices, help_text="What a recovery run does with a tool call whose outcome is unknown."
    )
    max_attempts = forms.IntegerField(min_value=1, help_text="Runs per execution before recovery gives up.")
    lease_seconds = forms.IntegerField(min_value=5, help_text="A worker's lease; an expired lease means it died.")
    approval_timeout_seconds = forms.IntegerField(
        min_value=0, help_text="Unanswered requests are denied by the host after this long; 0 = never."
    )
    redact_patterns = forms.JSONField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 90, "class": "mono"}),
        help_text='JSON list of key regexes (case-insensitive), e.g. ["pass(word)?", "token", "secret"]: values '
        "under matching keys are masked in the timeline.",
    )
    comment = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2, "cols": 90}), help_text="Why this change."
    )

    class Meta:
        model = HostPolicy
        fields = ["name"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        current = self.instance.current_version if self.instance.pk else None
        for name in POLICY_VERSION_FIELDS:
            self.fields[name].initial = getattr(current, name) if current else _default(name)
        rules = self.fields["approval_rules"]
        rules.help_text = f"{rules.help_text} Host tools: {', '.join(toolbox.tool_names())}."

    def clean_approval_rules(self) -> list[Any]:
        rules = self.cleaned_data["approval_rules"] or []
        try:
            parse_approval_rules(rules)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc
        return rules

    def clean_redact_patterns(self) -> list[str]:
        patterns = self.cleaned_data["redact_patterns"] or []
        try:
            parse_redact_patterns(patterns)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc
        return patterns

    def version_values(self) -> dict[str, Any]:
        return {name: self.cleaned_data[name] for name in POLICY_VERSION_FIELDS}


class HostPolicyVersionInline(admin.TabularInline):
    model = HostPolicyVersion
    fk_name = "policy"
    extra = 0
    ordering = ["-number"]
    can_delete = False
    fields = ["number", "created_at", "created_by", "comment", "changes"]
    readonly_fields = fields
    verbose_name_plural = "version history (newest first)"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="what changed")
    def changes(self, version: HostPolicyVersion) -> str:
        return version_changes(version)


def version_changes(version: HostPolicyVersion) -> str:
    """The fields that differ from the previous version, as `field: old → new` lines."""
    previous = (
        HostPolicyVersion.objects.filter(policy_id=version.policy_id, number__lt=version.number)
        .order_by("-number")
        .first()
    )
    if previous is None:
        return mark_safe("<em>first version</em>")
    changed = [
        (name, getattr(previous, name), getattr(version, name))
        for name in POLICY_VERSION_FIELDS
        if getattr(previous, name) != getattr(version, name)
    ]
    if not changed:
        return mark_safe("<em>no field changed</em>")
    return format_html_join(mark_safe("<br>"), "<code>{}</code>: {} → {}", changed)


@admin.register(HostPolicy)
class HostPolicyAdmin(admin.ModelAdmin):
    form = HostPolicyForm
    list_display = ["name", "current", "changed_by", "changed_at"]
    inlines = [HostPolicyVersionInline]
    fieldsets = [
        (None, {"fields": ["name"]}),
        ("Approvals", {"fields": ["approval_rules", "approval_timeout_seconds"]}),
        ("Recovery", {"fields": ["tool_recovery", "max_attempts", "lease_seconds"]}),
        ("Timeline", {"fields": ["redact_patterns"]}),
        ("This change", {"fields": ["comment"]}),
    ]

    @admin.display(description="current version")
    def current(self, policy: HostPolicy) -> str:
        return f"v{policy.current_version.number}" if policy.current_version else "—"

    @admin.display(description="changed by")
    def changed_by(self, policy: HostPolicy) -> str:
        version = policy.current_version
        return str(version.created_by) if version and version.created_by else "—"

    @admin.display(description="changed at")
    def changed_at(self, policy: HostPolicy) -> Any:
        return policy.current_version.created_at if policy.current_version else None

    def save_model(self, request: HttpRequest, obj: HostPolicy, form: HostPolicyForm, change: bool) -> None:
        super().save_model(request, obj, form, change)
        values = form.version_values()
        current = obj.current_version
        if current is None or any(getattr(current, name) != value for name, value in values.items()):
            publish_policy_version(obj, created_by=request.user, comment=form.cleaned_data["comment"], **values)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Executions and runs point at its versions; a policy is changed, never removed.
        return False


class RecordAdmin(admin.ModelAdmin):
    """Records that are written once by the Host and only ever read in the admin."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(HostPolicyVersion)
class HostPolicyVersionAdmin(RecordAdmin):
    """Versions are immutable: listed and shown, never added, edited or deleted here."""

    list_display = ["__str__", "created_at", "created_by", "comment", "tool_recovery", "approval_timeout_seconds"]
    list_filter = ["policy", "created_by"]
    readonly_fields = [field.name for field in HostPolicyVersion._meta.fields] + ["changes"]

    @admin.display(description="what changed")
    def changes(self, version: HostPolicyVersion) -> str:
        return version_changes(version)


@admin.register(Decision)
class DecisionAdmin(RecordAdmin):
    """The record of answers, for staff; answering happens on the execution page."""

    list_display = ["decided_at", "decided_by", "verdict", "request", "args_digest"]
    list_filter = ["verdict", "decided_by"]
    readonly_fields = [field.name for field in Decision._meta.fields]
