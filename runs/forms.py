"""Forms: starting work (new thread, new execution, fork), the thread search, the executions list's filters, an
agent profile, one decision set per post, and the audit filters. Text fields are bounded and refuse control
characters (runs/validators.py)."""

from __future__ import annotations

import datetime
import json
import re
import secrets
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, User
from django.http import QueryDict

from runs.models import AgentProfile, BulkAction, ExecutionStatus, Thread, ToolDispatch, Verdict
from runs.services.lifecycle import (
    MAX_KEY_LENGTH,
    MAX_MESSAGE_CHARS,
    MAX_VALUE_BYTES,
    Answer,
    SubmissionRejected,
    awaiting_approval,
)
from runs.services.reports import WAITING_FOR, AuditFilters, Cursor, ExecutionFilters
from runs.services.store import (
    ModelChoice,
    WhatIfRefused,
    access,
    base_url_problem,
    model_problems,
    parse_change,
    profile_key_variable,
    toolbox,
)
from runs.services.timeline import THREAD_STATUSES
from runs.validators import MAX_DB_INTEGER, MAX_INPUT_CHARS, multi_line_text, single_line_text, unstorable_json

TITLE_CHARS = Thread._meta.get_field("title").max_length
EARLIEST_DAY = datetime.date(2000, 1, 1)
LATEST_DAY = datetime.date(2999, 12, 31)

_ENTRY_ID = re.compile(r"^decision-(\d+)-id$")
_RUN_NUMBER = re.compile(r"[0-9]{1,19}")
# A harness run id: "run-" and hex on this Host; an imported run keeps its source Host's, so any plain id passes.
_RUN_ID = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,99}")


def new_submission_key() -> str:
    """A fresh one-time key for one rendering of a form (approvals, and the forms that start work)."""
    return secrets.token_urlsafe(24)


class StartForm(forms.Form):
    """What every form that starts work posts: its one-time submission key (see runs.services.lifecycle.starts)."""

    submission_key = forms.CharField(
        max_length=MAX_KEY_LENGTH,
        error_messages={"required": "The form has no submission key; reload the page and submit it again."},
    )


def _title_field() -> forms.CharField:
    return forms.CharField(max_length=TITLE_CHARS, required=False, validators=[single_line_text])


def _input_field(**options: Any) -> forms.CharField:
    return forms.CharField(max_length=MAX_INPUT_CHARS, validators=[multi_line_text], **options)


class ProfileChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: AgentProfile) -> str:
        return f"{obj.name} ({obj.model})"


class NewThreadForm(StartForm):
    profile = ProfileChoiceField(queryset=AgentProfile.objects.order_by("name"), empty_label=None)
    title = _title_field()
    input = _input_field(required=False)


class NewExecutionForm(StartForm):
    input = _input_field(error_messages={"required": "Write what the agent should do."})


class ForkForm(StartForm):
    title = _title_field()


WHAT_IF_KINDS = (
    ("tool_result", "a tool result"),
    ("approval", "an approval decision"),
    ("arguments", "a deferred call's arguments"),
    ("instructions", "the profile's instructions"),
    ("model", "the model"),
    ("policy_version", "the policy version"),
)


