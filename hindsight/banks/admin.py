"""Django admin for banks and memories: browsable and searchable, written only by the services.

Banks are read-only here (the API's PUT/PATCH and ``…/config`` validate what a bank holds);
deleting one goes through ``bank_delete``, which fences the bank's running jobs before the
cascade (without that step a refresh and the cascade can deadlock). Memories are written by
retain, consolidation and curation only (they carry embeddings and the write clock), so the
admin shows them read-only, with the pages whose scope holds each (the ones a change of it makes
stale), and curates them through ``hindsight.banks.curation``: invalidate the selected memories,
restore invalidated ones (docs/behaviour.md#memory-curation). A search matches their text or
context, a tag exactly, or a fact type.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from hindsight.banks.budget import bank_token_budget, bank_tokens_last_24h_subquery
from hindsight.banks.curation import memory_update
from hindsight.banks.hooks import memory_readers
from hindsight.banks.models import Bank, InvalidatedMemoryUnit, MemoryUnit
from hindsight.banks.services import bank_delete
from hindsight.infra.errors import DomainError, NotFound
from hindsight.infra.vocabulary import FACT_TYPES, MemoryState


@admin.register(Bank)
class BankAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "memory_count", "mental_model_count", "token_budget",
                    "tokens_last_24h", "created_at", "updated_at")
    search_fields = ("id", "name", "mission")
    readonly_fields = ("id", "name", "mission", "disposition", "config", "created_at", "updated_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Bank]:
        return super().get_queryset(request).annotate(
            _memory_count=Count("memories", distinct=True),
            _mental_model_count=Count("mental_models", distinct=True),
            _tokens_last_24h=bank_tokens_last_24h_subquery(),
        )

    @admin.display(ordering="_memory_count", description="memories")
    def memory_count(self, bank: Any) -> int:
        return bank._memory_count

    @admin.display(ordering="_mental_model_count", description="mental models")
    def mental_model_count(self, bank: Any) -> int:
        return bank._mental_model_count

    @admin.display(description="token budget (a day)")
    def token_budget(self, bank: Any) -> str:
        budget = bank_token_budget(config=bank.config)
        return "unlimited" if budget is None else f"{budget:,}"

    @admin.display(ordering="_tokens_last_24h", description="tokens (24 h)")
    def tokens_last_24h(self, bank: Any) -> str:
        return f"{bank._tokens_last_24h or 0:,}"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a bank is created by the API (explicitly or by its first write)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, ...]:
        """What the confirmation page lists: counts per bank, not every row (a bank holds
        millions), and no per-row permission check — ``bank_delete`` removes them all."""
        summary: list[str] = []
        totals: dict[str, int] = {}
        for bank in objs:
            counts = {
                "memories": bank.memories.count(),
                "mental models": bank.mental_models.count(),
                "operations": bank.operations.count(),
            }
            for name, n in counts.items():
                totals[name] = totals.get(name, 0) + n
            summary.append(
                f"Bank {bank.id}: " + ", ".join(f"{n} {name}" for name, n in counts.items())
            )
        return summary, {"banks": len(summary), **totals}, set(), []

    def delete_model(self, request: HttpRequest, obj: Bank) -> None:
        bank_delete(bank_id=obj.id)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Bank]) -> None:
        for bank_id in queryset.values_list("id", flat=True):
            try:
                bank_delete(bank_id=bank_id)
            except NotFound:
                pass  # deleted meanwhile


class _MemoryAdmin(admin.ModelAdmin):
    """What the live and the archived memories' admins share: read-only rows (written by the
    services only), a short text, the pages reading the memory."""

    @admin.display(description="text")
    def short_text(self, memory: Any) -> str:
        return memory.text if len(memory.text) <= 80 else memory.text[:77] + "…"

    @admin.display(description="pages reading it (stale after a change)")
    def pages_reading_it(self, memory: Any) -> str:
        return _pages(memory)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a memory leaves with its bank, its document, or a clear of the bank


@admin.register(MemoryUnit)
class MemoryUnitAdmin(_MemoryAdmin):
    list_display = ("short_text", "bank", "fact_type", "tags", "consolidated_at", "updated_at")
    list_filter = ("fact_type", ("consolidated_at", admin.EmptyFieldListFilter), "bank")
    search_fields = ("text", "context", "bank__id", "document_id")
    search_help_text = "Text or context; a tag (exact) or a fact type matches too."
    list_select_related = ("bank",)
    exclude = ("embedding",)
    ordering = ("-updated_at",)
    show_full_result_count = False

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[MemoryUnit],
                           search_term: str) -> tuple[QuerySet[MemoryUnit], bool]:
        results, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip()
        if term:
            # Tags are an array: a term matches a tag exactly (the GIN index answers it).
            extra = Q(tags__contains=[term])
            if term in FACT_TYPES:
                extra |= Q(fact_type=term)
            results = results | queryset.filter(extra)
        return results, may_have_duplicates

    actions = ("invalidate_selected",)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*(f.name for f in MemoryUnit._meta.fields if f.name != "embedding"),
                "pages_reading_it"]

    @admin.action(description="Invalidate the selected memories (their pages go stale)")
    def invalidate_selected(self, request: HttpRequest,
                            queryset: QuerySet[MemoryUnit]) -> None:
        _curate(self, request, list(queryset.values_list("bank_id", "id")),
                MemoryState.INVALIDATED, "invalidated")


def _pages(memory: Any) -> str:
    pages = memory_readers(bank_id=memory.bank_id, tags=list(memory.tags),
                           fact_type=memory.fact_type)
    if not pages:
        return "none"
    return format_html("<ul>{}</ul>", format_html_join(
        "", '<li><a href="{}">{}</a></li>', ((url, label) for label, url in pages)))


def _curate(model_admin: admin.ModelAdmin, request: HttpRequest, rows: Any, state: str,
            done: str) -> None:
    """Each selected memory through the curation service; a refusal is named, the rest go on."""
    changed = 0
    for bank_id, memory_id in rows:
        try:
            memory_update(bank_id=bank_id, memory_id=str(memory_id), edits={}, state=state)
            changed += 1
        except DomainError as exc:
            model_admin.message_user(request, f"{memory_id}: {exc}", messages.WARNING)
    if changed:
        model_admin.message_user(request, f"{changed} memories {done}.", messages.SUCCESS)


@admin.register(InvalidatedMemoryUnit)
class InvalidatedMemoryUnitAdmin(_MemoryAdmin):
    """The curation archive: read-only; the selected memories can be restored."""

    list_display = ("short_text", "bank", "fact_type", "tags", "invalidation_reason",
                    "invalidated_at")
    list_filter = ("fact_type", "bank")
    search_fields = ("text", "context", "bank__id", "document_id", "invalidation_reason")
    list_select_related = ("bank",)
    ordering = ("-invalidated_at",)
    actions = ("restore_selected",)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*(f.name for f in InvalidatedMemoryUnit._meta.fields), "pages_reading_it"]

    @admin.action(description="Restore the selected memories (their pages go stale)")
    def restore_selected(self, request: HttpRequest,
                         queryset: QuerySet[InvalidatedMemoryUnit]) -> None:
        _curate(self, request, list(queryset.values_list("bank_id", "id")), MemoryState.VALID,
                "restored")
