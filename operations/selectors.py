"""Reads of operations: one, a filtered page, and counts per status (bank stats)."""

from __future__ import annotations

import uuid

from django.db.models import Count

from operations.models import STATUSES, Operation


def operation_get(*, bank_id: str, operation_id: uuid.UUID | str) -> Operation | None:
    """The bank's operation, or None (another bank's operation is unknown here)."""
    return Operation.objects.filter(bank_id=bank_id, id=operation_id).first()


def operations_bank_exists(*, bank_id: str) -> bool:
    """Whether the bank operations are scoped to exists (the row ``Operation.bank`` refers to).

    The engine knows banks only as its foreign key's target, never the banks app itself.
    """
    bank_model = Operation._meta.get_field("bank").related_model
    return bank_model._default_manager.filter(pk=bank_id).exists()


def operations_list(
    *,
    bank_id: str,
    status: str | None = None,
    operation_type: str | None = None,
    limit: int = 20,
    offset: int = 0,
) -> tuple[int, list[Operation]]:
    """``(total, page)``, most recent first."""
    qs = Operation.objects.filter(bank_id=bank_id)
    if status:
        qs = qs.filter(status=status)
    if operation_type:
        qs = qs.filter(operation_type=operation_type)
    total = qs.count()
    page = list(qs.order_by("-created_at", "-id")[offset : offset + limit])
    return total, page


def operation_counts(*, bank_id: str) -> dict[str, int]:
    """Operations of the bank per status; every status present (0 when none)."""
    counts = dict.fromkeys(STATUSES, 0)
    rows = (
        Operation.objects.filter(bank_id=bank_id)
        .values("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    for status, n in rows:
        counts[status] = n
    return counts
