"""Django admin for operations and leases: read-only; state changes only through the services.

Operations: status, type, model, attempts, ``next_retry_at`` (a parked one says so in red),
error; filters by status, parked, type and bank; actions cancel, retry, release, each a
compare-and-set service (``operations.actions``, ``operations.queue``). No add, edit or delete:
rows are written by the engine, and a row removed under a running job would lose its record.

Leases: read-only and never deletable — a deleted lease restarts its fence at 1, so a fence an
old job still holds could match again and let a superseded write through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from hindsight.infra.db import ClockTimestamp
from hindsight.infra.errors import DomainError
from operations.actions import operation_cancel, operation_retry
from operations.models import PENDING, Lease, Operation
from operations.queue import operation_release


class ParkedFilter(admin.SimpleListFilter):
    title = "parked"
    parameter_name = "parked"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Parked (pending, not before next_retry_at)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Operation]) -> QuerySet[Operation]:
        if self.value() == "yes":
            return queryset.filter(status=PENDING, next_retry_at__gt=ClockTimestamp())
        return queryset


@admin.register(Operation)
class OperationAdmin(admin.ModelAdmin):
    list_display = ("short_id", "state", "operation_type", "mental_model_id", "bank",
                    "attempts", "retry_at", "automatic", "short_error", "created_at")
    list_filter = ("status", ParkedFilter, "operation_type", "bank", "automatic")
    search_fields = ("id", "bank__id", "mental_model_id", "dedupe_key", "error_message")
    ordering = ("-created_at",)
    actions = ("cancel_pending", "retry_failed_or_cancelled", "release_parked")
    readonly_fields = [f.name for f in Operation._meta.fields]
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # operations are submitted by the services, never typed in

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # state changes go through the actions (compare-and-set services)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the engine's record; the API's DELETE removes a finished one

    @admin.display(description="id", ordering="id")
    def short_id(self, op: Operation) -> str:
        return str(op.id)[:8]

    @admin.display(description="status", ordering="status")
    def state(self, op: Operation) -> str:
        if op.is_parked:
            return mark_safe('<strong class="op-parked" style="color:#ba2121">parked</strong>')
        return op.status

    @admin.display(description="attempts", ordering="retry_count")
    def attempts(self, op: Operation) -> int:
        # retry_count counts the failed attempts before the last claim; a claimed operation
        # that is no longer pending has made one more (fence 0: never claimed).
        return op.retry_count + (1 if op.status != PENDING and op.fence else 0)

    @admin.display(description="next retry at", ordering="next_retry_at")
    def retry_at(self, op: Operation) -> str:
        if op.next_retry_at is None:
            return "—"
        if op.is_parked:
            return format_html('<strong class="op-parked-until" style="color:#ba2121">{}</strong>',
                               f"{op.next_retry_at:%Y-%m-%d %H:%M:%S}")
        return f"{op.next_retry_at:%Y-%m-%d %H:%M:%S}"

    @admin.display(description="error")
    def short_error(self, op: Operation) -> str:
        text = op.error_message or ""
        return text if len(text) <= 100 else text[:97] + "…"

    def _each(self, request: HttpRequest, queryset: QuerySet[Operation],
              fn: Callable[[Operation], Any], verb: str) -> None:
        done = 0
        for op in queryset:
            try:
                fn(op)
                done += 1
            except DomainError as exc:
                self.message_user(request, f"{op.id}: {exc.detail}", messages.WARNING)
        self.message_user(request, f"{verb} {done} operation(s)")

    @admin.action(description="Cancel selected pending operations")
    def cancel_pending(self, request: HttpRequest, queryset: QuerySet[Operation]) -> None:
        self._each(request, queryset,
                   lambda op: operation_cancel(bank_id=op.bank_id, operation_id=op.id),
                   "Cancelled")

    @admin.action(description="Retry selected failed or cancelled operations (a parked one runs now)")
    def retry_failed_or_cancelled(self, request: HttpRequest,
                                  queryset: QuerySet[Operation]) -> None:
        self._each(request, queryset,
                   lambda op: operation_retry(bank_id=op.bank_id, operation_id=op.id),
                   "Re-queued")

    @admin.action(description="Release selected parked operations (run now)")
    def release_parked(self, request: HttpRequest, queryset: QuerySet[Operation]) -> None:
        self._each(request, queryset, lambda op: operation_release(operation_id=op.id),
                   "Released")


@admin.register(Lease)
class LeaseAdmin(admin.ModelAdmin):
    list_display = ("key", "fence", "holder", "heartbeat_at")
    search_fields = ("key",)
    readonly_fields = ("key", "fence", "holder", "heartbeat_at")
    actions = None

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a deleted lease would restart its fence (module docstring)
