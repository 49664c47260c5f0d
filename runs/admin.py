"""Django admin (staff only): teams, agent profiles, host policies with their version history, and read-only records;
django-axes' failed-login records with a permission on their clean-up.

A superuser sees every team's rows. Anyone else sees and edits only those of the teams they administer (role admin,
`TeamScopedAdmin`), with permissions answered per object by `role_permissions.TeamRoleBackend`; teams and their
members are a superuser's.

A policy is edited through the fields of its current version; saving publishes a new immutable
`HostPolicyVersion` (runs keep the version they started with), so the history shows who changed what.
"""

from __future__ import annotations

import json
from typing import Any

from axes import admin as axes_admin
from axes.models import AccessAttempt
from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_permission_codename, get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import Field, ForeignKey, Model, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.shortcuts import redirect, render
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from runs.forms import AgentProfileForm
from runs.harness import ApprovalRule, parse_approval_rules
from runs.models import (
    POLICY_VERSION_LIMITS,
    RETENTION_DAYS_LIMITS,
    AgentProfile,
    BundleTransfer,
    Decision,
    DeferredRequest,
    Execution,
    ExecutionTombstone,
    HostPolicy,
    HostPolicyVersion,
    Membership,
    ModelPrice,
    Remask,
    Team,
    TeamRole,
    Thread,
    ToolRecovery,
)
from runs.policy_rows import BudgetRowsWidget, PatternRowsWidget, RowsField, RuleRowsWidget
from runs.services.lifecycle import HoldRefused, bundle_import, current_policy_version, remasking, set_hold
from runs.services.recovery import estimate
from runs.services.reports import dry_run, effective_approvals, problems_of_rule
from runs.services.store import (
    POLICY_VERSION_FIELDS,
    ModelChoice,
    access,
    budget_rules,
    model_problems,
    parse_redact_patterns,
    publish_policy_version,
    toolbox,
)
from runs.services.store.bundle_format import BundleError
from runs.services.timeline import redactor_for


