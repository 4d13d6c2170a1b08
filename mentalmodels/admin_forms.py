"""The admin's create and edit forms for mental models.

A form only parses: it turns its fields into the API's request body and checks that with the
API's own request serializers (``mentalmodels.api.serializers``'s
``CreateMentalModelRequestSerializer`` / ``UpdateMentalModelRequestSerializer``: the id rule,
the trigger rules of ``mentalmodels.triggers``, the token range), so an admin edit is refused
for exactly what a PATCH is refused for, with the message on the field it names. Writing is the
admin's, through ``mental_model_create`` / ``mental_model_update``.

The forms take no model fields (``Meta.fields = ()``, every model field excluded): Django never
copies their values onto the row nor validates the row itself, so nothing bypasses the service.
"""

from __future__ import annotations

from typing import Any

from django import forms

from hindsight.banks.models import Bank
from hindsight.infra.errors import FieldErrors
from mentalmodels.api.serializers import (
    CreateMentalModelRequestSerializer,
    UpdateMentalModelRequestSerializer,
)
from mentalmodels.models import MentalModel
from mentalmodels.triggers import trigger_fill

# The API field a problem's ``loc`` names → the form field that shows it.
_FIELD_OF = {"id": "mental_model_id"}


def _tags_from_text(value: str) -> list[str]:
    return list(dict.fromkeys(t.strip() for t in value.replace("\n", ",").split(",") if t.strip()))


class _MentalModelForm(forms.ModelForm):
    name = forms.CharField(strip=False)
    source_query = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), strip=False)
    tags = forms.CharField(required=False, help_text="Comma-separated.")
    max_tokens = forms.IntegerField(initial=2048)
    trigger = forms.JSONField(
        required=False, initial=dict,
        widget=forms.Textarea(attrs={"rows": 12, "cols": 80}),
        help_text="The trigger object of the API (mode, refresh_cron, refresh_after_consolidation, "
                  "tags_match, tag_groups, fact_types, …); keys left out keep their value.",
    )

    class Meta:
        model = MentalModel
        fields: tuple[str, ...] = ()
        # ``fields`` already exposes none; ``exclude`` also keeps every column out of the row's
        # own validation (Django would check the unsaved row against the form's values).
        exclude = [f.name for f in MentalModel._meta.fields]  # noqa: DJ006

    #: After ``is_valid()``: the keyword arguments for the service.
    service_kwargs: dict[str, Any]

    def _body(self) -> dict[str, Any]:
        data = self.cleaned_data
        body: dict[str, Any] = {
            "name": data.get("name"),
            "source_query": data.get("source_query"),
            "tags": _tags_from_text(data.get("tags") or ""),
            "max_tokens": data.get("max_tokens"),
        }
        if data.get("trigger") is not None:
            body["trigger"] = data["trigger"]
        return body

    def _parse(self, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or self.cleaned_data
        if self.errors:
            return cleaned
        try:
            self.service_kwargs = self._parse(self._body())
        except FieldErrors as exc:
            self.add_problems(exc.errors)
        return cleaned

    def add_problems(self, problems: list[dict[str, object]]) -> None:
        """Each problem on the field its ``loc`` names (``["body", "trigger", "refresh_cron"]``
        → the trigger field, saying ``trigger.refresh_cron: …``)."""
        for problem in problems:
            loc = [str(part) for part in problem["loc"]]  # type: ignore[attr-defined]
            api_field = loc[1] if len(loc) > 1 else ""
            field = _FIELD_OF.get(api_field, api_field)
            inner = ".".join(loc[1:])
            message = str(problem["msg"])
            if field not in self.fields:
                self.add_error(None, f"{inner}: {message}")
            elif len(loc) > 2:
                self.add_error(field, f"{inner}: {message}")
            else:
                self.add_error(field, message)


class MentalModelAddForm(_MentalModelForm):
    bank = forms.ModelChoiceField(queryset=Bank.objects.order_by("id"))
    mental_model_id = forms.CharField(
        required=False, label="Id",
        help_text="Lowercase letters, digits and hyphens; left blank, one is generated.",
    )

    def _body(self) -> dict[str, Any]:
        body = super()._body()
        if self.cleaned_data.get("mental_model_id"):
            body["id"] = self.cleaned_data["mental_model_id"]
        return body

    def _parse(self, body: dict[str, Any]) -> dict[str, Any]:
        request = CreateMentalModelRequestSerializer
        parsed = request.service_kwargs(request.parse(body))
        return {"bank_id": self.cleaned_data["bank"].id, **parsed}


class MentalModelChangeForm(_MentalModelForm):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        model = self.instance
        if model.pk is not None and not self.is_bound:
            self.initial.update({
                "name": model.name,
                "source_query": model.source_query,
                "tags": ", ".join(model.tags),
                "max_tokens": model.max_tokens,
                "trigger": trigger_fill(model.trigger or {}),
            })

    def _parse(self, body: dict[str, Any]) -> dict[str, Any]:
        request = UpdateMentalModelRequestSerializer
        parsed = request.service_kwargs(request.parse(body, stored_trigger=self.instance.trigger))
        return {
            "bank_id": self.instance.bank_id,
            "mental_model_id": self.instance.mental_model_id,
            **parsed,
        }
