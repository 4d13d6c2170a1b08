"""The async retain's operation handler (``POST …/memories`` with ``async: true``).

The retain's inserts and the operation's completion are one transaction guarded by the fence
(``before_commit=job.complete_in_transaction``), so a redelivered or recovered job never
inserts twice: either the first attempt committed both (and the operation is no longer
claimable) or it committed neither. Registered in ``BanksConfig.ready``.
"""

from __future__ import annotations

from hindsight.banks.retaintypes import RetainItem
from hindsight.banks.services import RETAIN_OPERATION, memories_retain
from hindsight.errors import DomainError, Unavailable, UpstreamFailed
from operations.errors import OperationFailure
from operations.jobs import Job


class RetainHandler:
    operation_type = RETAIN_OPERATION

    def run(self, job: Job) -> None:
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
        except (UpstreamFailed, Unavailable):
            raise  # the LLM or the embedder failed: a later attempt may succeed
        except DomainError as exc:
            # Bad input does not get better by retrying.
            raise OperationFailure(f"retain rejected: {exc.detail}", retryable=False) from exc