class TeamForm(forms.ModelForm):
    class Meta:
        model = Team
        fields = ["name"]

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        # A team's policy takes the team's name (`current_policy_version`), and policy names are unique.
        clash = HostPolicy.objects.filter(name=name).exclude(team_id=self.instance.pk).select_related("team").first()
        if clash is not None:
            raise forms.ValidationError(
                f"A host policy named {name!r} already exists (of team {clash.team}), and a new team's policy is "
                "named after the team: choose another team name, or rename that policy first."
            )
        return name


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    """Teams and their members, a superuser's: a team admin administers profiles and policies, not memberships."""

    form = TeamForm
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]

    def save_model(self, request: HttpRequest, obj: Team, form: TeamForm, change: bool) -> None:
        super().save_model(request, obj, form, change)
        # Its policy, with safe defaults, so the team's admins find it to edit.
        current_policy_version(obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Profiles, policies and threads point at their team (PROTECT); a team is renamed, never removed here.
        return False


class TeamScopedAdmin(admin.ModelAdmin):
    """Rows of the teams the user administers (every row for a superuser); permissions asked per object, so the
    role in the object's team decides; a team field offers only those teams."""

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return access.scoped(super().get_queryset(request), request.user, TeamRole.ADMIN)

    def formfield_for_foreignkey(self, db_field: ForeignKey[Any, Any], request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.related_model is Team:
            kwargs["queryset"] = access.scoped(Team.objects.all(), request.user, TeamRole.ADMIN)
            if request.user.is_superuser:
                # Left empty, the row goes to the team `default` (the models' own default).
                kwargs |= {"required": False, "empty_label": "default"}
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def _allows(self, request: HttpRequest, action: str, obj: Model | None) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.{get_permission_codename(action, self.opts)}", obj)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allows(request, "view", obj) or self._allows(request, "change", obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self._allows(request, "add", None)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allows(request, "change", obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allows(request, "delete", obj)


@admin.register(AgentProfile)
class AgentProfileAdmin(TeamScopedAdmin):
    form = AgentProfileForm
    fields = ["name", "team", "model", "base_url", "instructions", "enabled_tools", "runs_on"]
    list_display = ["name", "team", "model", "runs_on", "tools", "updated_at"]
    list_filter = ["team"]
    search_fields = ["name", "model"]
    readonly_fields = ["runs_on"]

    @admin.display(description="runs on")
    def runs_on(self, profile: AgentProfile) -> str:
        if not profile.pk:
            return "—"
        choice = ModelChoice(profile.model, profile.base_url, profile.name)
        problems = model_problems(choice)
        return choice.describe() + (f" — cannot run here: {' '.join(problems)}" if problems else "")

    @admin.display(description="enabled tools")
    def tools(self, profile: AgentProfile) -> str:
        return ", ".join(profile.enabled_tools or []) or "—"


def _default(name: str) -> Any:
    field = HostPolicyVersion._meta.get_field(name)
    assert isinstance(field, Field), f"{name} is a column of the policy version"
    default = field.default
    return default() if callable(default) else default


def _bounded(name: str, help_text: str, *, floor: int | None = None) -> forms.IntegerField:
    """A form field for one of the policy's numbers, within the range its database constraint allows."""
    low, high = POLICY_VERSION_LIMITS[name]
    low = max(low, floor) if floor is not None else low
    return forms.IntegerField(min_value=low, max_value=high, help_text=f"{help_text} ({low}–{high})")


DRY_RUN_BUTTON = "_dryrun"


REDACTION_HELP = (
    "One key pattern per row: a regular expression searched case-insensitively in keys (pass matches Passphrase; "
    "anchor with ^…$). The value under a matching key is shown as [redacted]. A pattern saved here applies to "
    "executions that start afterwards: their timeline and live updates, input, tool arguments, approvals, "
    "decisions, exports and webhooks. An execution that already exists keeps the patterns of the policy version "
    "it started with, until “Apply to existing executions” re-masks what it stored masked: its timeline events, "
    "its input as lists and searches show it, and its thread's title. Values masked as they are shown (approval "
    "arguments, decisions, failures) still follow its own version. The journal, checkpoints and decisions keep the "
    "real values: tools get what the model sent."
)


def _rule_row_problems(index: int, rule: Any, registry: Any) -> list[str]:
    """What is wrong with one rule, as the lines shown beside its row (numbered as the rows are)."""
    try:
        (parsed,) = parse_approval_rules([rule])
    except ValueError as exc:
        return [f"rule {index + 1}: {exc}"]
    return [f"rule {index + 1} ({parsed.tool}): {problem}" for problem in problems_of_rule(parsed, registry)]


def _pattern_problems(pattern: Any) -> list[str]:
    try:
        parse_redact_patterns([pattern])
    except ValueError as exc:
        return [str(exc)]
    return []


def _budget_problems(index: int, budget: Any, team_id: int | None) -> list[str]:
    """What is wrong with one budget row: its shape, and (once the team is known) a name the team does not have."""
    try:
        (parsed,) = budget_rules.parse_budgets([budget])
    except ValueError as exc:
        return [f"budget {index + 1}: {exc}"]
    if team_id is None or parsed.name == budget_rules.EACH_USER:
        return []
    if parsed.scope == "profile":
        if not AgentProfile.objects.filter(team_id=team_id, name=parsed.name).exists():
            return [f"budget {index + 1}: the team has no profile named {parsed.name!r}."]
        return []
    user = get_user_model().objects.filter(username=parsed.name).first()
    if user is None or access.role_in(user, team_id) is None:
        return [f"budget {index + 1}: the team has no member named {parsed.name!r}."]
    return []


class HostPolicyForm(forms.ModelForm):
    """The policy's name plus the fields of the version that saving will publish."""

    approval_rules = RowsField(
        required=False,
        widget=RuleRowsWidget(),
        help_text=(
            "One rule per row: the tool (a name, or a glob like delete_*), optionally a condition on one of its "
            'arguments (eq, ne, gt, lt or contains a value: 1000, true or "text" as JSON, anything else as '
            "text), and the reason shown to the approver. A call matching a rule suspends the run until someone "
            "approves it."
        ),
    )
    tool_recovery = forms.ChoiceField(
        choices=ToolRecovery.choices, help_text="What a recovery run does with a tool call whose outcome is unknown."
    )
    max_attempts = _bounded("max_attempts", "Runs per execution before recovery gives up.")
    # Shorter leases are allowed by the table (tests use them) but expire under ordinary load.
    lease_seconds = _bounded("lease_seconds", "A worker's lease in seconds; an expired lease means it died.", floor=5)
    approval_timeout_seconds = _bounded(
        "approval_timeout_seconds", "Seconds until the host denies unanswered requests; 0 = never."
    )
    model_max_retries = _bounded(
        "model_max_retries", "Retries of one failed model request (429, 5xx, dropped connection) before the run fails."
    )
    retention_days = forms.IntegerField(
        required=False,
        min_value=RETENTION_DAYS_LIMITS[0],
        max_value=RETENTION_DAYS_LIMITS[1],
        label="Keep finished executions (days)",
        error_messages={
            "min_value": "Keep executions at least %(limit_value)s day: 0 or less would purge them the moment "
            "they end. Leave it blank to keep them forever."
        },
        help_text="Completed, failed and cancelled executions older than this are purged by the sweeper: their "
        "journal, timeline and checkpoints are deleted, a tombstone and the decisions stay. Held threads and "
        f"executions are kept. Blank: keep forever ({RETENTION_DAYS_LIMITS[0]}–{RETENTION_DAYS_LIMITS[1]}).",
    )
    redact_patterns = RowsField(
        required=False,
        widget=PatternRowsWidget(),
        help_text=REDACTION_HELP,
    )
    budgets = RowsField(
        required=False,
        widget=BudgetRowsWidget(),
        help_text=(
            "One budget per row: a profile (by name) or a user (a username, or * for each user on their own), "
            "a UTC calendar day or month, and a limit in tokens (input + output) or money (the currency of Model "
            "prices; runs of unknown cost are not counted). Once spent, a run's next model request waits for an "
            "approver, who may allow one request or deny (the run fails with budget_exceeded)."
        ),
    )
    comment = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2, "cols": 90}), help_text="Why this change."
    )
    dry_run_last = forms.IntegerField(
        required=False,
        initial=20,
        min_value=1,
        max_value=200,
        label="Executions",
        help_text="How many of the newest executions a dry run reads.",
    )

    class Meta:
        model = HostPolicy
        fields = ["name"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dry_run_requested = DRY_RUN_BUTTON in self.data
        current = self.instance.current_version if self.instance.pk else None
        for name in POLICY_VERSION_FIELDS:
            self.fields[name].initial = getattr(current, name) if current else _default(name)
        rules = self.fields["approval_rules"]
        rules.help_text = f"{rules.help_text} Host tools: {', '.join(toolbox.tool_names())}."

    def clean_approval_rules(self) -> list[Any]:
        rules = self.cleaned_data["approval_rules"] or []
        if not isinstance(rules, list):
            raise forms.ValidationError("Invalid approval rules: they must be a list of rules.")
        registry = toolbox.registry()
        problems = {
            index: found for index, rule in enumerate(rules) if (found := _rule_row_problems(index, rule, registry))
        }
        if problems:
            raise self._rows_field("approval_rules").errors_beside_rows(problems)
        self.parsed_rules = parse_approval_rules(rules)
        return rules

    def clean_budgets(self) -> list[Any]:
        budgets = self.cleaned_data["budgets"] or []
        if not isinstance(budgets, list):
            raise forms.ValidationError("Invalid budgets: they must be a list of budgets.")
        team = self.instance.team_id if self.instance.pk else getattr(self.cleaned_data.get("team"), "pk", None)
        problems = {
            index: found for index, budget in enumerate(budgets) if (found := _budget_problems(index, budget, team))
        }
        if problems:
            raise self._rows_field("budgets").errors_beside_rows(problems)
        return budgets

    def clean_redact_patterns(self) -> list[str]:
        patterns = self.cleaned_data["redact_patterns"] or []
        try:
            parse_redact_patterns(patterns)
        except ValueError as exc:
            if not isinstance(patterns, list):
                raise forms.ValidationError(str(exc)) from exc
            problems = {index: found for index, pattern in enumerate(patterns) if (found := _pattern_problems(pattern))}
            raise self._rows_field("redact_patterns").errors_beside_rows(problems) from exc
        return patterns

    def _rows_field(self, name: str) -> RowsField:
        field = self.fields[name]
        assert isinstance(field, RowsField)
        return field

    def is_valid(self) -> bool:
        # A dry run validates everything a save would, but must never reach the admin's save: reporting
        # "not valid" without errors makes the admin render the form again, where the result is added.
        return super().is_valid() and not self.dry_run_requested

    def version_values(self) -> dict[str, Any]:
        return {name: self.cleaned_data[name] for name in POLICY_VERSION_FIELDS}

    def rules_to_show(self) -> tuple[ApprovalRule, ...] | None:
        """The rules the page explains: the submitted ones once valid, else those of the current version."""
        if self.is_bound:
            return getattr(self, "parsed_rules", None) if not self.errors else None
        current = self.instance.current_version if self.instance.pk else None
        return parse_approval_rules(current.approval_rules if current else [])


class HostPolicyVersionInline(admin.TabularInline):
    model = HostPolicyVersion
    fk_name = "policy"
    extra = 0
    ordering = ["-number"]
    can_delete = False
    fields = ("number", "created_at", "created_by", "comment", "changes")
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
        (name, json.dumps(getattr(previous, name)), json.dumps(getattr(version, name)))
        for name in POLICY_VERSION_FIELDS
        if getattr(previous, name) != getattr(version, name)
    ]
    if not changed:
        return mark_safe("<em>no field changed</em>")
    return format_html_join(mark_safe("<br>"), "<code>{}</code>: {} → {}", changed)


