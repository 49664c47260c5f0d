"""Django admin (staff only): webhooks, and the delivery log with its "send again" action."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from . import delivery
from .models import EVENT_CHOICES, Webhook, WebhookDelivery


class WebhookForm(forms.ModelForm):
    events = forms.MultipleChoiceField(choices=EVENT_CHOICES, widget=forms.CheckboxSelectMultiple)
    # A webhook address is typed whole; one without a scheme is refused rather than guessed.
    url = forms.URLField(label="URL", max_length=2000, assume_scheme="https", help_text="Where events are POSTed.")

    class Meta:
        model = Webhook
        fields = ["name", "team", "url", "format", "events", "secret", "active"]


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    form = WebhookForm
    list_display = ["name", "team", "url", "format", "active"]
    list_filter = ["team", "format", "active"]
    search_fields = ["name", "url"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ["created_at", "webhook", "event", "subject", "status", "response_code", "attempts", "last_error"]
    list_filter = ["status", "event", "webhook"]
    readonly_fields = [
        "webhook",
        "event",
        "subject",
        "delivery_id",
        "status",
        "attempts",
        "response_code",
        "last_error",
        "next_attempt_at",
        "last_attempt_at",
        "created_at",
        "delivered_at",
        "body",
    ]
    actions = ["send_again"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: WebhookDelivery | None = None) -> bool:
        return False

    def has_send_again_permission(self, request: HttpRequest) -> bool:
        # Sending is an action on the webhook, whose log is otherwise read-only.
        return request.user.has_perm("alerts.change_webhook")

    @admin.action(description="Send again", permissions=["send_again"])
    def send_again(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        count = delivery.send_again(queryset)
        self.message_user(request, f"{count} deliveries queued to be sent again.", messages.SUCCESS)
