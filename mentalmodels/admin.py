"""Django admin for mental models (SPEC section 7, basic): browse, search, filter, refresh,
clear, and read the history with a diff between versions."""

from __future__ import annotations

import difflib

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from hindsight.errors import DomainError
from mentalmodels import services
from mentalmodels.api.preview import preview_diff
from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.pipeline import refresh_dry_run
from mentalmodels.staleness import stale_flags


class _StaleChangeList(ChangeList):
    """Computes the page's staleness flags together (constant queries), like the API list."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        flags = stale_flags(self.result_list)
        for model in self.result_list:
            model._is_stale = flags[model.uid]


class HistoryInline(admin.TabularInline):
    model = MentalModelHistory
    extra = 0
    can_delete = False
    fields = ("kind", "changed_at", "reason", "operation_id", "diff_from_previous")
    readonly_fields = fields
    ordering = ("-changed_at",)

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.display(description="change")
    def diff_from_previous(self, entry: MentalModelHistory) -> str:
        if entry.kind != "version":
            return entry.exception or ""
        newer = (
            MentalModelHistory.objects.filter(
                model_id=entry.model_id, kind="version", changed_at__gt=entry.changed_at
            )
            .order_by("changed_at")
            .values_list("previous_content", flat=True)
            .first()
        )
        after = newer if newer is not None else entry.model.content
        diff = "".join(
            difflib.unified_diff(
                (entry.previous_content or "").splitlines(keepends=True),
                (after or "").splitlines(keepends=True),
                fromfile="before",
                tofile="after",
            )
        )
        return format_html("<pre style='white-space: pre-wrap'>{}</pre>", diff)


@admin.register(MentalModel)
class MentalModelAdmin(admin.ModelAdmin):
    list_display = (
        "mental_model_id", "bank", "name", "tags", "stale", "last_refreshed_at",
        "last_refresh_failed_at",
    )
    list_filter = ("bank", ("last_refresh_failed_at", admin.EmptyFieldListFilter))
    search_fields = ("mental_model_id", "name", "source_query", "content")
    readonly_fields = (
        "content", "reflect_response", "last_refreshed_at", "last_memory_seen_at",
        "last_refresh_failed_at", "last_full_refreshed_at", "created_at", "updated_at",
        # Set by a refresh that found no LLM configured; cleared when its refresh is queued.
        "awaiting_llm_since",
    )
    exclude = ("embedding", "document")
    inlines = [HistoryInline]
    actions = ["refresh", "clear", "dry_run"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[MentalModel]:
        return super().get_queryset(request).defer("embedding")

    def get_changelist(self, request: HttpRequest, **kwargs: object) -> type[ChangeList]:
        return _StaleChangeList

    @admin.display(boolean=True, description="stale")
    def stale(self, model: MentalModel) -> bool:
        flag = getattr(model, "_is_stale", None)
        return stale_flags([model])[model.uid] if flag is None else flag

    @admin.action(description="Refresh the selected mental models")
    def refresh(self, request: HttpRequest, queryset: QuerySet[MentalModel]) -> None:
        for model in queryset:
            services.mental_model_refresh_request(
                bank_id=model.bank_id, mental_model_id=model.mental_model_id
            )
        messages.info(request, f"Queued {queryset.count()} refresh(es).")

    @admin.action(description="Clear the selected mental models")
    def clear(self, request: HttpRequest, queryset: QuerySet[MentalModel]) -> None:
        for model in queryset:
            services.mental_model_clear(bank_id=model.bank_id, mental_model_id=model.mental_model_id)
        messages.info(request, f"Cleared {queryset.count()} mental model(s).")

    @admin.action(description="Dry-run a refresh of the selected mental model (writes nothing)")
    def dry_run(self, request: HttpRequest, queryset: QuerySet[MentalModel]) -> None:
        for model in queryset[:5]:  # synchronous LLM work: keep the request bounded
            try:
                preview = refresh_dry_run(bank_id=model.bank_id, mental_model_id=model.mental_model_id)
            except DomainError as exc:
                messages.error(request, f"{model.mental_model_id}: {exc.detail}")
                continue
            messages.info(
                request,
                f"{model.mental_model_id}: {preview.outcome.outcome}, would persist: "
                f"{preview.would_persist}; {len(preview_diff(preview).splitlines())} diff lines; "
                f"warnings: {'; '.join(preview.warnings) or 'none'}",
            )
