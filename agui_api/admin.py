"""API tokens in the admin: issued for oneself (by a superuser, for anyone), the secret shown once on the page that
answers the form and nowhere else, revocable by those who may change tokens."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import ForeignKey, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.defaultfilters import pluralize
from django.template.response import TemplateResponse

from runs.models import Team

from . import issuing
from .models import ApiToken


class ApiTokenForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ["user", "name", "scope", "team", "expires_at"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        user = cleaned.get("user")
        if user is not None and (problem := issuing.team_problem(user, cleaned.get("team"))):
            self.add_error("team", problem)
        return cleaned

    def clean_expires_at(self) -> datetime:
        expires_at: datetime = self.cleaned_data["expires_at"]
        if problem := issuing.expiry_problem(expires_at):
            raise forms.ValidationError(problem)
        return expires_at


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    form = ApiTokenForm
    list_display = [
        "name",
        "user",
        "hint",
        "scope",
        "team",
        "state",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["scope", "team", "revoked_at"]
    search_fields = ["name", "user__username"]
    fields = ["user", "name", "scope", "team", "expires_at", "hint", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["hint", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> list[str]:
        # A token is never re-pointed at another user, renamed into a different purpose, widened or prolonged:
        # that is a new token.
        issued = ["user", "name", "scope", "team", "expires_at"]
        return [*self.readonly_fields, *issued] if obj is not None else list(self.readonly_fields)

    def formfield_for_foreignkey(self, db_field: ForeignKey[Any, Any], request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "user" and not request.user.is_superuser:
            assert request.user.is_authenticated, "the admin lets only staff in"
            # A token acts as its owner, so others' tokens are a superuser's to issue; `issuing.issue` enforces it.
            kwargs["queryset"] = get_user_model()._default_manager.filter(pk=request.user.pk)
            kwargs["initial"] = request.user.pk
            kwargs["empty_label"] = None
        if db_field.name == "team" and not request.user.is_superuser:
            assert request.user.is_authenticated, "the admin lets only staff in"
            # Narrowed only to a team of one's own; the owner's membership is checked again on issue.
            kwargs["queryset"] = Team.objects.filter(memberships__user=request.user)
            kwargs["empty_label"] = "every team of the user"
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @admin.display(description="state")
    def state(self, token: ApiToken) -> str:
        if token.revoked_at is not None:
            return "revoked"
        return "expired" if token.expired else "active"

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            return
        assert request.user.is_authenticated, "the admin lets only staff in"
        # Carried on the object to `response_add`, the one page that shows it (an attribute the model does not have).
        obj.issued_secret = issuing.issue(obj, issuer=request.user)  # type: ignore[attr-defined]

    def response_add(self, request: HttpRequest, obj: ApiToken, post_url_continue: str | None = None) -> HttpResponse:
        """The secret on the answer to the form itself (admin pages are sent `no-cache`), never in a message: the
        messages cookie is signed, not encrypted."""
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "API token issued",
            "token": obj,
            "secret": obj.issued_secret,  # type: ignore[attr-defined]  # set by `save_model` just before
        }
        return TemplateResponse(request, "admin/agui_api/apitoken/issued.html", context)

    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        count = 0
        for token in queryset:
            token.revoke()
            count += 1
        self.message_user(request, f"Revoked {count} token{pluralize(count)}.")

    def has_delete_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        # Revoked tokens stay as the record of who could call the endpoint.
        return False
