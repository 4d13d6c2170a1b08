"""The banks app's operation handlers: async retain and consolidation. Registered in
``BanksConfig.ready``.

Async retain (``POST …/memories`` with ``async: true``): the inserts and the operation's
completion are one transaction guarded by the fence (``before_commit=job.complete_in_transaction``),
so a redelivered or recovered job never inserts twice: either the first attempt committed both
(and the operation is no longer claimable) or it committed neither.

Consolidation: ``hindsight.banks.consolidation.consolidation_run``.

Every job's LLM requests are logged under its bank and operation id, and counted in its
``result_metadata["llm"]`` (``Job.llm_accounting``).
"""

from __future__ import annotations

from django.db import transaction

from hindsight.banks.budget import budget_hold
from hindsight.banks.consolidation import Touched, consolidation_run
from hindsight.banks.events import consolidation_completed
from hindsight.banks.extraction import uses_llm
from hindsight.banks.hooks import ConsolidationCompleted, consolidation_completed_notify
from hindsight.banks.operation_types import BankOperationType
from hindsight.banks.retaintypes import RetainItem
from hindsight.banks.services import memories_retain
from hindsight.infra import metrics
from hindsight.infra.errors import DomainError, LLMNotConfigured, Unavailable, UpstreamFailed
from operations.errors import OperationFailure
from operations.jobs import Job
from operations.models import FAILED, Operation
from operations.registry import Hold, Pending


class RetainHandler:
    operation_type = BankOperationType.RETAIN
    cpu_heavy = True  # every extracted fact embedded, the rows written

    def hold(self, pending: Pending) -> Hold | None:
        """A retain with items the LLM extracts waits for a spent bank's budget to free."""
        hold = budget_hold(pending)
        if hold is None:
            return None
        payload = Operation.objects.filter(id=pending.id).values_list("payload", flat=True).first()
        try:
            items = [RetainItem.from_json(item) for item in (payload or {}).get("items", [])]
        except (TypeError, ValueError):
            return None  # unreadable: its run fails it without spending
        return hold if any(uses_llm(item) for item in items) else None

    def run(self, job: Job) -> None:
        try:
            items = [RetainItem.from_json(item) for item in job.payload.get("items", [])]
        except (TypeError, ValueError) as exc:
            # A payload that does not decode will not decode on the next attempt either.
            raise OperationFailure(f"retain payload unreadable: {exc}", retryable=False) from exc
        job.result_metadata = {**job.result_metadata, "items_count": len(items)}
        try:
            with job.llm_accounting():
                memories_retain(
                    bank_id=job.bank_id,
                    items=items,
                    document_tags=job.payload.get("document_tags") or None,
                    before_commit=job.complete_in_transaction,
                    operation_id=job.id,
                )
        except (UpstreamFailed, Unavailable):
            raise  # the LLM or the embedder failed: a later attempt may succeed
        except DomainError as exc:
            # Bad input does not get better by retrying.
            raise OperationFailure(f"retain rejected: {exc.detail}", retryable=False) from exc


class ConsolidationHandler:
    operation_type = BankOperationType.CONSOLIDATION
    cpu_heavy = True  # the facts' vectors parsed and averaged, observations embedded

    def hold(self, pending: Pending) -> Hold | None:
        return budget_hold(pending)

    def run(self, job: Job) -> None:
        with job.llm_accounting():
            try:
                consolidation_run(job=job)
            except LLMNotConfigured as exc:
                # Queued while an LLM was configured; retrying will not configure one.
                raise OperationFailure(f"consolidation: {exc.detail}", retryable=False) from exc
        metrics.consolidation_runs_total.labels(outcome="completed").inc()

    def on_attempt_failed(self, job: Job, exc: BaseException, *, final: bool) -> None:
        """Rounds that committed before the operation ended ``failed`` (its last attempt, or
        its retry handed to a consolidation already queued) still wrote observations: the
        listeners hear about them, since no completion of this chain will."""
        op = Operation.objects.filter(id=job.id).only("status", "result_metadata").first()
        if op is None or op.status != FAILED:
            return
        metrics.consolidation_runs_total.labels(outcome="failed").inc()
        consolidation_completed(bank_id=job.bank_id, operation_id=job.id, counts=None,
                                error=str(exc) or type(exc).__name__)  # webhooks
        touched = Touched.from_metadata(op.result_metadata or {})
        if touched.scopes:
            with transaction.atomic():
                consolidation_completed_notify(ConsolidationCompleted(
                    bank_id=job.bank_id, operation_id=job.id, scopes=frozenset(touched.scopes)
                ))
