"""API tokens in the admin: created for a user, the secret shown once on the next page, revocable."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.defaultfilters import pluralize

from .models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "hint", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__username"]
    fields = ["user", "name", "hint", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["hint", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> list[str]:
        # A token is never re-pointed at another user or renamed into a different purpose.
        return [*self.readonly_fields, "user", "name"] if obj is not None else list(self.readonly_fields)

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            return
        secret = obj.issue()
        super().save_model(request, obj, form, change)
        messages.warning(
            request,
            f"The token for {obj.user} is {secret} — copy it now: it is stored only as a hash and will not be "
            "shown again. Send it as 'Authorization: Bearer <token>'.",
        )

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        count = 0
        for token in queryset:
            token.revoke()
            count += 1
        self.message_user(request, f"Revoked {count} token{pluralize(count)}.")

    def has_delete_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        # Revoked tokens stay as the record of who could call the endpoint.
        return False