def approvals_summary(rules: tuple[ApprovalRule, ...]) -> str:
    """One line for the message after a save: which tools now ask for approval, and for which calls."""
    parts = [
        f"{tools.tool} ({'; '.join(f'{r.calls}, by {r.source}' for r in tools.requirements)})"
        for tools in effective_approvals(rules, toolbox.registry())
        if tools.requirements
    ]
    return "Approval is required for: " + ", ".join(parts) if parts else "No tool requires approval."


@admin.register(HostPolicy)
class HostPolicyAdmin(TeamScopedAdmin):
    form = HostPolicyForm
    list_display = ["name", "team", "governs", "current", "retention", "changed_by", "changed_at"]
    change_list_template = "admin/runs/hostpolicy/change_list.html"
    inlines = [HostPolicyVersionInline]
    readonly_fields = ["governs"]
    fieldsets = [
        (None, {"fields": ["name", "team", "governs"]}),
        ("Approvals", {"fields": ["approval_rules", "approval_timeout_seconds"]}),
        ("Recovery", {"fields": ["tool_recovery", "max_attempts", "lease_seconds"]}),
        ("Model requests", {"fields": ["model_max_retries"]}),
        ("Timeline", {"fields": ["redact_patterns"]}),
        ("Retention", {"fields": ["retention_days"]}),
        ("Budgets", {"fields": ["budgets"]}),
        ("This change", {"fields": ["comment"]}),
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: HostPolicy | None = None) -> list[str]:
        # A team has one policy for good: moving it would change what governs two teams' executions at once.
        return [*self.readonly_fields, "team"] if obj is not None else list(self.readonly_fields)

    @admin.display(description="governs the profiles")
    def governs(self, policy: HostPolicy) -> str:
        if not policy.pk:
            return "—"
        names = AgentProfile.objects.filter(team_id=policy.team_id).order_by("name").values_list("name", flat=True)
        return ", ".join(names) or "no profile yet"

    @admin.display(description="keeps finished executions")
    def retention(self, policy: HostPolicy) -> str:
        days = policy.current_version.retention_days if policy.current_version else None
        return "forever" if days is None else f"{days} day{'s' if days != 1 else ''}"

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("retention/", view(self.retention_dry_run), name="runs_hostpolicy_retention"),
            path("<int:pk>/remask/", view(self.start_remask), name="runs_hostpolicy_remask"),
            path("remask/<int:pk>/", view(self.remask_progress), name="runs_hostpolicy_remask_progress"),
            *super().get_urls(),
        ]

    def start_remask(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Apply the saved patterns to the policy's existing executions (a job); the change page shows progress."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        policy = self.get_object(request, str(pk))
        if policy is None:
            raise Http404("No host policy of this number in your teams.")
        if not self.has_change_permission(request, policy):
            raise PermissionDenied("Re-masking needs the admin role in the policy's team.")
        assert request.user.is_authenticated, "the admin lets only staff in"
        try:
            remask = remasking.start(policy, request.user)
        except remasking.RemaskRefused as refused:
            self.message_user(request, f"Nothing was started: {refused}", level=messages.ERROR)
        else:
            self.log_change(request, policy, f"Started re-masking {remask.total} existing executions (#{remask.pk}).")
            self.message_user(
                request,
                f"Re-masking {remask.total} existing executions with the patterns of v{remask.version.number}.",
            )
        return redirect(reverse("admin:runs_hostpolicy_change", args=[pk]) + "#remask")

    def remask_progress(self, request: HttpRequest, pk: int) -> JsonResponse:
        remask = Remask.objects.filter(pk=pk).first()
        if remask is None or not self.has_view_permission(request, remask.policy):
            raise Http404("No re-mask of this number in your teams.")
        return JsonResponse(remasking.progress(remask))

    def retention_dry_run(self, request: HttpRequest) -> HttpResponse:
        """What the next retention pass would delete in each team whose policy the user administers."""
        if not self.has_view_permission(request):
            raise PermissionDenied("The retention dry run needs the admin role in a team.")
        rows = [
            (policy, estimate(team_ids=[policy.team_id]))
            for policy in self.get_queryset(request).select_related("team", "current_version").order_by("name")
        ]
        context = {**self.admin_site.each_context(request), "opts": self.model._meta, "rows": rows}
        return render(request, "admin/runs/hostpolicy/retention.html", context)

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
        self.message_user(request, approvals_summary(form.parsed_rules))

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any
    ) -> HttpResponse:
        form: HostPolicyForm = context["adminform"].form
        rules = form.rules_to_show()
        if rules is not None:
            context["effective_approvals"] = effective_approvals(rules, toolbox.registry())
            if form.dry_run_requested:
                last = form.cleaned_data.get("dry_run_last") or form.fields["dry_run_last"].initial
                context["dry_run"] = dry_run(rules, last=last, tools=toolbox.registry())
        context["dry_run_button"] = DRY_RUN_BUTTON
        policy = context.get("original")
        if policy is not None:
            context["remask"] = policy.remasks.select_related("version", "started_by").first()
            context["can_remask"] = bool(policy.current_version and policy.current_version.redact_patterns)
        return super().render_change_form(request, context, *args, **kwargs)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Executions and runs point at its versions; a policy is changed, never removed.
        return False


