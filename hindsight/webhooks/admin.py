"""Webhooks in the Django admin: the list (bank, URL, events, enabled, the run of failed
deliveries and why one was disabled), a webhook's deliveries beneath it (status, attempts, last
answer, next retry), enable / disable actions. Every write goes through the services, so the
SSRF guard checks a URL typed here as one sent to the API; the secret is never shown."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from hindsight.infra.vocabulary import WEBHOOK_EVENTS
from hindsight.webhooks.guard import DestinationRefused, url_check
from hindsight.webhooks.models import Webhook, WebhookDelivery
from hindsight.webhooks.services import webhook_create, webhook_delete, webhook_update


class WebhookForm(forms.ModelForm):
    event_types = forms.MultipleChoiceField(choices=[(e, e) for e in WEBHOOK_EVENTS],
                                            widget=forms.CheckboxSelectMultiple)
    new_secret = forms.CharField(
        label="Secret", required=False, widget=forms.PasswordInput,
        help_text="Signs each delivery. Left empty, the stored secret stays.")

    class Meta:
        model = Webhook
        fields = ("bank", "url", "event_types", "enabled")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.instance._state.adding:
            self.fields["bank"].disabled = True

    def clean_url(self) -> str:
        url: str = self.cleaned_data["url"]
        try:
            url_check(url)
        except DestinationRefused as exc:
            raise forms.ValidationError(str(exc)) from None
        return url


class DeliveryInline(admin.TabularInline):
    model = WebhookDelivery
    fk_name = "webhook"
    extra = 0
    can_delete = False
    ordering = ("-created_at",)
    fields = readonly_fields = ("event_type", "event_id", "status", "attempts",
                                "last_response_status", "last_error", "next_retry_at",
                                "last_attempt_at", "created_at")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[WebhookDelivery]:
        return super().get_queryset(request).defer("payload")


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    form = WebhookForm
    list_display = ("url", "bank", "events", "enabled", "consecutive_failures",
                    "disabled_reason", "updated_at")
    list_filter = ("enabled", "bank")
    search_fields = ("url", "bank__id")
    readonly_fields = ("secret_set", "consecutive_failures", "disabled_reason", "created_at",
                       "updated_at")
    inlines = [DeliveryInline]
    actions = ["enable", "disable"]

    @admin.display(description="events")
    def events(self, obj: Webhook) -> str:
        return ", ".join(obj.event_types)

    @admin.display(description="secret", boolean=True)
    def secret_set(self, obj: Webhook) -> bool:
        return bool(obj.secret)

    def save_model(self, request: HttpRequest, obj: Webhook, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            changes: dict[str, Any] = {"url": data["url"], "event_types": data["event_types"],
                                       "enabled": data["enabled"]}
            if data.get("new_secret"):
                changes["secret"] = data["new_secret"]
            saved = webhook_update(bank_id=obj.bank_id, webhook_id=str(obj.pk), changes=changes)
        else:
            saved = webhook_create(bank_id=data["bank"].pk, url=data["url"],
                                   secret=data.get("new_secret") or None,
                                   event_types=data["event_types"], enabled=data["enabled"])
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: Webhook) -> None:
        webhook_delete(bank_id=obj.bank_id, webhook_id=str(obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Webhook]) -> None:
        for hook in queryset:
            self.delete_model(request, hook)

    @admin.action(description="Enable the selected webhooks")
    def enable(self, request: HttpRequest, queryset: QuerySet[Webhook]) -> None:
        self._set_enabled(request, queryset, True)

    @admin.action(description="Disable the selected webhooks")
    def disable(self, request: HttpRequest, queryset: QuerySet[Webhook]) -> None:
        self._set_enabled(request, queryset, False)

    def _set_enabled(self, request: HttpRequest, queryset: QuerySet[Webhook], on: bool) -> None:
        for hook in queryset:
            webhook_update(bank_id=hook.bank_id, webhook_id=str(hook.pk), changes={"enabled": on})
        self.message_user(request, f"{queryset.count()} webhook(s) {'enabled' if on else 'disabled'}.",
                          messages.SUCCESS)
