"""Directives in the Django admin: the list (by bank, priority, state), the add and change forms
and the activate / deactivate actions, every write through the services (so each change stamps
the pages it makes stale, as through the API)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from mentalmodels.directives.api.serializers import INT32
from mentalmodels.directives.models import Directive
from mentalmodels.directives.services import (
    directive_create,
    directive_delete,
    directive_update,
)


class DirectiveForm(forms.ModelForm):
    tags_text = forms.CharField(
        label="Tags", required=False,
        help_text="Comma-separated. None: the directive applies to every request of the bank.")
    priority = forms.IntegerField(min_value=INT32[0], max_value=INT32[1], initial=0,
                                  help_text="Higher comes first.")

    class Meta:
        model = Directive
        fields = ("bank", "name", "content", "priority", "is_active")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.instance._state.adding:
            self.fields["tags_text"].initial = ", ".join(self.instance.tags)
            self.fields["bank"].disabled = True

    def clean_name(self) -> str:
        return _not_blank(self.cleaned_data["name"], "name")

    def clean_content(self) -> str:
        return _not_blank(self.cleaned_data["content"], "content")

    def clean_tags_text(self) -> list[str]:
        raw = self.cleaned_data.get("tags_text") or ""
        return list(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))


def _not_blank(value: str, field: str) -> str:
    if not value.strip():
        raise forms.ValidationError(f"A directive's {field} cannot be blank.")
    return value


@admin.register(Directive)
class DirectiveAdmin(admin.ModelAdmin):
    form = DirectiveForm
    list_display = ("name", "bank", "priority", "is_active", "tag_list", "updated_at")
    list_filter = ("is_active", "bank")
    search_fields = ("name", "content", "bank__id")
    ordering = ("bank", "-priority", "-created_at")
    readonly_fields = ("id", "created_at", "updated_at")
    actions = ("activate", "deactivate")

    @admin.display(description="tags")
    def tag_list(self, directive: Directive) -> str:
        return ", ".join(directive.tags) or "(every request)"

    def save_model(self, request: HttpRequest, obj: Directive, form: Any, change: bool) -> None:
        fields = {"name": form.cleaned_data["name"], "content": form.cleaned_data["content"],
                  "priority": form.cleaned_data["priority"],
                  "is_active": form.cleaned_data["is_active"],
                  "tags": form.cleaned_data["tags_text"]}
        if change:
            saved = directive_update(bank_id=obj.bank_id, directive_id=str(obj.pk), **fields)
        else:
            saved = directive_create(bank_id=form.cleaned_data["bank"].id, **fields)
        # The admin's messages and redirect read the saved row.
        obj.pk, obj.created_at, obj.updated_at = saved.pk, saved.created_at, saved.updated_at

    def delete_model(self, request: HttpRequest, obj: Directive) -> None:
        directive_delete(bank_id=obj.bank_id, directive_id=str(obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Directive]) -> None:
        for bank_id, directive_id in queryset.values_list("bank_id", "id"):
            directive_delete(bank_id=bank_id, directive_id=str(directive_id))

    def _set_active(self, request: HttpRequest, queryset: QuerySet[Directive],
                    active: bool) -> None:
        for bank_id, directive_id in queryset.values_list("bank_id", "id"):
            directive_update(bank_id=bank_id, directive_id=str(directive_id), is_active=active)
        self.message_user(request, f"{queryset.count()} directive(s) "
                                   f"{'activated' if active else 'deactivated'}.",
                          messages.SUCCESS)

    @admin.action(description="Activate the selected directives")
    def activate(self, request: HttpRequest, queryset: QuerySet[Directive]) -> None:
        self._set_active(request, queryset, True)

    @admin.action(description="Deactivate the selected directives")
    def deactivate(self, request: HttpRequest, queryset: QuerySet[Directive]) -> None:
        self._set_active(request, queryset, False)