class RecordAdmin(TeamScopedAdmin):
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


def _masked(value: Any, execution: Execution) -> str:
    """A stored value as staff may see it: masked by the execution's policy version, as on every page."""
    if value is None:
        return "—"
    return format_html("<pre>{}</pre>", redactor_for(execution.policy_version).pretty_json(value))


# Fields holding values of a run: shown masked through `_masked`, never as stored.
_DECISION_VALUES = ("override_args", "approved_args", "result", "message")


@admin.register(Decision)
class DecisionAdmin(RecordAdmin):
    """The record of answers, for staff; answering happens on the execution page."""

    list_display = ["decided_at", "decided_by", "verdict", "request", "args_digest"]
    list_filter = ["verdict", "decided_by"]
    readonly_fields = (
        *(field.name for field in Decision._meta.fields if field.name not in _DECISION_VALUES),
        "shown_override_args",
        "shown_approved_args",
        "shown_result",
        "shown_message",
    )
    fields = readonly_fields  # a view-only page would otherwise show every model field as stored

    def get_queryset(self, request: HttpRequest) -> QuerySet[Decision]:
        return super().get_queryset(request).select_related("request__execution__policy_version")

    @admin.display(description="edited arguments")
    def shown_override_args(self, decision: Decision) -> str:
        return _masked(decision.override_args, decision.request.execution)

    @admin.display(description="approved arguments")
    def shown_approved_args(self, decision: Decision) -> str:
        return _masked(decision.approved_args, decision.request.execution)

    @admin.display(description="result")
    def shown_result(self, decision: Decision) -> str:
        return _masked(decision.result, decision.request.execution)

    @admin.display(description="message")
    def shown_message(self, decision: Decision) -> str:
        return redactor_for(decision.request.execution.policy_version).text(decision.message) or "—"


