"""Django admin for operations: browse and filter by status/type; cancel, retry, release."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from hindsight.errors import DomainError
from operations.models import Lease, Operation
from operations.services import operation_cancel, operation_release, operation_retry


@admin.register(Operation)
class OperationAdmin(admin.ModelAdmin):
    list_display = ("id", "bank", "operation_type", "mental_model_id", "status", "automatic",
                    "retry_count", "next_retry_at", "created_at", "completed_at")
    list_filter = ("status", "operation_type", "automatic")
    search_fields = ("id", "bank__id", "mental_model_id", "dedupe_key", "error_message")
    ordering = ("-created_at",)
    actions = ("cancel_pending", "retry_failed_or_cancelled", "release_parked")
    readonly_fields = [f.name for f in Operation._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # operations are submitted by the services, never typed in

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # state changes go through the actions (compare-and-set services)

    def _each(self, request: HttpRequest, queryset: QuerySet[Operation], fn: Any,
              verb: str) -> None:
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

    @admin.action(description="Retry selected failed or cancelled operations")
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

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
