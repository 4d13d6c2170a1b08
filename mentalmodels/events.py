"""The pages' webhook events (docs/behaviour.md#page-events), each written through the outbox
(``hindsight.webhooks.outbox.emit``) inside the transaction of the change it reports, so a
change that rolls back — a refresh fenced out, say — sends nothing:

- ``mental_model.refreshed``: a refresh stored its result (any outcome that completes the
  operation), with what changed in the one change shape (``mentalmodels.document.diff``);
- ``mental_model.refresh_failed``: a refresh operation failed (its last attempt), with the
  reason and whether the model is now paused;
- ``mental_model.paused``: that failure paused the model's automatic refreshes;
- ``knowledge_page.created`` / ``.updated`` / ``.deleted``: the knowledge base's pages.

Each function is the one call its writer makes; the diff is computed only when a webhook
subscribes to the event.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from hindsight.infra.vocabulary import WebhookEvent
from hindsight.webhooks.outbox import emit
from mentalmodels.document.diff import PageVersion, page_diff
from mentalmodels.models import MentalModel

OperationId = uuid.UUID | str | None


def _model(model: MentalModel) -> dict[str, Any]:
    return {"mental_model_id": model.mental_model_id, "name": model.name}


def mental_model_refreshed(*, before: MentalModel, after: MentalModel, operation_id: OperationId,
                           outcome: str, mode: str) -> None:
    """``after`` is the row as stored; ``before`` the page the refresh started from."""

    def data() -> dict[str, Any]:
        return {**_model(after), "operation_id": str(operation_id), "outcome": outcome,
                "mode": mode, "changes": page_diff(PageVersion(before.content or "", before.document),
                                     PageVersion(after.content or "", after.document))}

    emit(bank_id=after.bank_id, event=WebhookEvent.MENTAL_MODEL_REFRESHED, data=data,
         operation_id=operation_id)


def mental_model_refresh_failed(*, model: MentalModel, operation_id: OperationId, outcome: str,
                                reason: str, error: str, paused: bool) -> None:
    data = {**_model(model), "operation_id": None if operation_id is None else str(operation_id),
            "outcome": outcome, "failure_reason": reason, "error_message": error,
            "paused": paused}
    emit(bank_id=model.bank_id, event=WebhookEvent.MENTAL_MODEL_REFRESH_FAILED, data=data,
         operation_id=operation_id, status="failed")
    if paused:
        emit(bank_id=model.bank_id, event=WebhookEvent.MENTAL_MODEL_PAUSED,
             data={**_model(model), "failure_reason": reason, "error_message": error},
             operation_id=operation_id, status="paused")


def knowledge_page_event(*, event: WebhookEvent, bank_id: str, page_id: str, name: str | None,
                         mental_model_id: str | None, parent_id: str | None = None,
                         changed: Sequence[str] = (), operation_id: OperationId = None) -> None:
    data: dict[str, Any] = {"page_id": page_id, "name": name, "parent_id": parent_id,
                            "mental_model_id": mental_model_id}
    if event == WebhookEvent.KNOWLEDGE_PAGE_UPDATED:
        data["changed"] = list(changed)
    emit(bank_id=bank_id, event=event, data=data, operation_id=operation_id)