@admin.register(DeferredRequest)
class DeferredRequestAdmin(RecordAdmin):
    """What suspended runs asked for, for staff; the arguments are shown masked."""

    list_display = ["created_at", "tool_name", "kind", "status", "execution", "expires_at"]
    list_filter = ["status", "kind", "tool_name"]
    readonly_fields = (
        *(field.name for field in DeferredRequest._meta.fields if field.name != "args"),
        "shown_args",
    )
    fields = readonly_fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[DeferredRequest]:
        return super().get_queryset(request).select_related("execution__thread", "execution__policy_version")

    @admin.display(description="arguments")
    def shown_args(self, deferred: DeferredRequest) -> str:
        return _masked(deferred.args, deferred.execution)


class BundleUploadForm(forms.Form):
    bundle = forms.FileField(help_text="A run bundle (.zip) exported by a Host.")
    team = forms.ModelChoiceField(queryset=Team.objects.none(), help_text="The team the read-only copy belongs to.")
    accept_unsigned = forms.BooleanField(
        required=False,
        help_text="Import it although its signature does not match this Host's key (its hashes are still checked).",
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["team"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = access.scoped(Team.objects.all(), user, TeamRole.ADMIN)


@admin.register(BundleTransfer)
class BundleTransferAdmin(RecordAdmin):
    """Every run bundle exported and imported; an admin of a team imports one into it from the list's link."""

    list_display = ["at", "direction", "mode", "host", "team", "execution", "user", "signed"]
    list_filter = ["direction", "mode", "signed"]
    readonly_fields = [field.name for field in BundleTransfer._meta.fields]
    change_list_template = "admin/runs/bundletransfer/change_list.html"

    def get_urls(self) -> list[URLPattern]:
        upload = path("import/", self.admin_site.admin_view(self.import_view), name="runs_bundletransfer_import")
        return [upload, *super().get_urls()]

    def import_view(self, request: HttpRequest) -> HttpResponse:
        if not access.scoped(Team.objects.all(), request.user, TeamRole.ADMIN).exists():
            raise PermissionDenied("Importing a bundle needs the admin role in a team.")
        form = BundleUploadForm(request.POST or None, request.FILES or None, user=request.user)
        if request.method == "POST" and form.is_valid():
            try:
                transfer = bundle_import.import_bundle(
                    form.cleaned_data["bundle"],
                    team=form.cleaned_data["team"],
                    user=request.user,
                    accept_unsigned=form.cleaned_data["accept_unsigned"],
                )
            except BundleError as exc:
                form.add_error("bundle", f"Nothing was imported: {exc}.")
            else:
                self.message_user(request, f"Imported a {transfer.mode} bundle from {transfer.host}.")
                return redirect(reverse("runs:execution", args=[transfer.execution_id]))
        context = {**self.admin_site.each_context(request), "opts": self.model._meta, "form": form}
        return render(request, "admin/runs/bundletransfer/import.html", context, status=400 if form.errors else 200)


class HoldAdmin(TeamScopedAdmin):
    """Threads and executions as records, whose only change is a hold: retention keeps what is held."""

    actions = ["put_on_hold", "release_hold"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*self.fields] if self.fields else []

    @admin.action(description="Put on hold (retention keeps them)", permissions=["change"])
    def put_on_hold(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        held = refused = 0
        for target in queryset:
            try:
                set_hold(target, held=True, user=request.user)
                held += 1
            except HoldRefused:
                refused += 1
        skipped = f"; {refused} already purged, not held." if refused else "."
        self.message_user(request, f"{held} put on hold{skipped}")

    @admin.action(description="Release the hold", permissions=["change"])
    def release_hold(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for target in queryset:
            set_hold(target, held=False, user=request.user)
        self.message_user(request, f"{len(queryset)} released.")


@admin.register(Thread)
class ThreadAdmin(HoldAdmin):
    list_display = ["thread_id", "title", "team", "held_at", "held_by"]
    list_filter = ["team"]
    search_fields = ["thread_id", "title"]
    fields = ["thread_id", "title", "team", "profile", "created_at", "held_at", "held_by"]


@admin.register(Execution)
class ExecutionAdmin(HoldAdmin):
    list_display = ["__str__", "status", "finished_at", "held_at", "held_by", "purged"]
    list_filter = ["status"]
    fields = ["thread", "number", "status", "created_by", "created_at", "finished_at", "held_at", "held_by"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Execution]:
        return super().get_queryset(request).select_related("thread", "held_by", "tombstone")

    @admin.display(description="purged", boolean=True)
    def purged(self, execution: Execution) -> bool:
        return hasattr(execution, "tombstone")


@admin.register(ExecutionTombstone)
class ExecutionTombstoneAdmin(RecordAdmin):
    """What stays of each execution retention purged."""

    list_display = ["execution", "purged_at", "retention_days", "outcome", "cost", "finished_at"]
    list_filter = ["outcome"]
    readonly_fields = [field.name for field in ExecutionTombstone._meta.fields]


class AccessAttemptAdmin(axes_admin.AccessAttemptAdmin):  # type: ignore[misc]  # axes ships no types: Any
    """django-axes' failed-login records, whose clean-up action deletes records and so needs the delete permission
    (axes declares none: anyone who may view them could run it)."""

    @admin.action(description="Clean up expired attempts", permissions=["delete"])
    def cleanup_expired_attempts(self, request: HttpRequest, queryset: QuerySet[AccessAttempt]) -> None:
        super().cleanup_expired_attempts(request, queryset)


if admin.site.is_registered(AccessAttempt):
    admin.site.unregister(AccessAttempt)
    admin.site.register(AccessAttempt, AccessAttemptAdmin)


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    """Prices per million tokens; a new price from a later date keeps the older runs at the price they ran at."""

    list_display = ["model", "valid_from", "input", "output", "cache_read", "cache_write"]
    list_filter = ["model"]
    search_fields = ["model"]