class WhatIfForm(StartForm):
    """One what-if: the checkpoint (`checkpoints`: those offered), what it changes, and the one value that changes.

    `value` is JSON for a tool result or arguments, a number for a policy version and text otherwise; an approval
    takes a verdict (and a message for a denial) instead. Cleans to `change`, checked by `parse_change`.
    """

    checkpoint = forms.TypedChoiceField(coerce=int)
    kind = forms.ChoiceField(choices=WHAT_IF_KINDS)
    tool_call_id = forms.CharField(required=False, max_length=200, validators=[single_line_text])
    value = forms.CharField(
        required=False,
        max_length=MAX_INPUT_CHARS,
        widget=forms.Textarea(attrs={"rows": 3}),
        validators=[multi_line_text],
    )
    verdict = forms.ChoiceField(required=False, choices=[("", "—"), ("approve", "approve"), ("deny", "deny")])
    message = forms.CharField(required=False, max_length=MAX_MESSAGE_CHARS, validators=[single_line_text])

    def __init__(self, *args: Any, checkpoints: list[tuple[int, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["checkpoint"]
        assert isinstance(field, forms.TypedChoiceField)
        field.choices = checkpoints

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind = data.get("kind")
        if kind is None or self.errors:
            return data
        value: str = data.get("value", "")
        fields: dict[str, Any] = {"kind": kind}
        if kind in ("tool_result", "approval", "arguments"):
            fields["tool_call_id"] = data.get("tool_call_id", "")
        try:
            if kind == "tool_result":
                fields["result"] = _json_field(value, "New value", "tool result")
            elif kind == "arguments":
                fields["args"] = _json_field(value, "New value", "arguments")
            elif kind == "approval":
                fields.update(verdict=data.get("verdict") or None, message=data.get("message", ""))
            elif kind == "policy_version":
                fields["number"] = value.strip()
            else:
                fields[kind] = value
        except SubmissionRejected as refused:
            self.add_error("value", refused.message)
            return data
        try:
            data["change"] = parse_change(fields)
        except WhatIfRefused as refused:
            self.add_error(None, refused.message)
        return data


class ThreadSearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, validators=[single_line_text])
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *((s, s) for s in THREAD_STATUSES)])


class CompareForm(forms.Form):
    """The two runs a comparison lines up, each by its number in run URLs (/runs/<number>/) or its run id; each
    cleans to the lookup that finds it."""

    a = forms.CharField(label="Run A", max_length=100)
    b = forms.CharField(label="Run B", max_length=100)

    @staticmethod
    def _lookup(value: str) -> dict[str, Any]:
        if _RUN_NUMBER.fullmatch(value) and int(value) <= MAX_DB_INTEGER:
            return {"pk": int(value)}
        if _RUN_ID.fullmatch(value) and not value.isdigit():
            return {"run_id": value}
        raise forms.ValidationError("Name a run by its number (as in /runs/<number>/) or by its run id (run-…).")

    def clean_a(self) -> dict[str, Any]:
        return self._lookup(self.cleaned_data["a"])

    def clean_b(self) -> dict[str, Any]:
        return self._lookup(self.cleaned_data["b"])


class UsageForm(forms.Form):
    days = forms.IntegerField(required=False, min_value=1, max_value=366, label="Last days")


SEARCH_CHARS = 200
_EARLIEST = datetime.datetime.combine(EARLIEST_DAY, datetime.time.min, tzinfo=datetime.UTC)
_LATEST = datetime.datetime.combine(LATEST_DAY, datetime.time.max, tzinfo=datetime.UTC)


