"""Built-in handlers: async retain (``POST …/memories`` with ``async: true``).

The retain's inserts and the operation's completion are one transaction guarded by the fence
(``before_commit=job.complete_in_transaction``), so a redelivered or recovered job never
inserts twice: either the first attempt committed both (and the operation is no longer
claimable) or it committed neither.
"""

from __future__ import annotations

from typing import Any

from operations.errors import OperationFailure
from operations.jobs import Job
from operations.registry import register
from operations.services import operation_submit

RETAIN = "retain"


class RetainHandler:
    operation_type = RETAIN

    def run(self, job: Job) -> None:
        from hindsight.banks.retaintypes import RetainItem
        from hindsight.banks.services import memories_retain
        from hindsight.errors import DomainError

        try:
            items = [RetainItem.from_json(item) for item in job.payload.get("items", [])]
        except (TypeError, ValueError) as exc:
            # A payload that does not decode will not decode on the next attempt either.
            raise OperationFailure(f"retain payload unreadable: {exc}", retryable=False) from exc
        job.result_metadata = {**job.result_metadata, "items_count": len(items)}
        try:
            memories_retain(
                bank_id=job.bank_id,
                items=items,
                document_tags=job.payload.get("document_tags") or None,
                before_commit=job.complete_in_transaction,
            )
        except DomainError as exc:
            # Bad input does not get better by retrying.
            raise OperationFailure(f"retain rejected: {exc.detail}", retryable=False) from exc


register(RetainHandler)


def retain_submit(
    *,
    bank_id: str,
    items: list[dict[str, Any]],
    document_tags: list[str] | None = None,
    operation_id: str | None = None,
) -> str:
    """Queue an async retain (registered with ``hindsight.banks.services``); its id."""
    result = operation_submit(
        bank_id=bank_id,
        operation_type=RETAIN,
        payload={"items": items, "document_tags": document_tags or []},
        operation_id=operation_id,
    )
    return str(result.operation.id)


def _register_with_banks() -> None:
    try:
        from hindsight.banks.services import retain_async_register
    except ImportError:  # the banks service predates async retain
        return
    retain_async_register(retain_submit)


_register_with_banks()
