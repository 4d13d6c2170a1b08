"""``refresh_run`` for tests that drive one refresh attempt directly: the fenced path a worker
takes (a claimed refresh operation and its ``Job``, the write inside ``job.finishing()``), without
the engine around it — what the attempt raises comes straight to the test, and nothing records
it as a failed attempt: one that did not complete ends ``cancelled`` with the record it wrote on
its job (``last_operation`` reads it), and the next call can claim the key."""

from __future__ import annotations

from mentalmodels.refresh import pipeline
from mentalmodels.refresh.records import MentalModelOperationType, Report
from mentalmodels.services import refresh_dedupe_key
from operations.jobs import Job
from operations.leases import operation_claim, operation_supersede
from operations.models import Operation
from tests.factories import make_operation


def refresh_run(
    *, bank_id: str, mental_model_id: str, mode: str | None = None, automatic: bool = False
) -> Report:
    op = make_operation(
        bank_id=bank_id, operation_type=MentalModelOperationType.REFRESH,
        mental_model_id=mental_model_id, automatic=automatic,
        dedupe_key=refresh_dedupe_key(bank_id=bank_id, mental_model_id=mental_model_id),
        payload={"mode": mode} if mode else {},
    )
    claimed = operation_claim(operation_id=op.id, holder="test")
    assert isinstance(claimed, Operation), claimed
    job = Job(claimed, fence=claimed.fence, key=claimed.lease_key)
    try:
        return pipeline.refresh_run(job=job)
    finally:
        if operation_supersede(operation_id=op.id, fence=job.fence, message="test: not completed"):
            details, result_metadata = job.record()
            Operation.objects.filter(id=op.id).update(details=details,
                                                      result_metadata=result_metadata)


def last_operation(*, bank_id: str, mental_model_id: str) -> Operation:
    """The operation of the latest ``refresh_run`` of the model."""
    return Operation.objects.filter(bank_id=bank_id, mental_model_id=mental_model_id).latest(
        "created_at")