class ExecutionFilterForm(forms.Form):
    """The executions list's filters and its page position, all from the query string (a view is a link)."""

    status = forms.ChoiceField(
        required=False,
        choices=[
            ("", "any status"),
            *((status, status) for status in ExecutionStatus.values),
            *((f"waiting:{kind}", f"waiting for {kind}") for kind in WAITING_FOR),
        ],
    )
    profile = forms.ModelChoiceField(queryset=AgentProfile.objects.none(), required=False, to_field_name="name")
    tool = forms.CharField(
        required=False, max_length=ToolDispatch._meta.get_field("tool_name").max_length, validators=[single_line_text]
    )
    failure = forms.CharField(required=False, max_length=100, validators=[single_line_text])
    by = forms.ModelChoiceField(queryset=get_user_model().objects.none(), required=False, to_field_name="username")
    started_from = forms.DateTimeField(required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    started_to = forms.DateTimeField(required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    fork = forms.ChoiceField(required=False, choices=[("", "forked or not"), ("yes", "has a fork"), ("no", "no fork")])
    q = forms.CharField(required=False, max_length=SEARCH_CHARS, validators=[single_line_text])
    after = forms.CharField(required=False, max_length=60)
    before = forms.CharField(required=False, max_length=60)

    FILTERS = ("status", "profile", "tool", "failure", "by", "started_from", "started_to", "fork", "q")
    """The fields that narrow the list (the others say where the page is)."""

    def __init__(self, *args: Any, viewer: User | AnonymousUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.viewer = viewer
        profile, by = self.fields["profile"], self.fields["by"]
        assert isinstance(profile, forms.ModelChoiceField) and isinstance(by, forms.ModelChoiceField)
        profile.queryset = access.visible_profiles(viewer).order_by("name")
        by.queryset = access.visible_users(viewer).order_by("username")

    def _clean_cursor(self, name: str) -> Cursor | None:
        text = self.cleaned_data[name].strip()
        if not text:
            return None
        try:
            cursor = Cursor.parse(text)
        except (ValueError, OverflowError):
            cursor = None
        if cursor is None or not (_EARLIEST <= cursor.created_at <= _LATEST and cursor.pk <= MAX_DB_INTEGER):
            raise forms.ValidationError("This is not a position in the list; start again from the first page.")
        return cursor

    def clean_after(self) -> Cursor | None:
        return self._clean_cursor("after")

    def clean_before(self) -> Cursor | None:
        return self._clean_cursor("before")

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        for name in ("started_from", "started_to"):
            moment = data.get(name)
            if moment is not None and not _EARLIEST <= moment <= _LATEST:
                self.add_error(name, f"Choose a time between {EARLIEST_DAY} and {LATEST_DAY}.")
        start, end = data.get("started_from"), data.get("started_to")
        if start and end and start > end:
            self.add_error("started_to", "The end is before the start.")
        return data

    def filters(self) -> ExecutionFilters:
        """The valid filters; none when the form is invalid (its errors say why)."""
        if not self.is_valid():
            return ExecutionFilters(viewer=self.viewer)
        data = self.cleaned_data
        status, _, waiting_for = data["status"].partition(":")
        return ExecutionFilters(
            viewer=self.viewer,
            status=status,
            waiting_for=waiting_for,
            profile=data["profile"],
            tool=data["tool"].strip(),
            failure_code=data["failure"].strip(),
            started_by=data["by"],
            started_from=data["started_from"],
            started_to=data["started_to"],
            has_fork={"yes": True, "no": False}.get(data["fork"]),
            text=data["q"].strip(),
        )

    def is_filtered(self) -> bool:
        return any(self.data.get(name) for name in self.FILTERS)


class SavedViewForm(forms.Form):
    """A name for the executions list's current filters; the query is checked as the list would read it."""

    name = forms.CharField(max_length=60, validators=[single_line_text])
    query = forms.CharField(required=False, max_length=2000, validators=[single_line_text])

    def __init__(self, *args: Any, viewer: User | AnonymousUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.viewer = viewer

    def clean_query(self) -> str:
        query = QueryDict(self.cleaned_data["query"].lstrip("?"), mutable=True)
        # A view is the filters, never a position in the list.
        for name in ("after", "before"):
            query.pop(name, None)
        unknown = sorted(set(query) - set(ExecutionFilterForm.FILTERS))
        if unknown:
            raise forms.ValidationError(f"Not a filter of the executions list: {', '.join(unknown)}.")
        filters = ExecutionFilterForm(query, viewer=self.viewer)
        if not filters.is_valid():
            raise forms.ValidationError(f"These filters are refused: {filters.errors.as_text()}")
        return query.urlencode()


class StorableJSONField(forms.JSONField):
    """Django's JSON form field, refusing what neither database can store (NUL, lone surrogates, deep nesting)
    with a message instead of an error from the database or a RecursionError from the parser."""

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except RecursionError:
            raise forms.ValidationError("The JSON is nested too deeply.", code="invalid") from None

    def bound_data(self, data: Any, initial: Any) -> Any:
        try:
            return super().bound_data(data, initial)
        except RecursionError:
            # Shown again as typed, like any other invalid JSON.
            return forms.fields.InvalidJSONInput(data)

    def validate(self, value: Any) -> None:
        super().validate(value)
        if problem := unstorable_json(value):
            raise forms.ValidationError(f"The JSON {problem}.", code="invalid")


class AgentProfileForm(forms.ModelForm):
    """An agent profile as the admin edits it and `manage.py harness_profile` sets it: one validation for both."""

    base_url = forms.URLField(
        required=False,
        assume_scheme="http",
        max_length=300,
        help_text=f"{AgentProfile._meta.get_field('base_url').help_text} It must be https unless its host is this "
        "machine or listed in HARNESS_MODEL_HOSTS_ALLOWED. Requests to it carry the key in the environment variable "
        "HARNESS_PROFILE_<NAME>_API_KEY (the profile's name in capitals, '-' as '_'), or none: never the provider's "
        "own key.",
    )
    enabled_tools = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Tools of the host tool registry this profile's agent may call.",
    )

    class Meta:
        model = AgentProfile
        fields = ["name", "model", "base_url", "instructions", "enabled_tools"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Read per form: the registry is code, but a profile saved earlier may name a tool since removed.
        names = set(toolbox.tool_names()) | set(self.instance.enabled_tools or [])
        tools = self.fields["enabled_tools"]
        assert isinstance(tools, forms.MultipleChoiceField)
        tools.choices = [(name, name) for name in sorted(names)]

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        variable = profile_key_variable(name)
        others = AgentProfile.objects.exclude(pk=self.instance.pk).values_list("name", flat=True)
        # Else a new profile could be given the key of an existing one, and send it to its own base URL.
        if clash := next((other for other in others if profile_key_variable(other) == variable), None):
            raise forms.ValidationError(
                f'The profile "{clash}" already reads its key from {variable}: choose a name that differs from it '
                "in more than case, '-' and '_'."
            )
        return name

    def clean_base_url(self) -> str:
        base_url: str = self.cleaned_data["base_url"]
        if problem := base_url_problem(base_url):
            raise forms.ValidationError(problem)
        return base_url

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if "model" in cleaned and "base_url" not in self.errors:
            # Checked against this process's environment; the worker's must provide the same packages and keys.
            choice = ModelChoice(cleaned["model"], cleaned.get("base_url") or "", cleaned.get("name") or "")
            for problem in model_problems(choice):
                self.add_error("model", problem)
        return cleaned

    def clean_enabled_tools(self) -> list[str]:
        chosen = self.cleaned_data["enabled_tools"]
        unknown = toolbox.unknown(chosen)
        if unknown:
            raise forms.ValidationError(f"Not in the host tool registry: {', '.join(unknown)}")
        return list(chosen)


CHOICE_VERDICTS = {
    "approve": Verdict.APPROVED,
    "edit": Verdict.APPROVED,
    "deny": Verdict.DENIED,
    "result": Verdict.EXTERNAL_RESULT,
    "answer": Verdict.ANSWERED,
}
"""The radio values of one request's row; "edit" is an approval carrying the edited arguments."""


class DecisionSetForm(forms.Form):
    """The hidden fields of the approval form; the rows are read by `answers()`.

    Row `n` posts `decision-n-id` (tool call id), `decision-n-choice` (a key of CHOICE_VERDICTS) and, as the
    choice needs, `decision-n-args` (edited arguments, a JSON object), `decision-n-result` (external
    result, any JSON), `decision-n-answer` (text) or `decision-n-message` (the denial message).
    """

    data: QueryDict  # always bound to request.POST

    checkpoint = forms.IntegerField(min_value=1, max_value=MAX_DB_INTEGER)
    submission_key = forms.CharField(max_length=100)
    next = forms.CharField(required=False, max_length=2000)

    def answers(self) -> list[Answer]:
        """Every posted row as an `Answer`; malformed rows raise `SubmissionRejected`."""
        data: QueryDict = self.data
        rows = sorted(int(match[1]) for name in data if (match := _ENTRY_ID.match(name)))
        return [self._answer(data, row) for row in rows]

    def _answer(self, data: QueryDict, row: int) -> Answer:
        def value(name: str) -> str:
            return data.get(f"decision-{row}-{name}", "")

        call_id = value("id").strip()
        choice = value("choice")
        label = call_id or f"row {row + 1}"
        if choice not in CHOICE_VERDICTS:
            raise SubmissionRejected(f"{label}: choose how to answer this request.", code="no_choice")
        message = value("message").strip()
        _check_text(message, label, "message")
        if len(message) > MAX_MESSAGE_CHARS:
            raise SubmissionRejected(
                f"{label}: the message is longer than {MAX_MESSAGE_CHARS} characters.", code="too_large"
            )
        verdict = CHOICE_VERDICTS[choice]
        if choice == "edit":
            edited = _json_field(value("args"), label, "edited arguments")
            if not isinstance(edited, dict):
                raise SubmissionRejected(f"{label}: the edited arguments must be a JSON object.", code="invalid_args")
            return Answer(call_id, verdict, override_args=edited)
        if choice == "result":
            return Answer(call_id, verdict, result=_json_field(value("result"), label, "external result"))
        if choice == "answer":
            answer = value("answer")
            _check_length(answer, label, "answer")
            _check_text(answer, label, "answer")
            return Answer(call_id, verdict, result=answer)
        return Answer(call_id, verdict, message=message if choice == "deny" else "")


def _check_text(text: str, label: str, what: str) -> None:
    try:
        multi_line_text(text)
    except forms.ValidationError as exc:
        raise SubmissionRejected(f"{label}: the {what}: {exc.messages[0]}", code="invalid_text") from exc


def _check_length(text: str, label: str, what: str) -> None:
    size = len(text.encode())
    if size > MAX_VALUE_BYTES:
        raise SubmissionRejected(
            f"{label}: the {what} is {size} bytes; at most {MAX_VALUE_BYTES} are accepted.", code="too_large"
        )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_field(text: str, label: str, what: str) -> Any:
    _check_length(text, label, what)
    if not text.strip():
        raise SubmissionRejected(f"{label}: the {what} is empty; enter JSON.", code="malformed_json")
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError as exc:
        raise SubmissionRejected(f"{label}: the {what} is nested too deeply.", code="malformed_json") from exc
    except ValueError as exc:
        raise SubmissionRejected(f"{label}: the {what} is not valid JSON ({exc}).", code="malformed_json") from exc
    if problem := unstorable_json(value):
        raise SubmissionRejected(f"{label}: the {what} {problem}.", code="malformed_json")
    return value


MAX_GROUP_REQUESTS = 500
"""Requests one group decision may answer: a page of the inbox, many times over."""


class GroupDecisionForm(forms.Form):
    """One decision for a group of identical requests: their pks (comma-separated), approve or deny, one reason."""

    requests = forms.CharField(max_length=MAX_GROUP_REQUESTS * 21)
    choice = forms.ChoiceField(choices=[("approve", "approve"), ("deny", "deny")])
    message = forms.CharField(required=False, max_length=MAX_MESSAGE_CHARS, validators=[multi_line_text])
    submission_key = forms.CharField(max_length=60)

    def clean_requests(self) -> list[int]:
        parts = [part.strip() for part in self.cleaned_data["requests"].split(",") if part.strip()]
        if not all(part.isdigit() and int(part) <= MAX_DB_INTEGER for part in parts):
            raise forms.ValidationError("The requests must be request numbers separated by commas.")
        pks = list(dict.fromkeys(int(part) for part in parts))
        if not pks:
            raise forms.ValidationError("Choose at least one request.")
        if len(pks) > MAX_GROUP_REQUESTS:
            raise forms.ValidationError(f"At most {MAX_GROUP_REQUESTS} requests can be decided at once.")
        return pks


class BulkForm(forms.Form):
    """A bulk action over the selected executions (`execution`, repeated), over every match of `query` (the
    executions list's filter), or over every execution with an approval in the user's inbox (approve or deny)."""

    action = forms.ChoiceField(choices=BulkAction.choices)
    message = forms.CharField(required=False, max_length=MAX_MESSAGE_CHARS, validators=[multi_line_text])
    scope = forms.ChoiceField(
        choices=[("selected", "selected"), ("matching", "everything matching"), ("inbox", "everything in the inbox")]
    )
    query = forms.CharField(required=False, max_length=2000, validators=[single_line_text])
    confirmed = forms.BooleanField(required=False)

    def __init__(self, *args: Any, viewer: User | AnonymousUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.viewer = viewer

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("scope") == "inbox" and data.get("action") not in (BulkAction.APPROVE, BulkAction.DENY):
            self.add_error("action", "From the approvals inbox, approve or deny.")
        return data

    def executions(self, limit: int) -> tuple[int, list[int]]:
        """How many visible executions the action covers, and the pks of at most `limit` + 1 of them, newest first."""
        data: QueryDict = self.data  # type: ignore[assignment]  # always bound to request.POST
        if self.cleaned_data["scope"] == "matching":
            filters = ExecutionFilterForm(QueryDict(self.cleaned_data["query"]), viewer=self.viewer)
            if not filters.is_valid():
                raise forms.ValidationError(f"The filter is refused: {filters.errors.as_text()}")
            matching = filters.filters().matching()
        elif self.cleaned_data["scope"] == "inbox":
            matching = access.visible_executions(self.viewer).filter(pk__in=awaiting_approval(self.viewer).values("pk"))
        else:
            chosen = [int(pk) for pk in data.getlist("execution") if pk.isdigit() and int(pk) <= MAX_DB_INTEGER]
            matching = access.visible_executions(self.viewer).filter(pk__in=chosen)
        newest_first = matching.order_by("-created_at", "-pk").values_list("pk", flat=True)
        return matching.count(), list(newest_first[: limit + 1])


class AuditFilterForm(forms.Form):
    """Filters of the audit page and its CSV export."""

    thread = forms.ModelChoiceField(queryset=Thread.objects.order_by("title", "thread_id"), required=False)
    user = forms.ModelChoiceField(queryset=get_user_model().objects.order_by("username"), required=False)
    date_from = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args: Any, viewer: User | AnonymousUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Only the viewer's teams: their threads, and the people who could have acted on them.
        self.viewer = viewer
        thread, user = self.fields["thread"], self.fields["user"]
        assert isinstance(thread, forms.ModelChoiceField) and isinstance(user, forms.ModelChoiceField)
        assert thread.queryset is not None
        thread.queryset = access.scoped(thread.queryset, viewer)
        user.queryset = access.visible_users(viewer).order_by("username")

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        for name in ("date_from", "date_to"):
            day = data.get(name)
            if day is not None and not EARLIEST_DAY <= day <= LATEST_DAY:
                self.add_error(name, f"Choose a day between {EARLIEST_DAY} and {LATEST_DAY}.")
        start, end = data.get("date_from"), data.get("date_to")
        if start and end and start > end:
            self.add_error("date_to", "The end day is before the start day.")
        return data

    def filters(self) -> AuditFilters:
        """The valid filters; none when the form is unbound or invalid (its errors say why)."""
        if not self.is_valid():
            return AuditFilters(viewer=self.viewer)
        return AuditFilters(viewer=self.viewer, **self.cleaned_data)
