"""The banks' webhook events, upstream's payloads (docs/behaviour.md#webhooks), written through
the outbox in the transaction of the work they report:

- ``retain.completed``: one per item retained, with its ``document_id``, ``tags`` and, when it
  names a document, ``memory_unit_count`` (the document's memories after this retain); all of
  one retain share an ``operation_id`` (the async retain's operation, else one made up);
- ``consolidation.completed``: a consolidation operation ended, ``status`` completed (with the
  observations created, updated and deleted) or failed (with the error).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from hindsight.banks.models import MemoryUnit
from hindsight.banks.retaintypes import RetainItem
from hindsight.infra.vocabulary import FactType, WebhookEvent
from hindsight.webhooks.outbox import emit, subscribed


def _retain_data(bank_id: str, item: RetainItem) -> dict[str, Any]:
    data: dict[str, Any] = {"document_id": item.document_id, "tags": list(item.tags)}
    if item.document_id:
        data["memory_unit_count"] = MemoryUnit.objects.filter(
            bank_id=bank_id, document_id=item.document_id,
        ).exclude(fact_type=FactType.OBSERVATION).count()
    return {k: v for k, v in data.items() if v is not None}


def retain_completed(*, bank_id: str, items: Sequence[RetainItem],
                     operation_id: str | None) -> None:
    if not subscribed(bank_id=bank_id, event=WebhookEvent.RETAIN_COMPLETED):
        return  # one query for a batch nobody listens to, not one per item
    operation = operation_id or uuid.uuid4().hex
    for item in items:
        emit(bank_id=bank_id, event=WebhookEvent.RETAIN_COMPLETED, operation_id=operation,
             data=lambda item=item: _retain_data(bank_id, item))  # type: ignore[misc]


def consolidation_completed(*, bank_id: str, operation_id: str, counts: dict[str, int] | None,
                            error: str | None = None) -> None:
    data: dict[str, Any] = dict(counts or {})
    if error is not None:
        data["error_message"] = error
    emit(bank_id=bank_id, event=WebhookEvent.CONSOLIDATION_COMPLETED, operation_id=operation_id,
         status="failed" if error is not None else "completed", data=data)
