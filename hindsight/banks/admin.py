"""Django admin for banks and memories: browsable, searchable, read-mostly.

Memories are written by retain and consolidation only (they carry embeddings and the write
clock), so the admin shows them read-only; a bank's name, mission and config overrides can be
edited here.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from hindsight.banks.models import Bank, MemoryUnit


@admin.register(Bank)
class BankAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "memory_count", "created_at", "updated_at")
    search_fields = ("id", "name", "mission")
    readonly_fields = ("created_at", "updated_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Bank]:
        return super().get_queryset(request).annotate(_memory_count=Count("memories"))

    @admin.display(ordering="_memory_count", description="memories")
    def memory_count(self, bank: Any) -> int:
        return bank._memory_count


@admin.register(MemoryUnit)
class MemoryUnitAdmin(admin.ModelAdmin):
    list_display = ("short_text", "bank", "fact_type", "tags", "consolidated_at", "updated_at")
    list_filter = ("fact_type", ("consolidated_at", admin.EmptyFieldListFilter))
    search_fields = ("text", "context", "bank__id", "document_id")
    list_select_related = ("bank",)
    exclude = ("embedding",)
    ordering = ("-updated_at",)
    show_full_result_count = False

    @admin.display(description="text")
    def short_text(self, memory: MemoryUnit) -> str:
        return memory.text if len(memory.text) <= 80 else memory.text[:77] + "…"

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in MemoryUnit._meta.fields if f.name != "embedding"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

